/* cli: what every gflow command-line program shares on top of the client: the one-line
 * error conventions ("<prog>: <message>", exit 1 for a failed request, 2 for a bad
 * command line), JSON requests with jansson, and resolving job id arguments
 * (`1,3,5-7`, `@`, `@~N`). */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "client.h"
#include "gflow_build.h"
#include "parse.h"
#include "termtext.h"
#include "timefmt.h"
#include "util.h"

static const char *cli_prog = "gflow";

/* timefmt's loader: the config's timezone, read only by a command that shows or reads a
 * time. A config that cannot be read is fatal, as for the socket's search. */
static void cli_load_timezone(void)
{
    char *err = NULL;
    if (client_load_timezone(&err) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", err);
}

void cli_use_timezone(const char *zone)
{
    char *err = NULL;
    if (timefmt_use_zone(zone, &err) < 0)
        cli_usage_error("invalid --timezone: %s", err);
}

void cli_init(const char *prog)
{
    const char *slash = strrchr(prog, '/');
    cli_prog = slash ? slash + 1 : prog;
    client_init(prog);
    timefmt_set_loader(cli_load_timezone);
    /* jansson would otherwise read /dev/urandom to seed its hash tables; a command only
     * parses its own daemon's answers, so hash flooding is not a concern here and the
     * syscalls are saved on every command. (Never in the daemon, which parses what
     * anyone sends.) */
    json_object_seed(1);
}

/* Writes the formatted text to out with controls and bidi overrides shown as visible
 * escapes (termtext.h), newlines and tabs kept: messages quote job names, commands and
 * the daemon's errors, which other users wrote. */
static void fputs_safe(FILE *out, const char *text)
{
    struct strbuf sb;
    strbuf_init(&sb);
    termtext_escape(&sb, text, strlen(text), TERMTEXT_KEEP_LAYOUT);
    fwrite(sb.buf, 1, sb.len, out);
    strbuf_free(&sb);
}

static void cli_vprint_safe(FILE *out, const char *fmt, va_list ap)
{
    char *text = xvasprintf(fmt, ap);
    fputs_safe(out, text);
    free(text);
}

void cli_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cli_vprint_safe(stdout, fmt, ap);
    va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cli_prog);
    cli_vprint_safe(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void cli_die(int status, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    /* "gflowd is not running: ..." reads the same from every program (client.h). */
    if (!client_is_connect_error(text))
        fprintf(stderr, "%s: ", cli_prog);
    fputs_safe(stderr, text);
    fputc('\n', stderr);
    free(text);
    exit(status);
}

void cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", cli_prog);
    cli_vprint_safe(stderr, fmt, ap);
    fprintf(stderr, "; see '%s --help'\n", cli_prog);
    va_end(ap);
    exit(CLI_EXIT_USAGE);
}

void cli_refuse_completion(const char *word)
{
    if (word && !strcmp(word, "completion"))
        cli_usage_error("'completion' comes first, before any option: '%s completion SHELL' "
                        "(bash, elvish, fish, powershell or zsh)",
                        cli_prog);
}

char *cli_option_error(char **argv, int c, const struct option *longopts)
{
    const char *a = optind > 0 ? argv[optind - 1] : NULL;
    if (a && a[0] == '-' && a[1] == '-') {
        /* The long option the word names (glibc also accepts unique prefixes). */
        size_t len = strcspn(a + 2, "=");
        const struct option *o = NULL;
        for (const struct option *p = longopts; p && p->name; p++) {
            if (strncmp(p->name, a + 2, len) == 0 && (!o || p->name[len] == '\0'))
                o = p;
        }
        bool valued = a[2 + len] == '=';
        if (o && c == ':')
            return xasprintf("option --%s needs a value", o->name);
        if (o && c == '?' && valued && o->has_arg == no_argument && optopt == o->val)
            return xasprintf("option --%s takes no value", o->name);
        /* '?' for an unknown short option sets optopt to it, and optind may still be on
         * a word before it ("--hold -xH"); for an unknown long option optopt is 0. */
        if (!(c == '?' && optopt > 0 && optopt < 256))
            return xasprintf("unknown option --%.*s", (int)len, a + 2);
    }
    if (c == ':')
        return xasprintf("option -%c needs a value", optopt);
    return xasprintf("unknown option -%c", optopt);
}

