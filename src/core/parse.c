/* parse: time limits, durations, job id lists and references, memory sizes, priorities
 * and shell quoting. Parsers are strict (no signs, spaces or trailing junk) and report
 * errors as one line that names the bad input and shows what is accepted. */
#include "parse.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <time.h>

#include "timefmt.h"
#include "util.h"

#define TIME_FORMS "use MM, MM:SS, HH:MM:SS or D-HH:MM:SS"

/* Unsigned decimal digits p[0..len) into *out: 0, -1 if not all digits or empty,
 * -2 on overflow. */
static int parse_digits(const char *p, size_t len, int64_t *out)
{
    int64_t v = 0;
    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, p[i] - '0', &v))
            return -2;
    }
    *out = v;
    return 0;
}

static int time_error(const char *s, const char *why, char **err)
{
    if (why)
        *err = xasprintf("invalid time limit '%s': %s; " TIME_FORMS, s, why);
    else
        *err = xasprintf("invalid time limit '%s': " TIME_FORMS, s);
    return -1;
}

int parse_time_limit(const char *s, int64_t *secs, char **err)
{
    int64_t days = 0, f[3];
    int nf = 0;
    const char *p = s;
    const char *dash = strchr(s, '-');

    if (s[0] == '-')
        return time_error(s, "must be positive", err);
    if (dash) {
        int r = parse_digits(s, (size_t)(dash - s), &days);
        if (r < 0)
            return time_error(s, r == -2 ? "too large" : NULL, err);
        p = dash + 1;
    }
    for (;;) {
        size_t len = strcspn(p, ":");
        if (nf == 3)
            return time_error(s, NULL, err);
        int r = parse_digits(p, len, &f[nf++]);
        if (r < 0)
            return time_error(s, r == -2 ? "too large" : NULL, err);
        if (p[len] == '\0')
            break;
        p += len + 1;
    }

    /* Normalise to hours, minutes, seconds; only the leading field is unbounded. */
    int64_t h = 0, m = 0, sec = 0;
    if (dash) {
        h = f[0];
        m = nf > 1 ? f[1] : 0;
        sec = nf > 2 ? f[2] : 0;
        if (h >= 24)
            return time_error(s, "hours must be under 24 after a day count", err);
    } else if (nf == 1) {
        m = f[0];
    } else if (nf == 2) {
        m = f[0];
        sec = f[1];
    } else {
        h = f[0];
        m = f[1];
        sec = f[2];
    }
    if (sec >= 60 || (m >= 60 && (dash || nf == 3)))
        return time_error(s, "minutes and seconds must be under 60", err);

    int64_t total;
    if (__builtin_mul_overflow(days, 24, &total) || __builtin_add_overflow(total, h, &total) ||
        __builtin_mul_overflow(total, 60, &total) || __builtin_add_overflow(total, m, &total) ||
        __builtin_mul_overflow(total, 60, &total) || __builtin_add_overflow(total, sec, &total))
        return time_error(s, "too large", err);
    if (total == 0)
        return time_error(s, "must be positive", err);
    *secs = total;
    return 0;
}

int parse_duration(const char *s, int64_t *secs, char **err)
{
    static const char units[] = "smhd";
    static const int64_t scale[] = {1, 60, 3600, 86400};
    size_t len = strlen(s);
    const char *u = len > 1 ? strchr(units, s[len - 1]) : NULL;
    int64_t n;
    char *why = NULL;
    if (u && *u && parse_digits(s, len - 1, &n) == 0 && n > 0 &&
        n <= INT64_MAX / scale[u - units]) {
        *secs = n * scale[u - units];
        return 0;
    }
    if (!u && parse_time_limit(s, secs, &why) == 0)
        return 0;
    free(why);
    *err = xasprintf("invalid duration '%s': use N followed by s, m, h or d (e.g. 24h), or "
                     "D-HH:MM:SS",
                     s);
    return -1;
}

/* One id of an id list item: positive. On error sets *err naming the item. */
static int id_list_id(const char *s, const char *p, size_t len, int64_t *id, char **err)
{
    int r = parse_digits(p, len, id);
    if (r == 0 && *id > 0)
        return 0;
    if (r == -2)
        *err = xasprintf("invalid job id list '%s': '%.*s' is too large", s, (int)len, p);
    else if (r == 0)
        *err = xasprintf("invalid job id list '%s': job ids start at 1", s);
    else
        *err = xasprintf("invalid job id list '%s': '%.*s' is not a job id; use e.g. 1,3,5-7", s,
                         (int)len, p);
    return -1;
}

