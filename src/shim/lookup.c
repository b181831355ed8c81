/* lookup: whether a --command job's exit status 127 or 126 is bash saying that it could
 * not find or execute the command's first word (the job could not be started: the exit
 * file's error says "command not found: NAME" or "not executable: NAME", and the daemon
 * reports LaunchFailed) or the job's own status (NonZeroExitCode).
 *
 * Decided before fork, as bash will see it when it starts: the first word is taken apart
 * as bash does for a simple command (quotes removed, leading assignments skipped); a
 * reserved word, builtin or exported function is the shell's own, so any status is the
 * job's; a word with a slash names a file relative to the workdir; any other is searched
 * along the job's PATH (bash's default when unset; with --conda-env behind the
 * environment's bin/ and the installation's condabin/, which the activation puts first),
 * with the job user's permissions. Looking before the job runs also means a program that
 * removes itself and then exits 127 is not taken for a missing one.
 *
 * Whatever cannot be told for sure is left as the job's own: shell syntax or expansions
 * in the first word, BASH_ENV (it may define functions or change PATH), an exported
 * command_not_found_handle, a stat that fails for another reason than absence. Only the
 * first word is looked at: in `cd dir && prog`, a missing prog stays NonZeroExitCode, as
 * do programs that exit 127 for a command they could not run (`env`, `nohup`). A root
 * shim makes every one of these checks with the job user's effective ids (prepare.c):
 * it finds what the job user could find, and tells nothing about files the user could
 * not see. */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util.h"

/* PATH as bash sets it when the environment has none (bash 5.2 as Debian builds it). */
#define SHIM_LOOKUP_BASH_PATH "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin:."

/* bash's reserved words (`compgen -k`) and builtins (`compgen -b`, bash 5.2). */
static const char *const shim_lookup_shell_words[] = {
    "if",        "then",     "else",     "elif",    "fi",       "case",    "esac",     "for",
    "select",    "while",    "until",    "do",      "done",     "in",      "function", "time",
    "{",         "}",        "!",        "[[",      "]]",       "coproc",  ".",        ":",
    "[",         "alias",    "bg",       "bind",    "break",    "builtin", "caller",   "cd",
    "command",   "compgen",  "complete", "compopt", "continue", "declare", "dirs",     "disown",
    "echo",      "enable",   "eval",     "exec",    "exit",     "export",  "false",    "fc",
    "fg",        "getopts",  "hash",     "help",    "history",  "jobs",    "kill",     "let",
    "local",     "logout",   "mapfile",  "popd",    "printf",   "pushd",   "pwd",      "read",
    "readarray", "readonly", "return",   "set",     "shift",    "shopt",   "source",   "suspend",
    "test",      "times",    "trap",     "true",    "type",     "typeset", "ulimit",   "umask",
    "unalias",   "unset",    "wait"};

/* bash's metacharacters: unquoted, they end a word. */
#define SHIM_LOOKUP_META " \t\n|&;()<>"

/* What one shell word is. */
enum shim_lookup_word {
    SHIM_WORD_LITERAL, /* text, its quotes removed */
    SHIM_WORD_ASSIGN,  /* NAME=value or NAME+=value */
    SHIM_WORD_OTHER,   /* text the shell would change or no word at all */
};

