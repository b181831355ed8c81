/* conda: --conda-env (step 4): finding conda and the environment before anything
 * starts, the variables the job's shell reads, and the shell text that activates the
 * environment and then runs the job. */
#include "shim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Where conda is looked for under the job's HOME after CONDA_EXE, in this order: the
 * installers' default directories (<dir>/bin/conda). */
static const char *const shim_conda_home_dirs[] = {"miniconda3", "anaconda3", "miniforge3",
                                                   "mambaforge"};
#define SHIM_CONDA_SYSTEM "/opt/conda/bin/conda"

/* What the job's shell runs before the job itself: the installation's hook, then the
 * activation. Names and paths come in through the environment only, never as shell
 * text, so nothing in them is parsed. The hook's output goes through a variable so
 * that a failing hook is noticed (`eval "$(false)"` succeeds). */
#define SHIM_CONDA_ACTIVATE                                                                        \
    "gflow_conda_hook=$(\"$GFLOW_CONDA_EXE\" shell.bash hook) && "                                 \
    "eval \"$gflow_conda_hook\" && conda activate \"$GFLOW_CONDA_ENV\" || { "                      \
    "echo \"gflow-shim: cannot activate conda environment $GFLOW_CONDA_ENV\" >&2; "                \
    "exit 125; }; unset gflow_conda_hook; "

/* The job after the activation: eval keeps the command's shell semantics (quoting,
 * builtins, exit status) as `bash -c` would give them. */
static const char shim_conda_command_text[] = SHIM_CONDA_ACTIVATE "eval \"$GFLOW_JOB_COMMAND\"";
static const char shim_conda_exec_text[] = SHIM_CONDA_ACTIVATE "exec \"$GFLOW_JOB_SCRIPT\"";
static const char shim_conda_bash_text[] =
    SHIM_CONDA_ACTIVATE "exec /bin/bash \"$GFLOW_JOB_SCRIPT\"";

/* Whether path is an executable regular file, for the job user: a root shim looks with
 * the job user's effective ids (prepare.c), so the effective ids are what counts. */
static bool shim_conda_is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

/* Whether dir is a conda environment: it holds conda-meta/. */
static bool shim_conda_is_env(const char *dir)
{
    char *meta = xasprintf("%s/conda-meta", dir);
    struct stat st;
    bool ok = stat(meta, &st) == 0 && S_ISDIR(st.st_mode);
    free(meta);
    return ok;
}

/* The job's conda executable (to free): CONDA_EXE, then the usual install places.
 * NULL with *err saying where it looked. */
static char *shim_conda_find(char *const *envp, char **err)
{
    struct strbuf looked;
    strbuf_init(&looked);
    const char *exe = shim_env_get(envp, "CONDA_EXE");
    if (exe && *exe) {
        /* Relative: the job's cwd is not the shim's, so it names nothing reliable. */
        if (exe[0] == '/' && shim_conda_is_executable(exe)) {
            strbuf_free(&looked);
            return xstrdup(exe);
        }
        strbuf_addf(&looked, "CONDA_EXE=%s", exe);
    } else {
        strbuf_adds(&looked, "$CONDA_EXE (unset)");
    }
    const char *home = shim_env_get(envp, "HOME");
    size_t nplaces = sizeof(shim_conda_home_dirs) / sizeof(shim_conda_home_dirs[0]);
    for (size_t i = 0; i <= nplaces; i++) {
        char *cand;
        if (i < nplaces && home && home[0] == '/')
            cand = xasprintf("%s/%s/bin/conda", home, shim_conda_home_dirs[i]);
        else if (i == nplaces)
            cand = xstrdup(SHIM_CONDA_SYSTEM);
        else
            continue;
        if (shim_conda_is_executable(cand)) {
            strbuf_free(&looked);
            return cand;
        }
        strbuf_addf(&looked, ", %s", cand);
        free(cand);
    }
    if (!home || home[0] != '/')
        strbuf_adds(&looked, "; $HOME unset or not absolute");
    *err = xasprintf("conda not found: set CONDA_EXE or install conda in ~/miniconda3 "
                     "(looked in %s)",
                     looked.buf);
    strbuf_free(&looked);
    return NULL;
}