int parse_id_ranges(const char *s, struct id_range **ranges, size_t *n, char **err)
{
    struct id_range *out = NULL;
    size_t count = 0, cap = 0;
    const char *p = s;

    if (*s == '\0') {
        *err = xstrdup("empty job id list; use e.g. 1,3,5-7");
        return -1;
    }
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *dash = memchr(p, '-', len);
        int64_t lo, hi;
        if (len == 0) {
            *err = xasprintf("invalid job id list '%s': empty item; use e.g. 1,3,5-7", s);
            goto fail;
        }
        if (id_list_id(s, p, dash ? (size_t)(dash - p) : len, &lo, err) < 0)
            goto fail;
        hi = lo;
        if (dash && id_list_id(s, dash + 1, len - (size_t)(dash + 1 - p), &hi, err) < 0)
            goto fail;
        if (hi < lo) {
            *err = xasprintf("invalid job id list '%s': range '%.*s' ends before it starts", s,
                             (int)len, p);
            goto fail;
        }
        if (count == cap) {
            cap = cap ? cap * 2 : 8;
            out = xrealloc(out, cap * sizeof(*out));
        }
        out[count++] = (struct id_range){lo, hi};
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *ranges = out;
    *n = count;
    return 0;
fail:
    free(out);
    return -1;
}

int parse_id_list(const char *s, int64_t **ids, size_t *n, char **err)
{
    struct id_range *r;
    size_t nr;
    if (parse_id_ranges(s, &r, &nr, err) < 0)
        return -1;
    uint64_t total = 0;
    for (size_t i = 0; i < nr; i++) {
        total += (uint64_t)(r[i].hi - r[i].lo) + 1;
        if (total > PARSE_ID_LIST_MAX) {
            *err = xasprintf("invalid job id list '%s': it names more than %d ids", s,
                             PARSE_ID_LIST_MAX);
            free(r);
            return -1;
        }
    }
    int64_t *out = xmalloc((total ? total : 1) * sizeof(*out));
    size_t count = 0;
    for (size_t i = 0; i < nr; i++) /* counted, not id <= hi: hi may be INT64_MAX */
        for (uint64_t k = 0; k <= (uint64_t)(r[i].hi - r[i].lo); k++)
            out[count++] = r[i].lo + (int64_t)k;
    free(r);
    *ids = out;
    *n = count;
    return 0;
}

int parse_job_ref(const char *s, int *back, char **err)
{
    int64_t v;
    if (s[0] != '@')
        return 0;
    if (s[1] == '\0') {
        *back = 0;
        return 1;
    }
    if (s[1] == '~' && parse_digits(s + 2, strlen(s + 2), &v) == 0 && v <= INT_MAX) {
        *back = (int)v;
        return 1;
    }
    *err = xasprintf("invalid job reference '%s': use @ (latest job) or @~N (N jobs before it)", s);
    return -1;
}

int parse_memory_mb(const char *s, int64_t *mb, char **err)
{
    static const struct {
        const char *suffix;
        int shift; /* log2 of the unit in KiB */
    } units[] = {
        {"", 10},  {"K", 0},   {"KB", 0},   {"KiB", 0}, {"M", 10},  {"MB", 10},  {"MiB", 10},
        {"G", 20}, {"GB", 20}, {"GiB", 20}, {"T", 30},  {"TB", 30}, {"TiB", 30},
    };
    size_t len = strspn(s, "0123456789");
    int64_t v, kib;
    int r = parse_digits(s, len, &v);

    for (size_t i = 0; r == 0 && i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(s + len, units[i].suffix) != 0)
            continue;
        if (v == 0) {
            *err = xasprintf("invalid memory size '%s': must be positive", s);
            return -1;
        }
        if (v > (INT64_MAX >> units[i].shift)) {
            *err = xasprintf("invalid memory size '%s': too large", s);
            return -1;
        }
        kib = v << units[i].shift;
        *mb = kib / 1024 + (kib % 1024 != 0);
        return 0;
    }
    if (r == -2 || s[0] == '-')
        *err = xasprintf("invalid memory size '%s': %s", s,
                         r == -2 ? "too large" : "must be positive");
    else
        *err = xasprintf("invalid memory size '%s': use MiB or a K, M, G or T suffix "
                         "(e.g. 512, 512M, 24G, 1T)",
                         s);
    return -1;
}