void cli_print_version(const char *name)
{
    printf("%s %s\n", name, GFLOW_VERSION);
}

void cli_common_option(int c, char **argv, const struct option *longopts, const char *name,
                       void (*help)(void))
{
    switch (c) {
    case CLI_OPT_SOCKET:
        client_set_socket(optarg);
        return;
    case CLI_OPT_CONFIG:
        client_set_config(optarg);
        return;
    case 'h':
        help();
        exit(0);
    case 'V':
        cli_print_version(name);
        exit(0);
    default:
        cli_usage_error("%s", cli_option_error(argv, c, longopts));
    }
}

int cli_finish(int status)
{
    client_close();
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_warn("cannot write to standard output: %s", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return status;
}

const char *cli_error_text(const json_t *reply)
{
    const char *e = json_string_value(json_object_get(reply, "error"));
    return e ? e : "the daemon reported an unknown error";
}

/* cli_request_json's request: -2 with *err (the caller frees it) where no usable reply
 * came back (the request could not be encoded or sent, or a success is not JSON). */
static int request_json(const char *method, const char *path_query, json_t *body_json, int *status,
                        json_t **reply, char **err)
{
    char *body = NULL;
    size_t body_len = 0;
    if (body_json) {
        body = json_dumps(body_json, JSON_COMPACT);
        if (!body) {
            *err = xstrdup("cannot encode the request as JSON");
            return -2;
        }
        body_len = strlen(body);
    }
    struct client_response r;
    int rc =
        client_request(method, path_query, body, body_len, "application/json", &r, NULL, NULL, err);
    free(body);
    if (rc < 0)
        return -2;
    if (status)
        *status = r.status;

    bool ok = r.status >= 200 && r.status < 300;
    json_t *j = NULL;
    if (r.body.len > 0) {
        json_error_t jerr;
        j = json_loadb(r.body.buf, r.body.len, 0, &jerr);
        if (!j && ok) {
            *err = xasprintf("gflowd sent a reply that is not valid JSON (%s)", jerr.text);
            client_response_free(&r);
            return -2;
        }
    }
    if (!ok && !json_is_string(json_object_get(j, "error"))) {
        /* Not our daemon's error shape: show what came back, on one line. */
        json_decref(j);
        size_t n = strcspn(r.body.len ? r.body.buf : "", "\r\n");
        j = json_object();
        json_object_set_new(
            j, "error",
            n ? json_sprintf("HTTP %d: %.*s", r.status, (int)(n > 200 ? 200 : n), r.body.buf)
              : json_sprintf("HTTP %d from gflowd", r.status));
    }
    client_response_free(&r);
    *reply = j;
    return ok ? 0 : -1;
}

int cli_request_json(const char *method, const char *path_query, json_t *body_json, int *status,
                     json_t **reply)
{
    char *err = NULL;
    int rc = request_json(method, path_query, body_json, status, reply, &err);
    if (rc == -2)
        cli_die(CLI_EXIT_FAIL, "%s", err);
    return rc;
}

json_t *cli_call(const char *method, const char *path_query, json_t *body_json)
{
    json_t *reply = NULL;
    if (cli_request_json(method, path_query, body_json, NULL, &reply) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", cli_error_text(reply));
    return reply;
}

/* The id of the back-th job of reply's list (newest first), or -1 with *err. */
static int ref_pick(const json_t *reply, int back, int64_t *id, char **err)
{
    const json_t *jobs = json_object_get(reply, "jobs");
    size_t n = json_array_size(jobs);
    if ((size_t)back >= n) {
        if (n == 0)
            *err = xasprintf("you have not submitted any job yet, so '@%s' refers to nothing",
                             back ? "~N" : "");
        else
            *err = xasprintf("'@~%d' goes back further than your first job: you have "
                             "submitted %zu job%s (@ to @~%zu)",
                             back, n, n == 1 ? "" : "s", n - 1);
        return -1;
    }
    const json_t *v = json_object_get(json_array_get(jobs, (size_t)back), "id");
    if (!json_is_integer(v)) {
        *err = xstrdup("gflowd sent a job without an id");
        return -1;
    }
    *id = (int64_t)json_integer_value(v);
    return 0;
}

int cli_try_resolve_ref(int back, int64_t *id, char **err)
{
    char *path = xasprintf("/v1/jobs?sort=-id&limit=%lld", (long long)back + 1);
    json_t *reply = NULL;
    int rc = request_json("GET", path, NULL, NULL, &reply, err);
    free(path);
    if (rc == -1)
        *err = xstrdup(cli_error_text(reply));
    if (rc == 0)
        rc = ref_pick(reply, back, id, err);
    json_decref(reply);
    return rc < 0 ? -1 : 0;
}

int64_t cli_resolve_ref(int back)
{
    int64_t id;
    char *err = NULL;
    if (cli_try_resolve_ref(back, &id, &err) < 0)
        cli_die(CLI_EXIT_FAIL, "%s", err);
    return id;
}

static void ids_push(int64_t **ids, size_t *n, size_t *cap, int64_t id)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *ids = xrealloc(*ids, *cap * sizeof(**ids));
    }
    (*ids)[(*n)++] = id;
}

