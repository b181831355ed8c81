/* util: allocation wrappers that abort on exhaustion, a growable string buffer and
 * small string helpers shared by every gflow program. Pure: no I/O. */
#ifndef GFLOW_UTIL_H
#define GFLOW_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* The decimal text of v, without printf (cheap enough for 10,000-row tables): into out,
 * terminated, returning its length. */
size_t format_int(char out[24], long long v);
/* The plural ending of a count's noun: "s" unless n is 1 or -1 ("1 job", "2 jobs",
 * "0 jobs"): printf("%zu job%s", n, plural_s(n)). */
const char *plural_s(long long n);
/* A real number as the shortest text that reads back as the same double (0.02319, not
 * %.17g's 0.023189999999999999), as Rust's and JavaScript's number printing: into out,
 * terminated, returning its length. Always a real to a JSON reader: "1.0", "1e+21". */
size_t format_real_short(char out[32], double v);
/* JSON text with each real number (a number with '.' or an exponent, outside strings)
 * rewritten by format_real_short; the rest kept as it is. Malloc'd. */
char *json_text_short_reals(const char *text);

/* A growable NUL-terminated byte buffer. */
struct strbuf {
    char *buf;
    size_t len;
    size_t cap;
};
void strbuf_init(struct strbuf *sb);
void strbuf_free(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_reserve(struct strbuf *sb, size_t extra); /* room for extra more bytes */
void strbuf_add(struct strbuf *sb, const void *data, size_t n);
void strbuf_adds(struct strbuf *sb, const char *s);
void strbuf_addc(struct strbuf *sb, char c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *strbuf_detach(struct strbuf *sb); /* caller frees; sb is left empty */

/* A growing NULL-terminated array of strings it owns (an argv being built). */
struct strvec {
    char **v; /* v[n] is NULL once anything was pushed */
    size_t n, cap;
};
void strvec_init(struct strvec *sv);
void strvec_free(struct strvec *sv);
void strvec_push(struct strvec *sv, const char *s); /* copies s */
void strvec_pushf(struct strvec *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

bool str_starts_with(const char *s, const char *prefix);
/* The length of the valid UTF-8 sequence at s (at most n bytes, n >= 1), or 0 if there is
 * none: no overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629). */
size_t utf8_sequence_len(const unsigned char *s, size_t n);
/* Appends s[0..n) as valid UTF-8: every byte that starts no valid sequence, and every NUL,
 * becomes U+FFFD (paths and logs are bytes, not text). */
void strbuf_add_utf8_clean(struct strbuf *sb, const char *s, size_t n);

/* How strbuf_add_json_string escapes: gflow's own texts write \n, \t and \u00xx (lower
 * case, DEL too); JSON_STR_JANSSON writes what jansson's json_dumps writes (\b \f \n \r
 * \t, \u00XX, DEL as it is), for texts compared with jansson's. */
enum json_str_style { JSON_STR_GFLOW, JSON_STR_JANSSON };
/* Appends s as a JSON string literal (its bytes as they are: UTF-8 is the caller's
 * concern), or null for NULL. */
void strbuf_add_json_string(struct strbuf *sb, const char *s, enum json_str_style style);
/* qsort/bsearch comparison of two int64_t. */
int int64_cmp(const void *a, const void *b);

/* Strict decimal integer parse of the whole string; returns 0 or -1. */
int parse_int64(const char *s, int64_t *out);

#endif
