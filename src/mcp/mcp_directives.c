/* mcp_directives: a script's "# GFLOW --key value" lines, read as gbatch reads them. The
 * job options there go through the CLI's own option table and parsers (jobopts), so
 * that a directive means exactly what it means to gbatch; a bad one comes back as
 * gbatch's message (without its "gbatch: "), and gflow-mcp goes on serving. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "job.h"
#include "jobopts.h"
#include "mcp.h"
#include "parse.h"

enum { OPT_ARRAY = 256, OPT_MAX_CONCURRENT };

/* gbatch's own options that are spec fields, besides the shared job options. */
static const struct option directive_own_longopts[] = {
    {"project", required_argument, NULL, 'P'},
    {"array", required_argument, NULL, OPT_ARRAY},
    {"max-concurrent", required_argument, NULL, OPT_MAX_CONCURRENT},
    {NULL, 0, NULL, 0},
};

/* The options a directive is read with, and the spec it fills. */
struct directive_parse {
    const struct option *longopts;
    const char *shortopts;
    json_t *spec;
};

/* gbatch's own options of a directive, besides the shared job options, into the spec. */
static int directive_own(const struct jobopts_ctx *ctx, int c, char **argv,
                         const struct option *longopts, json_t *spec)
{
    int64_t *tasks, k;
    size_t n;
    char *err = NULL;
    json_t *v;
    switch (c) {
    case 'P':
        if (!(v = json_string(optarg)))
            return jobopts_fail(ctx, "--project is not valid UTF-8");
        json_object_set_new(spec, JOB_KEY_PROJECT, v);
        return 0;
    case OPT_ARRAY:
        if (parse_array_spec(optarg, &tasks, &n, &k, &err) < 0) {
            jobopts_fail(ctx, "--array: %s", err);
            free(err);
            return -1;
        }
        free(tasks);
        json_object_set_new(spec, "array", json_string(optarg));
        return 0;
    case OPT_MAX_CONCURRENT:
        if (parse_int64(optarg, &k) < 0 || k < 0)
            return jobopts_fail(ctx, "invalid value '%s' for --max-concurrent: use a number >= 0",
                                optarg);
        json_object_set_new(spec, JOB_KEY_MAX_CONCURRENT, json_integer(k));
        return 0;
    }
    char *what = cli_option_error(argv, c, longopts);
    if (c == '?') /* an option gbatch may know but not a job option */
        jobopts_fail(ctx,
                     "%s; gflow-mcp reads the job options of a directive (those of 'gbatch "
                     "--help' under Options, GPUs and Dependencies, and -P, --array, "
                     "--max-concurrent): give this one as an argument of submit_job, or submit "
                     "with gbatch",
                     what);
    else
        jobopts_fail(ctx, "%s", what);
    free(what);
    return -1;
}

/* One directive's words (argv[0] is a program name) into the spec. */
static int directive_apply(int argc, char **argv, const struct jobopts_ctx *ctx, void *arg)
{
    const struct directive_parse *p = arg;
    int c;
    optind = 0; /* glibc: full reinitialisation for each argv */
    opterr = 0;
    while ((c = getopt_long(argc, argv, p->shortopts, p->longopts, NULL)) != -1) {
        if (c == 'c') /* gbatch's -c */
            c = jobopts_val("conda-env");
        int shared = jobopts_apply(ctx, c, optarg, p->spec);
        if (shared < 0 || (!shared && directive_own(ctx, c, argv, p->longopts, p->spec) < 0))
            return -1;
    }
    if (optind < argc)
        return jobopts_fail(ctx, "unexpected '%s': a directive holds only options", argv[optind]);
    return 0;
}

json_t *mcp_directives(const char *text, const char *file, char **err)
{
    if (!strstr(text, "#GFLOW") && !strstr(text, "# GFLOW"))
        return json_object();
    struct option *longopts = jobopts_longopts(directive_own_longopts);
    char *shortopts = jobopts_shortopts("+:", "c:P:");
    struct directive_parse parse = {longopts, shortopts, json_object()};
    struct jobopts_err error = {0};
    if (jobopts_each_directive(text, file, directive_apply, &parse, &error) < 0) {
        json_decref(parse.spec);
        parse.spec = NULL;
        *err = error.message;
    }
    free(longopts);
    free(shortopts);
    return parse.spec;
}
