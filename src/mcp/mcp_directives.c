/* mcp_directives: a script's "# GFLOW --key value" lines, read as gbatch reads them. The
 * job options there go through the CLI's own option table and parsers (jobopts), so
 * that a directive means exactly what it means to gbatch. Those parsers end the process
 * on a bad value (the command line's convention), so they run in a forked child: it
 * sends back the spec fields it made, or its one-line message on stderr, and gflow-mcp
 * goes on serving either way. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
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

/* One directive's words (argv[0] is a program name) into the spec. */
static void directive_apply(int argc, char **argv, const struct jobopts_ctx *ctx, void *arg)
{
    const struct directive_parse *p = arg;
    const struct option *longopts = p->longopts;
    json_t *spec = p->spec;
    int c;
    optind = 0; /* glibc: full reinitialisation for each argv */
    opterr = 0;
    while ((c = getopt_long(argc, argv, p->shortopts, longopts, NULL)) != -1) {
        if (c == 'c') /* gbatch's -c */
            c = jobopts_val("conda-env");
        if (jobopts_apply(ctx, c, optarg, spec))
            continue;
        int64_t *tasks, k;
        size_t n;
        char *err = NULL;
        json_t *v;
        switch (c) {
        case 'P':
            if (!(v = json_string(optarg)))
                jobopts_error(ctx, "--project is not valid UTF-8");
            json_object_set_new(spec, "project", v);
            break;
        case OPT_ARRAY:
            if (parse_array_spec(optarg, &tasks, &n, &k, &err) < 0)
                jobopts_error(ctx, "--array: %s", err);
            free(tasks);
            json_object_set_new(spec, "array", json_string(optarg));
            break;
        case OPT_MAX_CONCURRENT:
            if (parse_int64(optarg, &k) < 0 || k < 0)
                jobopts_error(ctx, "invalid value '%s' for --max-concurrent: use a number >= 0",
                              optarg);
            json_object_set_new(spec, "max_concurrent", json_integer(k));
            break;
        default:
            if (c == '?') /* an option gbatch may know but not a job option */
                jobopts_error(ctx,
                              "%s; gflow-mcp reads the job options of a directive (those of "
                              "'gbatch --help' under Options, GPUs and Dependencies, and -P, "
                              "--array, --max-concurrent): give this one as an argument of "
                              "submit_job, or submit with gbatch",
                              cli_option_error(argv, c, longopts));
            jobopts_error(ctx, "%s", cli_option_error(argv, c, longopts));
        }
    }
    if (optind < argc)
        jobopts_error(ctx, "unexpected '%s': a directive holds only options", argv[optind]);
}

/* In the child: every directive of text into one spec, written to fd as JSON. */
static void directives_child(const char *text, const char *file, int fd)
{
    cli_init("gflow-mcp"); /* its messages' prefix, stripped by the parent */
    struct option *longopts = jobopts_longopts(directive_own_longopts);
    char *shortopts = jobopts_shortopts("+:", "c:P:");
    json_t *spec = json_object();
    struct directive_parse parse = {longopts, shortopts, spec};
    jobopts_each_directive(text, file, directive_apply, &parse);
    char *out = json_dumps(spec, JSON_COMPACT);
    size_t left = out ? strlen(out) : 0;
    for (const char *p = out; left;) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            _exit(1);
        p += w;
        left -= (size_t)w;
    }
    _exit(0);
}

/* All of fd until its end. */
static void read_all(int fd, struct strbuf *sb)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        strbuf_add(sb, buf, (size_t)n);
    }
}

json_t *mcp_directives(const char *text, const char *file, char **err)
{
    if (!strstr(text, "#GFLOW") && !strstr(text, "# GFLOW"))
        return json_object();
    int out[2], errp[2];
    if (pipe2(out, O_CLOEXEC) < 0) {
        *err = xasprintf("cannot read the script's directives: %s", strerror(errno));
        return NULL;
    }
    if (pipe2(errp, O_CLOEXEC) < 0) {
        *err = xasprintf("cannot read the script's directives: %s", strerror(errno));
        close(out[0]);
        close(out[1]);
        return NULL;
    }
    fflush(stdout); /* nothing of ours may be written twice */
    pid_t pid = fork();
    if (pid == 0) {
        /* The child never writes on the protocol's stdout, and uses a connection of its
         * own if a reference (@) asks the daemon. */
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null < 0 || dup2(null, STDOUT_FILENO) < 0 || dup2(errp[1], STDERR_FILENO) < 0)
            _exit(1);
        close(out[0]);
        close(errp[0]);
        client_close();
        directives_child(text, file, out[1]);
    }
    close(out[1]);
    close(errp[1]);
    if (pid < 0) {
        *err = xasprintf("cannot read the script's directives: fork: %s", strerror(errno));
        close(out[0]);
        close(errp[0]);
        return NULL;
    }
    struct strbuf spec_text, message;
    strbuf_init(&spec_text);
    strbuf_init(&message);
    read_all(out[0], &spec_text); /* the child writes stderr only when it sends no spec */
    read_all(errp[0], &message);
    close(out[0]);
    close(errp[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    json_t *spec = NULL;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && spec_text.len)
        spec = json_loadb(spec_text.buf, spec_text.len, 0, NULL);
    if (!spec) {
        /* "gflow-mcp: FILE:LINE: what (in a '# GFLOW' directive)" without our name. */
        const char *m = message.len ? message.buf : "";
        if (!strncmp(m, "gflow-mcp: ", 11))
            m += 11;
        size_t n = strcspn(m, "\n");
        *err = n ? xstrndup(m, n) : xstrdup("cannot read the script's directives");
    }
    strbuf_free(&spec_text);
    strbuf_free(&message);
    return spec;
}