int parse_priority(const char *s, int *prio, char **err)
{
    int64_t v;
    if (parse_digits(s, strlen(s), &v) < 0 || v > 255) {
        *err = xasprintf("invalid priority '%s': use an integer from 0 to 255", s);
        return -1;
    }
    *prio = (int)v;
    return 0;
}

int parse_umask(const char *s, int *mask, char **err)
{
    size_t n = strlen(s);
    int v = 0;
    bool ok = n >= 1 && n <= 4;
    for (size_t i = 0; ok && i < n; i++) {
        ok = s[i] >= '0' && s[i] <= '7';
        v = v * 8 + (s[i] - '0');
    }
    if (!ok || v > 0777) {
        *err = xasprintf("invalid umask '%s': use 1 to 4 octal digits, at most 0777 (e.g. 022)", s);
        return -1;
    }
    *mask = v;
    return 0;
}

void format_umask(int mask, char buf[8])
{
    snprintf(buf, 8, "%04o", (unsigned)mask & 0777);
}

static bool shell_is_safe(const char *w)
{
    if (*w == '\0')
        return false;
    for (const char *p = w; *p; p++) {
        bool alnum =
            (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        if (!alnum && !strchr("_@%+=:,./-", *p))
            return false;
    }
    return true;
}

void shell_quote_add(struct strbuf *sb, const char *word)
{
    if (shell_is_safe(word)) {
        strbuf_adds(sb, word);
        return;
    }
    strbuf_addc(sb, '\'');
    for (const char *p = word; *p; p++) {
        if (*p == '\'')
            strbuf_adds(sb, "'\\''");
        else
            strbuf_addc(sb, *p);
    }
    strbuf_addc(sb, '\'');
}

char *shell_quote(const char *word)
{
    struct strbuf sb;
    strbuf_init(&sb);
    shell_quote_add(&sb, word);
    return strbuf_detach(&sb);
}

char *shell_join(int argc, char **argv)
{
    if (argc == 1)
        return xstrdup(argv[0]);
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < argc; i++) {
        char *q = shell_quote(argv[i]);
        if (i > 0)
            strbuf_addc(&sb, ' ');
        strbuf_adds(&sb, q);
        free(q);
    }
    return strbuf_detach(&sb);
}

/* Ours rather than sigabbrev_np, so that the shim, which links this file, builds with
 * musl too. */
static const char *const signal_names[] = {
    NULL,   "HUP",  "INT",  "QUIT", "ILL",    "TRAP",   "ABRT",  "BUS",  "FPE",  "KILL", "USR1",
    "SEGV", "USR2", "PIPE", "ALRM", "TERM",   "STKFLT", "CHLD",  "CONT", "STOP", "TSTP", "TTIN",
    "TTOU", "URG",  "XCPU", "XFSZ", "VTALRM", "PROF",   "WINCH", "POLL", "PWR",  "SYS",
};

const char *signal_name(int sig)
{
    return sig > 0 && sig < (int)(sizeof(signal_names) / sizeof(*signal_names)) ? signal_names[sig]
                                                                                : NULL;
}

