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

/* Whether bash would run `command` as nothing but a program with literal arguments:
 * only characters without meaning to the shell, a first word that is neither an
 * assignment nor a reserved word, no exported function of that name and no BASH_ENV.
 * Then executing it directly gives the same result without the shell's start-up
 * (milliseconds per job). */
static bool shim_command_is_plain(const char *command, char *const *envp)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_./=:,+@%^- ";
    static const char *const reserved[] = {"time", "if",   "then",     "else",   "elif",  "fi",
                                           "case", "esac", "for",      "select", "while", "until",
                                           "do",   "done", "function", "coproc"};
    if (command[strspn(command, safe)] != '\0' || shim_env_get(envp, "BASH_ENV"))
        return false;
    const char *first = command + strspn(command, " ");
    size_t len = strcspn(first, " ");
    if (len == 0 || memchr(first, '=', len))
        return false;
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (strlen(reserved[i]) == len && strncmp(first, reserved[i], len) == 0)
            return false;
    char *func = xasprintf("BASH_FUNC_%.*s%%%%", (int)len, first);
    bool exported = shim_env_get(envp, func) != NULL;
    free(func);
    return !exported;
}

/* Splits a plain command into words and lists where its program may be. */
static void shim_command_direct(const char *command, struct shim_exec *ex)
{
    ex->direct_buf = xstrdup(command);
    size_t n = 0;
    ex->direct_argv = xcalloc(strlen(command) / 2 + 2, sizeof(char *));
    char *save = NULL;
    for (char *w = strtok_r(ex->direct_buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
        ex->direct_argv[n++] = w;
    const char *prog = ex->direct_argv[0];
    if (strchr(prog, '/')) {
        ex->direct_paths = xcalloc(2, sizeof(char *));
        ex->direct_paths[0] = xstrdup(prog);
        return;
    }
    const char *path = shim_env_get(ex->envp, "PATH");
    char *dirs = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
    size_t cap = 2;
    for (const char *c = dirs; *c; c++)
        cap += *c == ':';
    ex->direct_paths = xcalloc(cap, sizeof(char *));
    size_t k = 0;
    char *dsave = NULL;
    for (char *d = strtok_r(dirs, ":", &dsave); d; d = strtok_r(NULL, ":", &dsave))
        if (*d == '/') /* relative PATH entries are left to the shell */
            ex->direct_paths[k++] = xasprintf("%s/%s", d, prog);
    free(dirs);
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
        if (shim_command_is_plain(o->command, ex->envp))
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
