/* attachproto: frames and the detach keys of `gjob attach` (attachproto.h). */
#include "attachproto.h"

#include <ctype.h>
#include <string.h>

#include "util.h"

void attach_header(uint8_t *out, enum attach_type type, size_t len)
{
    out[0] = (uint8_t)type;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

static bool attach_type_known(uint8_t t)
{
    return t == ATTACH_HELLO || t == ATTACH_DATA || t == ATTACH_WINSIZE || t == ATTACH_NOTE ||
           t == ATTACH_END;
}

long attach_parse(const uint8_t *buf, size_t n, struct attach_frame *f)
{
    if (n >= 1 && !attach_type_known(buf[0]))
        return -1;
    if (n < ATTACH_HEADER)
        return 0;
    uint32_t len =
        (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | (uint32_t)buf[4];
    if (len > ATTACH_MAX_PAYLOAD)
        return -1;
    if (n - ATTACH_HEADER < len)
        return 0;
    f->type = (enum attach_type)buf[0];
    f->payload = buf + ATTACH_HEADER;
    f->len = len;
    return (long)(ATTACH_HEADER + len);
}

void attach_winsize_encode(uint8_t *out, unsigned rows, unsigned cols)
{
    rows = rows > 0xffff ? 0xffff : rows;
    cols = cols > 0xffff ? 0xffff : cols;
    out[0] = (uint8_t)(rows >> 8);
    out[1] = (uint8_t)rows;
    out[2] = (uint8_t)(cols >> 8);
    out[3] = (uint8_t)cols;
}

int attach_winsize_decode(const struct attach_frame *f, unsigned *rows, unsigned *cols)
{
    if (f->type != ATTACH_WINSIZE || f->len != 4)
        return -1;
    *rows = (unsigned)f->payload[0] << 8 | f->payload[1];
    *cols = (unsigned)f->payload[2] << 8 | f->payload[3];
    return *rows && *cols ? 0 : -1;
}

/* One key of the spec, word[0..len): a character, or ctrl-X. -1 if neither. */
static int attach_key_parse(const char *word, size_t len)
{
    if (len == 1)
        return (unsigned char)word[0];
    if (len == 6 && strncasecmp(word, "ctrl-", 5) == 0) {
        int c = toupper((unsigned char)word[5]);
        if ((c >= 'A' && c <= 'Z') || strchr("@[\\]^_", c))
            return c & 0x1f;
    }
    return -1;
}

int attach_keys_parse(const char *spec, struct attach_keys *k, char **err)
{
    memset(k, 0, sizeof(*k));
    for (const char *p = spec;; p++) {
        size_t len = strcspn(p, ",");
        int key = attach_key_parse(p, len);
        if (key < 0) {
            *err = xasprintf("bad detach keys '%s': give keys separated by commas, each one "
                             "character or ctrl-X (e.g. ctrl-b,d)",
                             spec);
            return -1;
        }
        if (k->n == ATTACH_MAX_KEYS) {
            *err = xasprintf("bad detach keys '%s': at most %d keys", spec, ATTACH_MAX_KEYS);
            return -1;
        }
        k->key[k->n++] = (uint8_t)key;
        p += len;
        if (!*p)
            return 0;
    }
}

bool attach_keys_feed(struct attach_keys *k, const uint8_t *in, size_t n, uint8_t *out,
                      size_t *out_n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (k->n && in[i] == k->key[k->matched]) {
            if (++k->matched == k->n) {
                k->matched = 0;
                *out_n = o;
                return true;
            }
            continue;
        }
        /* The held keys were the user's input after all: out first, then this byte,
         * which may itself start the sequence again. */
        memcpy(out + o, k->key, k->matched);
        o += k->matched;
        k->matched = 0;
        if (k->n && in[i] == k->key[0]) {
            k->matched = 1;
            if (k->n == 1) {
                k->matched = 0;
                *out_n = o;
                return true;
            }
            continue;
        }
        out[o++] = in[i];
    }
    *out_n = o;
    return false;
}