int parse_signal_spec(const char *s, int *sig, int64_t *secs, bool *main_only, char **err)
{
    const char *p = s;
    *main_only = false;
    if ((p[0] == 'B' || p[0] == 'b') && p[1] == ':') {
        *main_only = true;
        p += 2;
    }
    const char *at = strchr(p, '@');
    size_t n = at ? (size_t)(at - p) : strlen(p);
    char name[32];
    if (n == 0 || n >= sizeof(name))
        goto bad;
    memcpy(name, p, n);
    name[n] = '\0';
    int num = -1;
    if (name[0] >= '0' && name[0] <= '9') {
        char *end;
        long v = strtol(name, &end, 10);
        if (*end || v < 1 || v > 64)
            goto bad;
        num = (int)v;
    } else {
        const char *bare = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
        for (int i = 1; signal_name(i) && num < 0; i++)
            if (strcasecmp(signal_name(i), bare) == 0)
                num = i;
        if (num < 0)
            goto bad;
    }
    int64_t t = PARSE_SIGNAL_DEFAULT_SECS;
    if (at) {
        char *end;
        if (!at[1] || at[1] < '0' || at[1] > '9')
            goto bad;
        long long v = strtoll(at + 1, &end, 10);
        if (*end || v < 0 || v > 65535)
            goto bad;
        t = v;
    }
    *sig = num;
    *secs = t;
    return 0;
bad:
    *err = xasprintf("invalid signal spec '%s': use [B:]SIG[@SECS], SIG a name like USR1 or "
                     "a number 1-64, SECS 0-65535 seconds before the time limit (default %d)",
                     s, PARSE_SIGNAL_DEFAULT_SECS);
    return -1;
}

char *format_signal_spec(int sig, int64_t secs, bool main_only)
{
    const char *abbrev = signal_name(sig);
    if (abbrev)
        return xasprintf("%s%s@%lld", main_only ? "B:" : "", abbrev, (long long)secs);
    return xasprintf("%s%d@%lld", main_only ? "B:" : "", sig, (long long)secs);
}

/* Digits only, exactly n of them, into *v. */
static bool fixed_digits(const char *s, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return true;
}

/* "HH:MM[:SS]" (hours 0-23, one or two digits) into h, m, sec. Returns the length
 * consumed, or 0. */
static size_t clock_time(const char *s, int *h, int *m, int *sec)
{
    size_t hl = (s[0] >= '0' && s[0] <= '9') ? ((s[1] >= '0' && s[1] <= '9') ? 2 : 1) : 0;
    if (!hl || !fixed_digits(s, (int)hl, h) || s[hl] != ':' || !fixed_digits(s + hl + 1, 2, m))
        return 0;
    size_t len = hl + 3;
    *sec = 0;
    if (s[len] == ':') {
        if (!fixed_digits(s + len + 1, 2, sec))
            return 0;
        len += 3;
    }
    if (*h > 23 || *m > 59 || *sec > 59)
        return 0;
    return len;
}

/* A zone designator after a date and time: "Z", "+08:00", "-0500" or "+08" (an optional
 * space before it). Returns the length consumed (0: none there), or -1 if what is there
 * is not one; *offset gets seconds east of UTC. */
static int zone_suffix(const char *s, int *offset)
{
    const char *p = *s == ' ' && s[1] ? s + 1 : s;
    *offset = 0;
    if (!*s)
        return 0;
    if ((p[0] == 'Z' || p[0] == 'z') && !p[1])
        return (int)(p + 1 - s);
    if (p[0] != '+' && p[0] != '-')
        return -1;
    int h, m = 0;
    const char *q = p + 1;
    if (!fixed_digits(q, 2, &h))
        return -1;
    q += 2;
    if (*q == ':')
        q++;
    if (*q && (!fixed_digits(q, 2, &m) || q[2]))
        return -1;
    if (*q)
        q += 2;
    if (h > 23 || m > 59 || (q[-1] == ':'))
        return -1;
    *offset = (p[0] == '-' ? -1 : 1) * (h * 3600 + m * 60);
    return (int)(q - s);
}

static int days_in_month(int y, int mo)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return mo == 2 && leap ? 29 : days[mo - 1];
}

