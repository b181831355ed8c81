/* util: allocation wrappers, the string buffer and small string helpers. */
#include "util.h"

#include <errno.h>
#include <math.h>  /* isfinite */
#include <stdio.h> /* vsnprintf: formatting into memory */
#include <stdlib.h>
#include <string.h>

/* Out of memory: nothing sensible is left to do (tmux's xmalloc does the same). The
 * core does no I/O, so the abort itself is the message. */
static void oom_abort(void)
{
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom_abort();
    return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p)
        oom_abort();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom_abort();
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (!p)
        oom_abort();
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (!p)
        oom_abort();
    return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    char *p;
    if (vasprintf(&p, fmt, ap) < 0)
        oom_abort();
    return p;
}

size_t format_int(char out[24], long long v)
{
    char buf[24];
    char *p = buf + sizeof(buf);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    size_t n = (size_t)(buf + sizeof(buf) - p);
    memcpy(out, p, n);
    out[n] = '\0';
    return n;
}

const char *plural_s(long long n)
{
    return n == 1 || n == -1 ? "" : "s";
}

size_t format_real_short(char out[32], double v)
{
    if (!isfinite(v)) /* JSON has none; jansson refuses to make them */
        return (size_t)snprintf(out, 32, "null");
    int n = 0;
    /* %.15g is exact for every decimal of up to 15 digits, so when it reads back it is
     * the shortest; else 16 or 17 digits (17 always reads back). */
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(out, 32, "%.*g", prec, v);
        if (prec == 17 || strtod(out, NULL) == v)
            break;
    }
    if (!strpbrk(out, ".eEn")) { /* "1" -> "1.0": stays a real */
        memcpy(out + n, ".0", 3);
        n += 2;
    }
    return (size_t)n;
}

char *json_text_short_reals(const char *text)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const char *p = text;
    while (*p) {
        if (*p == '"') { /* a string, its escapes included, as it is */
            const char *q = p + 1;
            while (*q && *q != '"')
                q += q[0] == '\\' && q[1] ? 2 : 1;
            if (*q)
                q++;
            strbuf_add(&sb, p, (size_t)(q - p));
            p = q;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            size_t n = strspn(p, "0123456789+-.eE");
            if (memchr(p, '.', n) || memchr(p, 'e', n) || memchr(p, 'E', n)) {
                char num[32];
                strbuf_add(&sb, num, format_real_short(num, strtod(p, NULL)));
            } else {
                strbuf_add(&sb, p, n);
            }
            p += n;
        } else {
            strbuf_addc(&sb, *p++);
        }
    }
    return strbuf_detach(&sb);
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = xvasprintf(fmt, ap);
    va_end(ap);
    return p;
}

void strbuf_init(struct strbuf *sb)
{
    sb->buf = NULL;
    sb->len = 0;
    sb->cap = 0;
}

void strbuf_free(struct strbuf *sb)
{
    free(sb->buf);
    strbuf_init(sb);
}

void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    if (sb->buf)
        sb->buf[0] = '\0';
}

void strbuf_reserve(struct strbuf *sb, size_t extra)
{
    if (sb->len + extra + 1 <= sb->cap)
        return;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    sb->buf = xrealloc(sb->buf, cap);
    sb->cap = cap;
}

void strbuf_add(struct strbuf *sb, const void *data, size_t n)
{
    strbuf_reserve(sb, n);
    if (n)
        memcpy(sb->buf + sb->len, data, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

void strbuf_adds(struct strbuf *sb, const char *s)
{
    strbuf_add(sb, s, strlen(s));
}

void strbuf_addc(struct strbuf *sb, char c)
{
    if (sb->len + 2 > sb->cap)
        strbuf_reserve(sb, 1);
    sb->buf[sb->len++] = c;
    sb->buf[sb->len] = '\0';
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        strbuf_reserve(sb, (size_t)n);
        vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap2);
        sb->len += (size_t)n;
    }
    va_end(ap2);
}

char *strbuf_detach(struct strbuf *sb)
{
    char *p = sb->buf ? sb->buf : xstrdup("");
    strbuf_init(sb);
    return p;
}

void strvec_init(struct strvec *sv)
{
    sv->v = NULL;
    sv->n = sv->cap = 0;
}

void strvec_free(struct strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    strvec_init(sv);
}

static void strvec_take(struct strvec *sv, char *s)
{
    if (sv->n + 2 > sv->cap) {
        sv->cap = sv->cap ? sv->cap * 2 : 16;
        sv->v = xrealloc(sv->v, sv->cap * sizeof(*sv->v));
    }
    sv->v[sv->n++] = s;
    sv->v[sv->n] = NULL;
}

void strvec_push(struct strvec *sv, const char *s)
{
    strvec_take(sv, xstrdup(s));
}

void strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strvec_take(sv, xvasprintf(fmt, ap));
    va_end(ap);
}

size_t utf8_sequence_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, min = 0x80, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, min = 0x800, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void strbuf_add_utf8_clean(struct strbuf *sb, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, clean = 0; /* u[clean..i) is valid and not copied yet */
    while (i < n) {
        size_t len = u[i] ? utf8_sequence_len(u + i, n - i) : 0;
        if (len) {
            i += len;
            continue;
        }
        strbuf_add(sb, u + clean, i - clean);
        strbuf_adds(sb, "\xef\xbf\xbd"); /* U+FFFD REPLACEMENT CHARACTER */
        clean = ++i;
    }
    strbuf_add(sb, u + clean, n - clean);
}

/* The escape of c (a quote, a backslash or a control character) in style. */
static void json_escape_byte(struct strbuf *sb, unsigned char c, enum json_str_style style)
{
    static const char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
    bool jansson = style == JSON_STR_JANSSON;
    const char *short_form = c == '"'               ? "\\\""
                             : c == '\\'            ? "\\\\"
                             : c == '\n'            ? "\\n"
                             : c == '\t'            ? "\\t"
                             : jansson && c == '\b' ? "\\b"
                             : jansson && c == '\f' ? "\\f"
                             : jansson && c == '\r' ? "\\r"
                                                    : NULL;
    if (short_form) {
        strbuf_adds(sb, short_form);
        return;
    }
    const char *hex = jansson ? upper : lower;
    char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
    strbuf_add(sb, u, sizeof(u));
}

void strbuf_add_json_string(struct strbuf *sb, const char *s, enum json_str_style style)
{
    if (!s) {
        strbuf_adds(sb, "null");
        return;
    }
    unsigned char del = style == JSON_STR_JANSSON ? 0 : 0x7f; /* 0: none escaped */
    strbuf_addc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char *run = p;
        while (*p >= 0x20 && *p != '"' && *p != '\\' && *p != del)
            p++;
        if (p > run)
            strbuf_add(sb, run, (size_t)(p - run));
        if (!*p)
            break;
        json_escape_byte(sb, *p, style);
    }
    strbuf_addc(sb, '"');
}

bool str_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int int64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int parse_int64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 0;
}