/* Whether the n bytes at s form a shell variable name. */
static bool shim_lookup_is_name(const char *s, size_t n)
{
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

/* Reads the double-quoted part at *pp (past its opening quote) into sb. -1 for an
 * expansion inside or a missing closing quote. */
static int shim_lookup_dquoted(const char **pp, struct strbuf *sb)
{
    const char *p = *pp;
    for (; *p && *p != '"'; p++) {
        if (*p == '$' || *p == '`')
            return -1;
        if (*p == '\\' && p[1] && strchr("$`\"\\\n", p[1])) {
            p++;
            if (*p != '\n')
                strbuf_addc(sb, *p);
            continue;
        }
        strbuf_addc(sb, *p);
    }
    if (!*p)
        return -1;
    *pp = p + 1;
    return 0;
}

/* Reads the word at *pp (not a blank) into sb, quotes removed, and moves *pp past it. */
static enum shim_lookup_word shim_lookup_word(const char **pp, struct strbuf *sb)
{
    const char *p = *pp;
    /* A redirection, an operator or a comment where a word should be. */
    if (strchr("|&;()<>#", *p))
        return SHIM_WORD_OTHER;
    bool quoted = false, special = *p == '~'; /* tilde expansion */
    while (*p && !strchr(SHIM_LOOKUP_META, *p)) {
        if (*p == '\\') {
            if (!p[1])
                return SHIM_WORD_OTHER;
            if (p[1] != '\n') /* a line continuation is removed */
                strbuf_addc(sb, p[1]);
            quoted = true;
            p += 2;
        } else if (*p == '\'') {
            const char *end = strchr(p + 1, '\'');
            if (!end)
                return SHIM_WORD_OTHER;
            strbuf_add(sb, p + 1, (size_t)(end - p - 1));
            quoted = true;
            p = end + 1;
        } else if (*p == '"') {
            p++;
            if (shim_lookup_dquoted(&p, sb) < 0)
                return SHIM_WORD_OTHER;
            quoted = true;
        } else if (*p == '$' || *p == '`') {
            return SHIM_WORD_OTHER; /* an expansion, also in an assignment's value */
        } else if (!quoted && (*p == '=' || (p[0] == '+' && p[1] == '=')) &&
                   shim_lookup_is_name(sb->buf, sb->len)) {
            /* An assignment: skip its value, with the same rules for quotes. */
            p += *p == '=' ? 1 : 2;
            strbuf_reset(sb);
            if (*p == '(')
                return SHIM_WORD_OTHER; /* an array */
            enum shim_lookup_word w = SHIM_WORD_LITERAL;
            if (*p && !strchr(SHIM_LOOKUP_META, *p))
                w = shim_lookup_word(&p, sb);
            *pp = p;
            return w == SHIM_WORD_OTHER ? w : SHIM_WORD_ASSIGN;
        } else {
            /* Globs and brace expansion; "[", "[[" and "{" alone are the shell's own. */
            special = special || strchr("*?[{", *p);
            strbuf_addc(sb, *p++);
        }
    }
    *pp = p;
    const char *text = sb->len ? sb->buf : "";
    if (special && strcmp(text, "[") != 0 && strcmp(text, "[[") != 0 && strcmp(text, "{") != 0)
        return SHIM_WORD_OTHER;
    /* Unquoted digits right before < or > are the fd of a redirection ("2>err"). */
    if (!quoted && (*p == '<' || *p == '>') && sb->len && strspn(text, "0123456789") == sb->len)
        return SHIM_WORD_OTHER;
    return SHIM_WORD_LITERAL;
}

/* The first word of a shell command line with its quotes removed (to free), or NULL
 * when it has none that is literal text (an expansion, a glob, a redirection, a
 * function definition, a syntax error). Leading assignments are skipped. */
static char *shim_lookup_first_word(const char *command)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const char *p = command;
    for (;;) {
        p += strspn(p, " \t\n");
        if (!*p)
            break;
        strbuf_reset(&sb);
        enum shim_lookup_word w = shim_lookup_word(&p, &sb);
        if (w == SHIM_WORD_ASSIGN)
            continue;
        /* "name ()" defines a function; an empty word ('') is no program. */
        if (w == SHIM_WORD_OTHER || p[strspn(p, " \t")] == '(' || sb.len == 0)
            break;
        return strbuf_detach(&sb);
    }
    strbuf_free(&sb);
    return NULL;
}

/* Whether word is one of bash's reserved words or builtins. */
bool shim_lookup_is_bash_word(const char *word)
{
    size_t n = sizeof(shim_lookup_shell_words) / sizeof(shim_lookup_shell_words[0]);
    for (size_t i = 0; i < n; i++)
        if (strcmp(word, shim_lookup_shell_words[i]) == 0)
            return true;
    return false;
}

/* Whether word is the shell's own: a reserved word, a builtin, a function exported in
 * the job's environment (BASH_FUNC_name%%), or under conda the `conda` function its
 * shell hook defines. */
static bool shim_lookup_is_shell_word(const char *word, const struct shim_exec *ex)
{
    if (shim_lookup_is_bash_word(word))
        return true;
    if (ex->conda_prefix && strcmp(word, "conda") == 0)
        return true;
    char *func = xasprintf("BASH_FUNC_%s%%%%", word);
    bool exported = shim_env_get(ex->envp, func) != NULL;
    free(func);
    return exported;
}

/* What a path names, as far as starting a program goes. */
enum shim_lookup_file {
    SHIM_FILE_MISSING,
    SHIM_FILE_DIR,
    SHIM_FILE_EXEC,    /* the job user may execute it */
    SHIM_FILE_NOEXEC,  /* there, but execve would fail with EACCES */
    SHIM_FILE_UNKNOWN, /* stat failed for another reason */
};