int parse_datetime(const char *s, double *at, char **err)
{
    int y, mo, d, h = 0, m = 0, sec = 0;
    if (!fixed_digits(s, 4, &y) || s[4] != '-' || !fixed_digits(s + 5, 2, &mo) || s[7] != '-' ||
        !fixed_digits(s + 8, 2, &d) || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
        y < 1970)
        goto bad;
    const char *rest = s + 10;
    if (*rest == 'T' || *rest == 't' || (*rest == ' ' && rest[1] >= '0' && rest[1] <= '9')) {
        size_t len = clock_time(rest + 1, &h, &m, &sec);
        if (!len)
            goto bad;
        rest += 1 + len;
        if (*rest == '.') { /* RFC 3339 fractions of a second: dropped */
            size_t digits = strspn(rest + 1, "0123456789");
            if (!digits)
                goto bad;
            rest += 1 + digits;
        }
    }
    int offset;
    int zlen = zone_suffix(rest, &offset);
    if (zlen < 0 || rest[zlen])
        goto bad;
    struct tm want = {.tm_year = y - 1900,
                      .tm_mon = mo - 1,
                      .tm_mday = d,
                      .tm_hour = h,
                      .tm_min = m,
                      .tm_sec = sec,
                      .tm_isdst = -1};
    if (zlen > 0) { /* an explicit offset: the zone in use plays no part */
        *at = (double)timegm(&want) - offset;
        return 0;
    }
    timefmt_ready();
    time_t when = mktime(&want);
    if (when == (time_t)-1)
        goto bad;
    *at = (double)when;
    return 0;
bad:
    if (err)
        *err = xasprintf("invalid date and time '%s': use YYYY-MM-DD[THH:MM[:SS]] (in the "
                         "configured timezone), with Z or an offset like +08:00 or -0500 for "
                         "another zone",
                         s);
    return -1;
}

int parse_begin_time(const char *s, double now, double *at, char **err)
{
    /* "now+N" and gflow's shorter "+N"; a bare N is minutes, as gflow reads it. */
    bool relative = s[0] == '+' || strncasecmp(s, "now", 3) == 0;
    if (relative) {
        const char *p = s[0] == '+' ? s : s + 3;
        if (!*p) {
            *at = now;
            return 0;
        }
        if (*p != '+' || p[1] < '0' || p[1] > '9')
            goto bad;
        char *end;
        long long n = strtoll(p + 1, &end, 10);
        long long mult = 60;
        if (*end && !end[1]) {
            switch (*end) {
            case 's':
                mult = 1;
                break;
            case 'm':
                mult = 60;
                break;
            case 'h':
                mult = 3600;
                break;
            case 'd':
                mult = 86400;
                break;
            default:
                goto bad;
            }
        } else if (*end) {
            goto bad;
        }
        if (n < 0 || n > 100LL * 365 * 86400 / mult)
            goto bad;
        *at = now + (double)(n * mult);
        return 0;
    }
    timefmt_ready();
    time_t t = (time_t)now;
    struct tm tm;
    localtime_r(&t, &tm);
    int h = 0, m = 0, sec = 0;
    size_t len = clock_time(s, &h, &m, &sec);
    if (len && !s[len]) { /* today, or tomorrow if passed */
        tm.tm_hour = h;
        tm.tm_min = m;
        tm.tm_sec = sec;
        tm.tm_isdst = -1;
        time_t when = mktime(&tm);
        if ((double)when <= now - 1) {
            tm.tm_mday++;
            tm.tm_hour = h;
            tm.tm_min = m;
            tm.tm_sec = sec;
            tm.tm_isdst = -1;
            when = mktime(&tm);
        }
        *at = (double)when;
        return 0;
    }
    if (parse_datetime(s, at, NULL) == 0)
        return 0;
bad:
    *err = xasprintf("invalid time '%s': use HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]] (add Z or "
                     "an offset like +08:00 for another zone than the configured one) or "
                     "now+N[s|m|h|d] (a bare N is minutes; +N for short)",
                     s);
    return -1;
}

/* ---- arrays and sweeps ---- */

#define ARRAY_FORMS "use e.g. 1-10, 1-10:2, 1,3,7 or 0-99%%4"