/* One id list item or a whole list without references. */
static void parse_one(const char *s, int64_t **ids, size_t *n, size_t *cap)
{
    char *err = NULL;
    int back;
    int r = parse_job_ref(s, &back, &err);
    if (r < 0)
        cli_usage_error("%s", err);
    if (r == 1) {
        ids_push(ids, n, cap, cli_resolve_ref(back));
        return;
    }
    int64_t *list;
    size_t k;
    if (parse_id_list(s, &list, &k, &err) < 0)
        cli_usage_error("%s", err);
    for (size_t i = 0; i < k; i++)
        ids_push(ids, n, cap, list[i]);
    free(list);
}

int64_t *cli_parse_ids(int argc, char **argv, size_t *n)
{
    int64_t *ids = NULL;
    size_t cap = 0;
    *n = 0;
    for (int i = 0; i < argc; i++) {
        if (!strchr(argv[i], '@')) {
            parse_one(argv[i], &ids, n, &cap);
            continue;
        }
        /* A list mixing references and ids, e.g. "@,@~1" or "3,@". */
        char *copy = xstrdup(argv[i]);
        char *save = NULL;
        if (copy[0] == '\0' || copy[0] == ',' || copy[strlen(copy) - 1] == ',' ||
            strstr(copy, ",,"))
            cli_usage_error("invalid job id list '%s': empty item; use e.g. 1,3,5-7", argv[i]);
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            parse_one(tok, &ids, n, &cap);
        free(copy);
    }
    return ids;
}

double cli_parse_when(const char *text, double now)
{
    char *end;
    double n = strtod(text, &end);
    if (end != text && isdigit((unsigned char)*text)) {
        static const struct {
            char unit;
            double secs;
        } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 604800}};
        if (!*end)
            return n; /* unix seconds, as gflow */
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
            if (end[0] == units[i].unit && !end[1])
                return now - n * units[i].secs;
    }
    if (!strcasecmp(text, "today") || !strcasecmp(text, "yesterday")) {
        timefmt_ready(); /* midnight in the configured zone */
        time_t t = (time_t)now;
        struct tm tm;
        localtime_r(&t, &tm);
        tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        tm.tm_mday -= !strcasecmp(text, "yesterday");
        tm.tm_isdst = -1;
        return (double)mktime(&tm);
    }
    double at;
    if (parse_datetime(text, &at, NULL) == 0)
        return at;
    return -1;
}
