/* fuzz_parse: the small grammars of parse.h, as the CLI and the daemon read them from
 * users (ids=... of GET /v1/jobs, gcancel, gbatch --time, --mem, --signal, --begin,
 * --array, --param, --param-file, shell quoting). The first byte chooses the parser; the
 * rest is its input (a C string, cut at the first NUL; for shell quoting, NUL-separated
 * words).
 *
 * Invariants, beyond no crash and no leak: every parser either succeeds with a result in
 * its documented range or fails with a message; and what it read, written back in the
 * canonical form, parses into the same result:
 *   id lists and arrays   the ids joined by commas (arrays: sorted, unique, with %K);
 *                         an id list's ranges (parse_id_ranges) expand to its ids
 *   time limits           format_duration -> the same seconds
 *   memory sizes          "<MiB>" and "<MiB>M" -> the same MiB
 *   signal specs          format_signal_spec -> the same triple, and the same text
 *   begin times (UTC)     "YYYY-MM-DDTHH:MM:SS" of the result -> the same time
 *   job references        "@~N" -> the same N;  priorities: "N" -> N
 *   --param lists         the values joined by commas are the spec; ranges are numbers
 *   CSV                   every field quoted -> the same header and cells
 *   shell_quote/join      read back by a small POSIX-sh word splitter -> the same words */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz.h"
#include "parse.h"
#include "timefmt.h"
#include "util.h"

#define FUZZ_NOW 1700000000.0

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setenv("TZ", "UTC", 1); /* begin times are local: one zone without DST folds */
    tzset();
    return 0;
}

static char *join_ids(const int64_t *ids, size_t n)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++)
        strbuf_addf(&sb, "%s%lld", i ? "," : "", (long long)ids[i]);
    return strbuf_detach(&sb);
}

