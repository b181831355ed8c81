/* termtext: visible escapes for the characters a terminal would act on (see termtext.h). */
#include "termtext.h"

#include <stdint.h>
#include <string.h>

/* Whether code point c (of a valid sequence of len bytes) is a bidi control, or a C1
 * control (U+0080-U+009F, two bytes in UTF-8). */
static bool codepoint_is_unsafe(uint32_t c)
{
    return (c >= 0x80 && c <= 0x9f) || c == 0x061c || c == 0x200e || c == 0x200f ||
           (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

/* The code point of the valid UTF-8 sequence s of len bytes (2 to 4). */
static uint32_t utf8_decode(const unsigned char *s, size_t len)
{
    uint32_t c = s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++)
        c = (c << 6) | (s[i] & 0x3f);
    return c;
}

static bool byte_is_layout(unsigned char c, unsigned flags)
{
    return (flags & TERMTEXT_KEEP_LAYOUT) && (c == '\n' || c == '\t');
}

/* How many bytes at s[i..n) are one character to escape (0: none; the character then
 * takes *len bytes, copied as it is). */
static size_t unsafe_at(const unsigned char *s, size_t i, size_t n, unsigned flags, size_t *len)
{
    unsigned char c = s[i];
    *len = 1;
    if (c >= 0x20 && c < 0x7f)
        return 0;
    if (c < 0x80)
        return byte_is_layout(c, flags) ? 0 : 1;
    size_t l = utf8_sequence_len(s + i, n - i);
    if (!l)
        return 1;
    *len = l;
    return codepoint_is_unsafe(utf8_decode(s + i, l)) ? l : 0;
}

bool termtext_is_safe(const char *s, size_t n, unsigned flags)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n && u[i] >= 0x20 && u[i] < 0x7f) /* nearly all text: printable ASCII */
        i++;
    for (size_t len; i < n; i += len)
        if (unsafe_at(u, i, n, flags, &len))
            return false;
    return true;
}

/* The escape of the character of len bytes at s. */
static void put_escape(struct strbuf *sb, const unsigned char *s, size_t len)
{
    if (len > 1) {
        strbuf_addf(sb, "\\u%04x", (unsigned)utf8_decode(s, len));
        return;
    }
    switch (s[0]) {
    case '\n':
        strbuf_adds(sb, "\\n");
        break;
    case '\t':
        strbuf_adds(sb, "\\t");
        break;
    case '\r':
        strbuf_adds(sb, "\\r");
        break;
    default:
        strbuf_addf(sb, "\\x%02x", s[0]);
    }
}

void termtext_escape(struct strbuf *sb, const char *s, size_t n, unsigned flags)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t clean = 0; /* the start of the text not yet copied */
    for (size_t i = 0, len; i < n; i += len) {
        size_t bad = unsafe_at(u, i, n, flags, &len);
        if (!bad)
            continue;
        strbuf_add(sb, s + clean, i - clean);
        put_escape(sb, u + i, bad);
        clean = i + len;
    }
    strbuf_add(sb, s + clean, n - clean);
}

char *termtext_dup(const char *s, unsigned flags)
{
    if (!s)
        return NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    termtext_escape(&sb, s, strlen(s), flags);
    return strbuf_detach(&sb);
}