int parse_array_spec(const char *s, int64_t **tasks, size_t *n, int64_t *max_concurrent, char **err)
{
    int64_t *out = NULL;
    size_t count = 0, cap = 0;
    *tasks = NULL;
    *n = 0;
    *max_concurrent = 0;
    const char *pct = strchr(s, '%');
    size_t body = pct ? (size_t)(pct - s) : strlen(s);
    if (pct) {
        int64_t k;
        if (parse_digits(pct + 1, strlen(pct + 1), &k) < 0 || k < 1 || k > 1000000) {
            *err = xasprintf("invalid array '%s': %%K needs a number of tasks from 1 to "
                             "1000000; " ARRAY_FORMS,
                             s);
            return -1;
        }
        *max_concurrent = k;
    }
    const char *p = s, *end = s + body;
    if (body == 0)
        goto bad;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);
        const char *dash = memchr(p, '-', len);
        const char *colon = memchr(p, ':', len);
        int64_t lo, hi, step = 1;
        size_t lo_len = dash ? (size_t)(dash - p) : (colon ? (size_t)(colon - p) : len);
        if (parse_digits(p, lo_len, &lo) < 0)
            goto bad;
        hi = lo;
        if (colon && !dash)
            goto bad;
        if (dash) {
            const char *h = dash + 1;
            size_t h_len = (colon ? (size_t)(colon - h) : (size_t)(p + len - h));
            if (parse_digits(h, h_len, &hi) < 0)
                goto bad;
            if (colon &&
                (parse_digits(colon + 1, (size_t)(p + len - colon - 1), &step) < 0 || step < 1))
                goto bad;
        }
        if (lo > PARSE_ARRAY_MAX_ID || hi > PARSE_ARRAY_MAX_ID) {
            *err = xasprintf("invalid array '%s': task ids go from 0 to %d", s, PARSE_ARRAY_MAX_ID);
            goto fail;
        }
        if (hi < lo) {
            *err =
                xasprintf("invalid array '%s': range '%.*s' ends before it starts", s, (int)len, p);
            goto fail;
        }
        size_t k = (size_t)((hi - lo) / step) + 1;
        if (count + k > PARSE_ARRAY_MAX_TASKS) {
            *err = xasprintf("invalid array '%s': more than %d tasks", s, PARSE_ARRAY_MAX_TASKS);
            goto fail;
        }
        if (count + k > cap) {
            cap = (count + k) * 2;
            out = xrealloc(out, cap * sizeof(*out));
        }
        for (size_t i = 0; i < k; i++) /* not t += step: that may overflow */
            out[count++] = lo + (int64_t)i * step;
        if (!comma)
            break;
        p = comma + 1;
        if (p == end)
            goto bad; /* trailing comma */
    }
    qsort(out, count, sizeof(*out), int64_cmp);
    size_t u = 0;
    for (size_t i = 0; i < count; i++)
        if (u == 0 || out[u - 1] != out[i])
            out[u++] = out[i];
    *tasks = out;
    *n = u;
    return 0;
bad:
    *err = xasprintf("invalid array '%s': " ARRAY_FORMS, s);
fail:
    free(out);
    return -1;
}

bool param_name_valid(const char *name)
{
    if (!*name || (*name >= '0' && *name <= '9'))
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

#define PARAM_MAX_VALUES 1000000

/* A number as a range endpoint: strict decimal (sign, digits, '.', exponent). */
static int param_number(const char *p, size_t len, double *out)
{
    if (len == 0 || len > 64)
        return -1;
    char buf[65];
    memcpy(buf, p, len);
    buf[len] = '\0';
    char *end;
    *out = strtod(buf, &end);
    if (*end || buf[0] == ' ' || !__builtin_isfinite(*out) ||
        strpbrk(buf, "xXnNiI")) /* no hex, nan, inf */
        return -1;
    return 0;
}

int parse_param(const char *s, char **name, char ***values, size_t *n, char **err)
{
    *name = NULL;
    *values = NULL;
    *n = 0;
    const char *eq = strchr(s, '=');
    if (!eq) {
        *err = xasprintf("invalid --param '%s': use NAME=v1,v2 or NAME=START:STOP[:STEP]", s);
        return -1;
    }
    char *nm = xstrndup(s, (size_t)(eq - s));
    if (!param_name_valid(nm)) {
        *err = xasprintf("invalid --param '%s': the name '%s' must be letters, digits and '_', "
                         "not starting with a digit",
                         s, nm);
        free(nm);
        return -1;
    }
    const char *spec = eq + 1;
    char **out = NULL;
    size_t count = 0, cap = 0;
    const char *c1 = strchr(spec, ':');
    if (c1 && !strchr(spec, ',')) {
        const char *c2 = strchr(c1 + 1, ':');
        double start, stop, step = 1;
        if (param_number(spec, (size_t)(c1 - spec), &start) < 0 ||
            param_number(c1 + 1, c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1), &stop) < 0 ||
            (c2 && param_number(c2 + 1, strlen(c2 + 1), &step) < 0) || step <= 0) {
            *err = xasprintf("invalid --param range '%s': use START:STOP[:STEP] with numbers "
                             "and a STEP > 0",
                             spec);
            free(nm);
            return -1;
        }
        if (stop < start || (stop - start) / step >= PARAM_MAX_VALUES) {
            *err = xasprintf("invalid --param range '%s': %s", spec,
                             stop < start ? "STOP is below START" : "too many values");
            free(nm);
            return -1;
        }
        /* i * step from start (no accumulated error); STOP included within a tolerance. */
        size_t k = (size_t)((stop - start) / step + 1e-9) + 1;
        out = xmalloc(k * sizeof(*out));
        for (size_t i = 0; i < k; i++) {
            double v = start + (double)i * step;
            char buf[64];
            snprintf(buf, sizeof(buf), "%.12g", v);
            if (!strcmp(buf, "-0"))
                strcpy(buf, "0");
            out[count++] = xstrdup(buf);
        }
    } else {
        const char *p = spec;
        for (;;) {
            size_t len = strcspn(p, ",");
            if (count == cap) {
                cap = cap ? cap * 2 : 8;
                out = xrealloc(out, cap * sizeof(*out));
            }
            out[count++] = xstrndup(p, len);
            if (!p[len])
                break;
            p += len + 1;
        }
        if (count == 1 && !*out[0]) {
            *err = xasprintf("invalid --param '%s': no values", s);
            free(out[0]);
            free(out);
            free(nm);
            return -1;
        }
    }
    *name = nm;
    *values = out;
    *n = count;
    return 0;
}