/* The installation's base (to free): the directory above the executable's bin/. */
static char *shim_conda_base(const char *exe)
{
    char *base = xstrdup(exe);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(base, '/');
        if (slash)
            *slash = '\0';
    }
    if (!*base) {
        free(base);
        base = xstrdup("/");
    }
    return base;
}

/* Finds the environment `name` of the conda at exe: its directory (to free), or NULL
 * with *err saying where it looked. */
static char *shim_conda_find_env(const char *name, const char *exe, char *const *envp, char **err)
{
    char *base = shim_conda_base(exe);
    const char *home = shim_env_get(envp, "HOME");
    char *cands[2] = {NULL, NULL};
    if (strcmp(name, "base") == 0)
        cands[0] = xstrdup(base);
    else if (name[0] == '/')
        cands[0] = xstrdup(name);
    /* A name is one path component, as conda's own names are. */
    else if (!strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
        cands[0] = xasprintf("%s/envs/%s", base, name);
        if (home && home[0] == '/')
            cands[1] = xasprintf("%s/.conda/envs/%s", home, name);
    }
    free(base);
    struct strbuf looked;
    strbuf_init(&looked);
    char *found = NULL;
    bool valid = cands[0] != NULL;
    for (size_t i = 0; i < 2 && cands[i]; i++) {
        if (!found && shim_conda_is_env(cands[i]))
            found = xstrdup(cands[i]);
        strbuf_addf(&looked, "%s%s", i ? ", " : "", cands[i]);
        free(cands[i]);
    }
    if (!found) {
        if (valid)
            *err = xasprintf("conda environment '%s' not found (looked in %s)", name, looked.buf);
        else
            *err = xasprintf("conda environment '%s' not found (neither a name nor an "
                             "absolute path)",
                             name);
    }
    strbuf_free(&looked);
    return found;
}

/* With --conda-env: finds conda and the environment before anything starts, and adds
 * the GFLOW_* variables the job's shell reads. 0, or -1 with *err, which also goes to
 * the job log as its one line (step 3). Keeps the environment's directory and the
 * installation's base in ex, for the lookup of the command (lookup.c). */
int shim_conda_prepare(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    if (!o->conda_env)
        return 0;
    char *exe = shim_conda_find(ex->envp, err);
    ex->conda_prefix = exe ? shim_conda_find_env(o->conda_env, exe, ex->envp, err) : NULL;
    if (!ex->conda_prefix) {
        free(exe);
        dprintf(ex->log_fd, "gflow-shim: %s\n", *err);
        return -1;
    }
    ex->conda_base = shim_conda_base(exe);
    ex->conda_vars[0] = xasprintf("GFLOW_CONDA_EXE=%s", exe);
    ex->conda_vars[1] = xasprintf("GFLOW_CONDA_ENV=%s", o->conda_env);
    /* "./": exec in bash would search PATH for a name without a slash, and a path
     * starting with '-' would read as an option. */
    if (o->command)
        ex->conda_vars[2] = xasprintf("GFLOW_JOB_COMMAND=%s", o->command);
    else
        ex->conda_vars[2] =
            xasprintf("GFLOW_JOB_SCRIPT=%s%s", o->script[0] == '/' ? "" : "./", o->script);
    free(exe);
    shim_env_set(ex, ex->conda_vars, SHIM_N_CONDA_VARS);
    return 0;
}

const char *shim_conda_text(const struct shim_opts *o)
{
    if (o->command)
        return shim_conda_command_text;
    if (shim_command_has_shebang(o->script) || faccessat(AT_FDCWD, o->script, F_OK, AT_EACCESS) < 0)
        return shim_conda_exec_text; /* missing: bash says so, 127 */
    return shim_conda_bash_text;
}
