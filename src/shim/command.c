/* command: what the job executes (step 4, before fork): `/bin/bash -c COMMAND`, the
 * direct exec of a plain command without the shell, a script by its shebang or through
 * bash, or the conda activation text. */
#include "shim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* True when the file starts with "#!", i.e. the kernel can run it directly. */
bool shim_command_has_shebang(const char *path)
{
    /* O_NONBLOCK: a FIFO must not hang the shim. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return false;
    char head[2];
    ssize_t n = read(fd, head, sizeof(head));
    close(fd);
    return n == 2 && head[0] == '#' && head[1] == '!';
}

/* Characters that mean nothing to bash outside quotes (a space separates words). */
static const char shim_command_safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_./=:,+@%^-";

/* Splits `command` into words the way bash does when it holds nothing but literal
 * words: unquoted characters of shim_command_safe, '...' (any text but '), "..."
 * without $, ` or \ inside (so nothing is expanded and no backslash removed), the
 * words separated by spaces. The words, quotes removed, go into buf (strlen(command)
 * + 1 bytes, NUL after each) and argv (strlen(command) / 2 + 2 entries, NULL-ended).
 * Returns the number of words, or -1 when bash would do more than split the words
 * (anything else: a tab or newline, $, globs, ~, redirections, operators, comments,
 * backslashes, an unterminated quote). */
static int shim_command_words(const char *command, char *buf, char **argv)
{
    int n = 0;
    const char *p = command;
    char *out = buf;
    for (;;) {
        p += strspn(p, " ");
        if (!*p)
            break;
        argv[n] = out;
        while (*p && *p != ' ') {
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                const char *end = strchr(p, q);
                if (!end || (q == '"' && strcspn(p, "$`\\") < (size_t)(end - p)))
                    return -1;
                memcpy(out, p, (size_t)(end - p));
                out += end - p;
                p = end + 1;
            } else if (strchr(shim_command_safe, *p)) {
                *out++ = *p++;
            } else {
                return -1;
            }
        }
        *out++ = '\0';
        n++;
    }
    argv[n] = NULL;
    return n;
}

/* Whether the first word, as bash will look it up, is a program of the job's PATH or a
 * path: not empty, not an assignment or job ("%1"), not a reserved word, builtin or exported
 * function. `true` and `false` alone are builtins that do exactly what their programs
 * do (no output, status 0 or 1). */
static bool shim_command_program(const char *raw, const char *word, int nwords, char *const *envp)
{
    size_t rawlen = strcspn(raw + strspn(raw, " "), " ");
    /* A first word "%..." is a job for bash (`%1` is `fg %1`). */
    if (!*word || *word == '%' || memchr(raw + strspn(raw, " "), '=', rawlen))
        return false;
    if (shim_lookup_is_bash_word(word) &&
        !(nwords == 1 && (strcmp(word, "true") == 0 || strcmp(word, "false") == 0)))
        return false;
    char *func = xasprintf("BASH_FUNC_%s%%%%", word);
    bool exported = shim_env_get(envp, func) != NULL;
    free(func);
    return !exported;
}

/* Whether every entry of PATH is an absolute directory: bash also searches relative
 * (and empty: the workdir) entries, in their order, which the direct exec does not. */
static bool shim_command_path_absolute(const char *path)
{
    for (const char *d = path;; d++) {
        if (*d != '/')
            return false;
        d += strcspn(d, ":");
        if (!*d)
            return true;
    }
}

/* When bash would run `command` as nothing but a program with literal arguments (the
 * words above, a first word that is a program, no BASH_ENV, PATH set and absolute when
 * it is searched), executing it directly gives the same result without the shell's
 * start-up (milliseconds per job): sets ex->direct_argv and the paths the program may
 * be at, in bash's order. Quotes count: `sh -c 'date > f'` is sh with two arguments. */
static void shim_command_direct(const char *command, struct shim_exec *ex)
{
    if (shim_env_get(ex->envp, "BASH_ENV"))
        return;
    char *buf = xmalloc(strlen(command) + 1);
    char **argv = xcalloc(strlen(command) / 2 + 2, sizeof(char *));
    int n = shim_command_words(command, buf, argv);
    const char *path = shim_env_get(ex->envp, "PATH");
    if (n <= 0 || !shim_command_program(command, argv[0], n, ex->envp) ||
        (!strchr(argv[0], '/') && !shim_lookup_is_bash_word(argv[0]) &&
         (!path || !shim_command_path_absolute(path)))) {
        free(buf);
        free(argv);
        return;
    }
    ex->direct_buf = buf;
    ex->direct_argv = argv;
    const char *prog = argv[0];
    if (shim_lookup_is_bash_word(prog)) {
        /* A lone true or false: bash's builtin, never a program of that name on the
         * job's PATH; the system's own does the same. */
        ex->direct_paths = xcalloc(3, sizeof(char *));
        ex->direct_paths[0] = xasprintf("/usr/bin/%s", prog);
        ex->direct_paths[1] = xasprintf("/bin/%s", prog);
        return;
    }
    if (strchr(prog, '/')) {
        ex->direct_paths = xcalloc(2, sizeof(char *));
        ex->direct_paths[0] = xstrdup(prog);
        return;
    }
    size_t cap = 2;
    for (const char *c = path; *c; c++)
        cap += *c == ':';
    ex->direct_paths = xcalloc(cap, sizeof(char *));
    size_t k = 0;
    for (const char *d = path;;) {
        size_t len = strcspn(d, ":");
        ex->direct_paths[k++] = xasprintf("%.*s/%s", (int)len, d, prog);
        d += len;
        if (!*d++)
            break;
    }
}

/* Step 4 (before fork): the job's program and arguments. */
void shim_command_prepare(const struct shim_opts *o, struct shim_exec *ex)
{
    if (o->conda_env) {
        /* Always the shell: the activation must run first, in the job's own shell. */
        ex->path = "/bin/bash";
        ex->argv[0] = "bash";
        ex->argv[1] = "-c";
        ex->argv[2] = shim_conda_text(o);
        ex->argv[3] = NULL;
        return;
    }
    if (o->command) {
        ex->path = "/bin/bash";
        ex->argv[0] = "bash";
        ex->argv[1] = "-c";
        ex->argv[2] = o->command;
        ex->argv[3] = NULL;
        shim_command_direct(o->command, ex);
    } else if (shim_command_has_shebang(o->script) ||
               faccessat(AT_FDCWD, o->script, F_OK, AT_EACCESS) < 0) {
        /* A missing script is exec'd anyway, so that the job fails the way any
         * missing program does: 127 and a line in its log. */
        ex->path = o->script;
        ex->argv[0] = o->script;
        ex->argv[1] = NULL;
    } else {
        ex->path = "/bin/bash";
        ex->argv[0] = "bash";
        ex->argv[1] = o->script;
        ex->argv[2] = NULL;
    }
}