/* Whether the job user may execute the file: the lookup runs with the job user's
 * effective ids (prepare.c), so the kernel's access check with those ids says it. */
static bool shim_lookup_may_exec(const char *path)
{
    return faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

/* What path (relative: to the workdir) is for the job. */
static enum shim_lookup_file shim_lookup_file(const char *path, const struct shim_exec *ex)
{
    char *full = path[0] == '/' ? xstrdup(path) : xasprintf("%s/%s", ex->workdir, path);
    struct stat st;
    struct statvfs sv;
    enum shim_lookup_file f;
    if (stat(full, &st) < 0)
        f = errno == ENOENT || errno == ENOTDIR ? SHIM_FILE_MISSING : SHIM_FILE_UNKNOWN;
    else if (S_ISDIR(st.st_mode))
        f = SHIM_FILE_DIR;
    else if (statvfs(full, &sv) == 0 && (sv.f_flag & ST_NOEXEC))
        f = SHIM_FILE_NOEXEC; /* a noexec mount: execve says EACCES */
    else
        f = shim_lookup_may_exec(full) ? SHIM_FILE_EXEC : SHIM_FILE_NOEXEC;
    free(full);
    return f;
}

/* Searches name along the job's PATH as bash does: the first executable file wins;
 * without one, a file that is there but not executable makes bash fail with 126, and
 * nothing at all with 127 ("command not found"). An empty entry is the workdir. Adds
 * to *n_missing the number of entries before the first where something is. */
static enum shim_lookup_file shim_lookup_search(const char *name, const struct shim_exec *ex,
                                                size_t *n_missing)
{
    const char *path = shim_env_get(ex->envp, "PATH");
    char *dirs;
    if (ex->conda_prefix)
        dirs = xasprintf("%s/bin:%s/condabin:%s", ex->conda_prefix, ex->conda_base,
                         path ? path : SHIM_LOOKUP_BASH_PATH);
    else
        dirs = xstrdup(path ? path : SHIM_LOOKUP_BASH_PATH);
    bool noexec = false, unknown = false, any = false;
    enum shim_lookup_file found = SHIM_FILE_MISSING;
    for (char *d = dirs; found != SHIM_FILE_EXEC; d++) {
        size_t len = strcspn(d, ":");
        char *cand = xasprintf("%.*s%s%s", (int)len, d, len ? "/" : "", name);
        enum shim_lookup_file f = shim_lookup_file(cand, ex);
        free(cand);
        any = any || f != SHIM_FILE_MISSING;
        if (!any)
            ++*n_missing;
        if (f == SHIM_FILE_EXEC)
            found = f;
        noexec = noexec || f == SHIM_FILE_NOEXEC;
        unknown = unknown || f == SHIM_FILE_UNKNOWN;
        d += len;
        if (!*d)
            break;
    }
    free(dirs);
    if (found == SHIM_FILE_EXEC)
        return found;
    return noexec ? SHIM_FILE_NOEXEC : unknown ? SHIM_FILE_UNKNOWN : SHIM_FILE_MISSING;
}

void shim_lookup_prepare(const struct shim_opts *o, struct shim_exec *ex)
{
    const char *bash_env = shim_env_get(ex->envp, "BASH_ENV");
    if (!o->command || (bash_env && *bash_env))
        return;
    char *word = shim_lookup_first_word(o->command);
    if (!word)
        return;
    enum shim_lookup_file f;
    if (strchr(word, '/'))
        f = shim_lookup_file(word, ex);
    else if (shim_lookup_is_shell_word(word, ex))
        f = SHIM_FILE_EXEC;
    else if (ex->conda_prefix)
        f = shim_lookup_search(word, ex, &(size_t){0});
    else /* the direct exec (command.c) skips the entries of PATH where nothing is */
        f = shim_lookup_search(word, ex, &ex->direct_first);
    /* bash runs this function instead of saying "command not found". */
    if (f == SHIM_FILE_MISSING && shim_env_get(ex->envp, "BASH_FUNC_command_not_found_handle%%"))
        f = SHIM_FILE_UNKNOWN;
    if (f == SHIM_FILE_MISSING) {
        ex->lookup_code = JOB_EXIT_NOTFOUND;
        ex->lookup_error = xasprintf("command not found: %s", word);
    } else if (f == SHIM_FILE_NOEXEC || (f == SHIM_FILE_DIR && strchr(word, '/'))) {
        ex->lookup_code = JOB_EXIT_NOEXEC;
        ex->lookup_error = xasprintf("not executable: %s", word);
    }
    free(word);
}