int parse_csv(const char *text, char ***header, size_t *n_cols, char ***cells, size_t *n_rows,
              char **err)
{
    char **all = NULL;
    size_t count = 0, cap = 0, cols = 0, row_fields = 0, line = 1, rows = 0;
    const char *p = text;
    struct strbuf f;
    strbuf_init(&f);
    *header = *cells = NULL;
    *n_cols = *n_rows = 0;
    while (*p) {
        /* One row. */
        if (*p == '\n' || (*p == '\r' && p[1] == '\n')) { /* blank line */
            p += *p == '\r' ? 2 : 1;
            line++;
            continue;
        }
        row_fields = 0;
        for (;;) {
            strbuf_reset(&f);
            if (*p == '"') {
                p++;
                for (;;) {
                    if (!*p) {
                        *err = xasprintf("line %zu: a quoted field is not closed", line);
                        goto fail;
                    }
                    if (*p == '"' && p[1] == '"') {
                        strbuf_addc(&f, '"');
                        p += 2;
                    } else if (*p == '"') {
                        p++;
                        break;
                    } else {
                        if (*p == '\n')
                            line++;
                        strbuf_addc(&f, *p++);
                    }
                }
                if (*p && *p != ',' && *p != '\n' && !(*p == '\r' && p[1] == '\n')) {
                    *err = xasprintf("line %zu: text after a quoted field", line);
                    goto fail;
                }
            } else {
                size_t len = strcspn(p, ",\r\n");
                while (p[len] == '\r' && p[len + 1] != '\n') /* a lone CR is text */
                    len += 1 + strcspn(p + len + 1, ",\r\n");
                strbuf_add(&f, p, len);
                p += len;
            }
            if (count == cap) {
                cap = cap ? cap * 2 : 16;
                all = xrealloc(all, cap * sizeof(*all));
            }
            all[count++] = xstrdup(f.buf ? f.buf : "");
            row_fields++;
            if (*p == ',') {
                p++;
                continue;
            }
            break;
        }
        if (rows == 0)
            cols = row_fields;
        else if (row_fields != cols) {
            *err =
                xasprintf("line %zu: %zu fields, but the header has %zu", line, row_fields, cols);
            goto fail;
        }
        rows++;
        if (*p == '\r')
            p++;
        if (*p == '\n') {
            p++;
            line++;
        }
    }
    if (rows == 0) {
        *err = xstrdup("the file is empty: it needs a header row naming the parameters");
        goto fail;
    }
    *header = all;
    *n_cols = cols;
    *cells = all + cols; /* points into the same allocation: free *header only */
    *n_rows = rows - 1;
    strbuf_free(&f);
    return 0;
fail:
    for (size_t i = 0; i < count; i++)
        free(all[i]);
    free(all);
    strbuf_free(&f);
    return -1;
}