static void fuzz_id_list(const char *s)
{
    int64_t *ids;
    size_t n;
    char *err = NULL;
    /* The ranges as written, and the list they expand to, agree. */
    struct id_range *r;
    size_t nr;
    int rr = parse_id_ranges(s, &r, &nr, &err);
    if (rr < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        err = NULL;
    }
    if (parse_id_list(s, &ids, &n, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        if (rr == 0) { /* only a list too long to expand */
            uint64_t total = 0;
            for (size_t i = 0; i < nr && total <= PARSE_ID_LIST_MAX; i++)
                total += (uint64_t)(r[i].hi - r[i].lo) + 1;
            FUZZ_CHECK(total > PARSE_ID_LIST_MAX);
            free(r);
        }
        return;
    }
    FUZZ_CHECK(rr == 0 && n >= 1 && n <= PARSE_ID_LIST_MAX);
    size_t at = 0;
    for (size_t i = 0; i < nr; i++) {
        FUZZ_CHECK(r[i].lo >= 1 && r[i].hi >= r[i].lo);
        for (uint64_t k = 0; k <= (uint64_t)(r[i].hi - r[i].lo); k++) {
            FUZZ_CHECK(at < n && ids[at] == r[i].lo + (int64_t)k);
            at++;
        }
    }
    FUZZ_CHECK(at == n);
    free(r);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(ids[i] > 0);
    if (n <= 10000) {
        char *text = join_ids(ids, n);
        int64_t *ids2;
        size_t n2;
        FUZZ_CHECK(parse_id_list(text, &ids2, &n2, &err) == 0);
        FUZZ_CHECK(n2 == n && memcmp(ids, ids2, n * sizeof(*ids)) == 0);
        free(ids2);
        free(text);
    }
    free(ids);
}

static void fuzz_time_limit(const char *s)
{
    int64_t secs, again;
    char *err = NULL;
    if (parse_time_limit(s, &secs, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        return;
    }
    FUZZ_CHECK(secs > 0);
    char *text = format_duration(secs);
    if (parse_time_limit(text, &again, &err) < 0)
        FUZZ_CHECK_TEXT(!"format_duration's text parses", text, err);
    FUZZ_CHECK_TEXT(again == secs, s, text);
    free(text);
}

static void fuzz_memory(const char *s)
{
    int64_t mb, again;
    char *err = NULL;
    if (parse_memory_mb(s, &mb, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        return;
    }
    FUZZ_CHECK(mb > 0);
    if (mb > (INT64_MAX >> 10))
        return; /* from near INT64_MAX KiB: more MiB than the MiB form accepts (8 EiB) */
    char text[40];
    snprintf(text, sizeof(text), "%lld", (long long)mb);
    FUZZ_CHECK(parse_memory_mb(text, &again, &err) == 0 && again == mb);
    snprintf(text, sizeof(text), "%lldM", (long long)mb);
    FUZZ_CHECK(parse_memory_mb(text, &again, &err) == 0 && again == mb);
}

static void fuzz_signal(const char *s)
{
    int sig, sig2;
    int64_t secs, secs2;
    bool main_only, main_only2;
    char *err = NULL;
    if (parse_signal_spec(s, &sig, &secs, &main_only, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        return;
    }
    FUZZ_CHECK(sig >= 1 && sig <= 64 && secs >= 0 && secs <= 65535);
    char *text = format_signal_spec(sig, secs, main_only);
    if (parse_signal_spec(text, &sig2, &secs2, &main_only2, &err) < 0)
        FUZZ_CHECK_TEXT(!"format_signal_spec's text parses", text, err);
    FUZZ_CHECK_TEXT(sig == sig2 && secs == secs2 && main_only == main_only2, s, text);
    char *text2 = format_signal_spec(sig2, secs2, main_only2);
    FUZZ_CHECK_TEXT(strcmp(text, text2) == 0, text, text2);
    free(text);
    free(text2);
}

static void fuzz_begin(const char *s)
{
    double at;
    char *err = NULL;
    if (parse_begin_time(s, FUZZ_NOW, &at, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        return;
    }
    FUZZ_CHECK(isfinite(at));
    if (strncasecmp(s, "now", 3) == 0)
        FUZZ_CHECK(at >= FUZZ_NOW && at <= FUZZ_NOW + 101.0 * 365 * 86400);
    else if (strchr(s, '-') == NULL) /* HH:MM[:SS]: today or tomorrow */
        FUZZ_CHECK(at >= FUZZ_NOW - 1 && at <= FUZZ_NOW + 86400 + 1);
    time_t t = (time_t)at;
    struct tm tm;
    FUZZ_CHECK(localtime_r(&t, &tm) != NULL);
    if (tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999)
        return;
    char text[64];
    snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    double again;
    if (parse_begin_time(text, FUZZ_NOW, &again, &err) < 0)
        FUZZ_CHECK_TEXT(!"the written time parses", text, err);
    FUZZ_CHECK_TEXT(again == floor(at), s, text);
}

static void fuzz_array(const char *s)
{
    int64_t *tasks, k;
    size_t n;
    char *err = NULL;
    if (parse_array_spec(s, &tasks, &n, &k, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        return;
    }
    FUZZ_CHECK(n >= 1 && n <= PARSE_ARRAY_MAX_TASKS && k >= 0);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(tasks[i] >= 0 && tasks[i] <= PARSE_ARRAY_MAX_ID);
        FUZZ_CHECK(i == 0 || tasks[i - 1] < tasks[i]);
    }
    if (n <= 10000) {
        char *ids = join_ids(tasks, n);
        char *text = k ? xasprintf("%s%%%lld", ids, (long long)k) : xstrdup(ids);
        int64_t *tasks2, k2;
        size_t n2;
        if (parse_array_spec(text, &tasks2, &n2, &k2, &err) < 0)
            FUZZ_CHECK_TEXT(!"the written array parses", text, err);
        FUZZ_CHECK(n2 == n && k2 == k && memcmp(tasks, tasks2, n * sizeof(*tasks)) == 0);
        free(tasks2);
        free(text);
        free(ids);
    }
    free(tasks);
}

static void fuzz_param(const char *s)
{
    char *name, **values;
    size_t n;
    char *err = NULL;
    if (parse_param(s, &name, &values, &n, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        return;
    }
    FUZZ_CHECK(param_name_valid(name) && n >= 1);
    const char *spec = strchr(s, '=') + 1;
    bool range = strchr(spec, ':') && !strchr(spec, ',');
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++) {
        if (range) {
            char *end;
            double v = strtod(values[i], &end);
            FUZZ_CHECK(*values[i] && !*end && isfinite(v));
        } else {
            strbuf_addf(&sb, "%s%s", i ? "," : "", values[i]);
        }
        free(values[i]);
    }
    if (!range)
        FUZZ_CHECK_TEXT(strcmp(sb.buf ? sb.buf : "", spec) == 0, spec, sb.buf);
    strbuf_free(&sb);
    free(values);
    free(name);
}

static void put_csv_field(struct strbuf *sb, const char *s)
{
    strbuf_addc(sb, '"');
    for (; *s; s++) {
        if (*s == '"')
            strbuf_addc(sb, '"');
        strbuf_addc(sb, *s);
    }
    strbuf_addc(sb, '"');
}

static void fuzz_csv(const char *s)
{
    char **header, **cells, *err = NULL;
    size_t cols, rows;
    if (parse_csv(s, &header, &cols, &cells, &rows, &err) < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        return;
    }
    FUZZ_CHECK(cols >= 1 && cells == header + cols);
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t r = 0; r <= rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            if (c)
                strbuf_addc(&sb, ',');
            put_csv_field(&sb, header[r * cols + c]);
        }
        strbuf_adds(&sb, r % 2 ? "\r\n" : "\n");
    }
    char **header2, **cells2;
    size_t cols2, rows2;
    if (parse_csv(sb.buf, &header2, &cols2, &cells2, &rows2, &err) < 0)
        FUZZ_CHECK_TEXT(!"the written CSV parses", sb.buf, err);
    FUZZ_CHECK(cols2 == cols && rows2 == rows);
    for (size_t i = 0; i < cols * (rows + 1); i++) {
        FUZZ_CHECK_TEXT(strcmp(header[i], header2[i]) == 0, header[i], header2[i]);
        free(header[i]);
        free(header2[i]);
    }
    free(header);
    free(header2);
    strbuf_free(&sb);
}

/* Splits s into words as /bin/sh would for the forms shell_quote writes: blanks
 * separate words, '...' is literal, \c is c. NULL-terminated array (to free). */
static char **sh_words(const char *s, size_t *n)
{
    char **words = xcalloc(strlen(s) + 2, sizeof(*words));
    struct strbuf w;
    strbuf_init(&w);
    bool in_word = false;
    *n = 0;
    for (const char *p = s;; p++) {
        if (!*p || *p == ' ') {
            if (in_word)
                words[(*n)++] = w.buf ? strbuf_detach(&w) : xstrdup("");
            in_word = false;
            if (!*p)
                break;
            continue;
        }
        in_word = true;
        if (*p == '\'') {
            const char *close = strchr(p + 1, '\'');
            FUZZ_CHECK(close != NULL);
            strbuf_add(&w, p + 1, (size_t)(close - p - 1));
            p = close;
        } else if (*p == '\\') {
            FUZZ_CHECK(p[1] != '\0');
            strbuf_addc(&w, *++p);
        } else {
            /* Outside quotes only characters the shell takes literally. */
            FUZZ_CHECK(strchr("_@%+=:,./-", *p) || (*p >= 'a' && *p <= 'z') ||
                       (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'));
            strbuf_addc(&w, *p);
        }
    }
    strbuf_free(&w);
    return words;
}

static void fuzz_shell(const uint8_t *data, size_t size)
{
    /* NUL-separated words. */
    char *buf = fuzz_cstr(data, size);
    char *argv[64];
    int argc = 0;
    for (size_t at = 0; at <= size && argc < 64;) {
        argv[argc++] = buf + at;
        at += strlen(buf + at) + 1;
    }
    for (int i = 0; i < argc; i++) {
        char *q = shell_quote(argv[i]);
        size_t n;
        char **words = sh_words(q, &n);
        FUZZ_CHECK_TEXT(n == 1 && strcmp(words[0], argv[i]) == 0, argv[i], q);
        free(words[0]);
        free(words);
        free(q);
    }
    char *line = shell_join(argc, argv);
    if (argc == 1) {
        FUZZ_CHECK(strcmp(line, argv[0]) == 0); /* one word is used as it is */
    } else {
        size_t n;
        char **words = sh_words(line, &n);
        FUZZ_CHECK(n == (size_t)argc);
        for (size_t i = 0; i < n; i++) {
            FUZZ_CHECK_TEXT(strcmp(words[i], argv[i]) == 0, argv[i], words[i]);
            free(words[i]);
        }
        free(words);
    }
    free(line);
    free(buf);
}

static void fuzz_small(const char *s)
{
    int back, prio;
    char *err = NULL, text[32];
    int r = parse_job_ref(s, &back, &err);
    FUZZ_CHECK(r >= -1 && r <= 1);
    if (r == 1) {
        FUZZ_CHECK(back >= 0);
        snprintf(text, sizeof(text), back ? "@~%d" : "@", back);
        int back2 = -1;
        FUZZ_CHECK(parse_job_ref(text, &back2, &err) == 1 && back2 == back);
    } else if (r < 0) {
        FUZZ_CHECK(err && *err);
        free(err);
        err = NULL;
    }
    if (parse_priority(s, &prio, &err) == 0) {
        FUZZ_CHECK(prio >= 0 && prio <= 255);
    } else {
        FUZZ_CHECK(err && *err);
        free(err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] % 10;
    data++;
    size--;
    if (which == 9) {
        fuzz_shell(data, size);
        return 0;
    }
    char *s = fuzz_cstr(data, size);
    switch (which) {
    case 0:
        fuzz_id_list(s);
        break;
    case 1:
        fuzz_time_limit(s);
        break;
    case 2:
        fuzz_memory(s);
        break;
    case 3:
        fuzz_signal(s);
        break;
    case 4:
        fuzz_begin(s);
        break;
    case 5:
        fuzz_array(s);
        break;
    case 6:
        fuzz_param(s);
        break;
    case 7:
        fuzz_csv(s);
        break;
    default:
        fuzz_small(s);
        break;
    }
    free(s);
    return 0;
}
