/* triage: a failed job's class from its exit and its log's tail (see triage.h). */
#include "triage.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "toml.h"
#include "util.h"

/* ---- the admin's classes ([[triage.classes]]) ------------------------------------ */

void triage_config_init(struct triage_config *c)
{
    memset(c, 0, sizeof(*c));
}

void triage_config_free(struct triage_config *c)
{
    for (size_t i = 0; i < c->n_classes; i++) {
        free(c->classes[i].name);
        free(c->classes[i].pattern);
        regfree(&c->classes[i].re);
    }
    free(c->classes);
    memset(c, 0, sizeof(*c));
}

/* Why name is no good as a class, or NULL: it is shown as a reason, in one line and in
 * gqueue's column. */
static const char *name_problem(const char *name)
{
    if (!*name)
        return "is empty";
    if (strlen(name) > TRIAGE_NAME_MAX)
        return "is longer than 64 bytes";
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return "holds a control character";
    return NULL;
}

int triage_config_add(struct triage_config *c, const char *name, const char *pattern, char **err)
{
    const char *bad = name_problem(name);
    if (bad) {
        *err = xasprintf("name \"%s\" %s: give a short word such as \"DiskFull\"", name, bad);
        return -1;
    }
    if (!*pattern) {
        *err = xstrdup("pattern is empty: give a POSIX extended regular expression such as "
                       "\"No space left on device\"");
        return -1;
    }
    regex_t re;
    int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[128];
        regerror(rc, &re, msg, sizeof(msg));
        *err = xasprintf("pattern \"%s\" is not a POSIX extended regular expression (%s): "
                         "escape the character it names",
                         pattern, msg);
        return -1;
    }
    c->classes = xrealloc(c->classes, (c->n_classes + 1) * sizeof(*c->classes));
    struct triage_class *k = &c->classes[c->n_classes++];
    k->name = xstrdup(name);
    k->pattern = xstrdup(pattern);
    k->re = re;
    return 0;
}

void triage_config_copy(struct triage_config *dst, const struct triage_config *src)
{
    triage_config_init(dst);
    for (size_t i = 0; i < src->n_classes; i++) {
        char *err = NULL;
        if (triage_config_add(dst, src->classes[i].name, src->classes[i].pattern, &err) < 0)
            abort(); /* it compiled once: it compiles again */
    }
}

bool triage_config_equal(const struct triage_config *a, const struct triage_config *b)
{
    if (a->n_classes != b->n_classes)
        return false;
    for (size_t i = 0; i < a->n_classes; i++)
        if (strcmp(a->classes[i].name, b->classes[i].name) ||
            strcmp(a->classes[i].pattern, b->classes[i].pattern))
            return false;
    return true;
}

static const char *string_of(const struct toml_value *v)
{
    if (!v || toml_type_of(v) != TOML_STRING)
        return NULL;
    size_t len;
    const char *s = toml_string(v, &len);
    return strlen(s) == len ? s : NULL; /* no NUL inside */
}

int triage_config_from_toml(struct triage_config *c, const struct toml_value *v, char **err,
                            int *line)
{
    *line = toml_line(v);
    if (toml_type_of(v) != TOML_ARRAY) {
        *err = xstrdup("triage.classes must be an array of tables: write each class as "
                       "[[triage.classes]] with name = \"...\" and pattern = \"...\"");
        return -1;
    }
    struct triage_config next;
    triage_config_init(&next);
    for (size_t i = 0; i < toml_array_len(v); i++) {
        const struct toml_value *t = toml_array_at(v, i);
        *line = toml_line(t);
        if (toml_type_of(t) != TOML_TABLE) {
            *err = xasprintf("triage.classes[%zu] must be a table with name and pattern", i + 1);
            goto fail;
        }
        for (size_t k = 0; k < toml_table_len(t); k++) {
            const char *key = toml_table_key(t, k, NULL);
            if (strcmp(key, "name") && strcmp(key, "pattern")) {
                *line = toml_line(toml_table_value(t, k));
                *err = xasprintf("triage.classes[%zu]: unknown key '%s' (a class has name and "
                                 "pattern)",
                                 i + 1, key);
                goto fail;
            }
        }
        const char *name = string_of(toml_table_get(t, "name"));
        const char *pattern = string_of(toml_table_get(t, "pattern"));
        if (!name || !pattern) {
            *err = xasprintf("triage.classes[%zu].%s must be a string", i + 1,
                             name ? "pattern" : "name");
            goto fail;
        }
        char *why = NULL;
        if (triage_config_add(&next, name, pattern, &why) < 0) {
            *line = toml_line(toml_table_get(t, strncmp(why, "name", 4) ? "pattern" : "name"));
            *err = xasprintf("triage.classes[%zu].%s", i + 1, why);
            free(why);
            goto fail;
        }
    }
    triage_config_free(c);
    *c = next;
    return 0;
fail:
    triage_config_free(&next);
    return -1;
}

/* ---- the log's lines --------------------------------------------------------------- */

struct lines {
    char *text;  /* the cleaned tail, each line NUL-terminated */
    char **line; /* into text */
    size_t n;
};

/* The tail as lines a person would read: terminal escapes gone, a line rewritten with
 * '\r' (a progress bar) as it was last drawn, NUL bytes as spaces. */
static void lines_split(struct lines *ls, const char *log, size_t len, bool from_start)
{
    ls->text = xmalloc(len + 1);
    ls->line = NULL;
    ls->n = 0;
    size_t cap = 0, o = 0, line_start = 0, i = 0;
    if (!from_start) { /* the first line was cut by the tail's start */
        while (i < len && log[i] != '\n')
            i++;
        if (i < len)
            i++;
    }
    for (; i <= len; i++) {
        if (i == len || log[i] == '\n') {
            if (i == len && o == line_start)
                break; /* the text ended with a newline */
            ls->text[o++] = '\0';
            if (ls->n == cap) {
                cap = cap ? cap * 2 : 64;
                ls->line = xrealloc(ls->line, cap * sizeof(*ls->line));
            }
            ls->line[ls->n++] = ls->text + line_start; /* fixed up below: text is stable */
            line_start = o;
            continue;
        }
        unsigned char ch = (unsigned char)log[i];
        if (ch == 0x1b) { /* ESC [ ... final byte, or ESC and one byte */
            if (i + 1 < len && log[i + 1] == '[') {
                i += 2;
                while (i < len && !((unsigned char)log[i] >= 0x40 && (unsigned char)log[i] <= 0x7e))
                    i++;
            } else {
                i++;
            }
            continue;
        }
        if (ch == '\r') {
            if (i + 1 < len && log[i + 1] != '\n')
                o = line_start; /* drawn again from its start */
            continue;
        }
        ls->text[o++] = ch == '\0' ? ' ' : (char)ch;
    }
}

static void lines_free(struct lines *ls)
{
    free(ls->text);
    free(ls->line);
}

/* The last line that re matches, or -1. */
static ssize_t last_match(const struct lines *ls, const regex_t *re)
{
    for (size_t i = ls->n; i-- > 0;)
        if (regexec(re, ls->line[i], 0, NULL, 0) == 0)
            return (ssize_t)i;
    return -1;
}

/* A copy of s without its surrounding blanks, at most TRIAGE_LINE_MAX bytes (cut before
 * a UTF-8 continuation byte). */
static char *line_copy(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n <= TRIAGE_LINE_MAX)
        return xstrndup(s, n);
    size_t cut = TRIAGE_LINE_MAX - 3;
    while (cut && ((unsigned char)s[cut] & 0xc0) == 0x80)
        cut--;
    char *out = xmalloc(cut + 4);
    memcpy(out, s, cut);
    memcpy(out + cut, "...", 4);
    return out;
}

/* ---- the built-in classes ---------------------------------------------------------- */

/* Text that names the failure, most specific first (the order is the order of trying).
 * CudaOOM: PyTorch, cuBLAS/cuDNN, the CUDA runtime and driver, JAX/XLA and TensorFlow's
 * forms. NcclError: NCCL's own errors, PyTorch's ProcessGroupNCCL and its watchdog's
 * collective timeouts. */
static const struct builtin {
    const char *name;
    const char *pattern;
    int flags;
} builtins[] = {
    {"CudaOOM",
     "CUDA out of memory|CUDA error: out of memory|OutOfMemoryError: CUDA|"
     "CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|"
     "CUDA_ERROR_OUT_OF_MEMORY|RESOURCE_EXHAUSTED: Out of memory|"
     "OOM when allocating tensor|ResourceExhaustedError|"
     "Out of memory while trying to allocate",
     0},
    {"NcclError",
     "NCCL error|NCCL timeout|ProcessGroupNCCL|nccl(System|Internal|UnhandledCuda|Remote|"
     "InvalidUsage|InvalidArgument)Error|Watchdog caught collective operation timeout|"
     "NCCL communicator was aborted|DistBackendError",
     REG_ICASE},
    {"Segfault", "Segmentation fault|SIGSEGV", 0},
    {"CommandNotFound", "command not found", 0},
};
#define N_BUILTINS (sizeof(builtins) / sizeof(builtins[0]))
enum { B_CUDA_OOM, B_NCCL, B_SEGFAULT, B_NOT_FOUND };

static regex_t builtin_re[N_BUILTINS];
static bool builtin_ready;

static void builtins_compile(void)
{
    if (builtin_ready)
        return;
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (regcomp(&builtin_re[i], builtins[i].pattern,
                    REG_EXTENDED | REG_NOSUB | builtins[i].flags) != 0)
            abort(); /* a bug in the table above (test_triage fails on it) */
    builtin_ready = true;
}

/* The exception of the log's last Python traceback: the block's final "Type: message"
 * line (after the indented frames), found under the prefix the traceback line had
 * ("[rank0]: " from torchrun). *type is malloc'd ("ValueError", "json.decoder.X"). */
static ssize_t python_exception(const struct lines *ls, char **type)
{
    static const char head[] = "Traceback (most recent call last):";
    ssize_t at = -1;
    size_t plen = 0;
    for (size_t i = ls->n; i-- > 0;) {
        const char *h = strstr(ls->line[i], head);
        if (h) {
            at = (ssize_t)i;
            plen = (size_t)(h - ls->line[i]);
            break;
        }
    }
    if (at < 0)
        return -1;
    const char *prefix = ls->line[at];
    for (size_t i = (size_t)at + 1; i < ls->n; i++) {
        const char *s = ls->line[i];
        if (plen && strncmp(s, prefix, plen) == 0)
            s += plen;
        if (!*s || *s == ' ' || *s == '\t')
            continue; /* a frame, its source line, a ^^^^ marker */
        size_t n = 0;
        if ((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_') {
            while (s[n] == '_' || s[n] == '.' || (s[n] >= '0' && s[n] <= '9') ||
                   (s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z'))
                n++;
        }
        if (n && (s[n] == ':' || s[n] == '\0') && s[n - 1] != '.') {
            *type = xstrndup(s, n);
            return (ssize_t)i;
        }
        return -1; /* the block ended without an exception line (cut, or interleaved) */
    }
    return -1;
}

/* Sets the result from line i of ls (-1: no line). */
static int found(const char *name, const struct lines *ls, ssize_t i, char **cls, char **line)
{
    *cls = xstrdup(name);
    *line = i >= 0 ? line_copy(ls->line[i]) : NULL;
    return 1;
}

int triage_classify(const struct triage_config *c, const struct triage_input *in, char **cls,
                    char **line)
{
    *cls = *line = NULL;
    /* The kernel's word is better than any text: the OOM killer ended it. */
    if (in->oom) {
        *cls = xstrdup(TRIAGE_HOST_OOM);
        return 1;
    }
    /* The shim looked the command up before running it (shim/lookup.c). */
    if (in->launch_error) {
        if (strncmp(in->launch_error, "command not found", 17) != 0)
            return 0;
        *cls = xstrdup(builtins[B_NOT_FOUND].name);
        *line = line_copy(in->launch_error);
        return 1;
    }
    builtins_compile();
    struct lines ls;
    lines_split(&ls, in->log ? in->log : "", in->log ? in->len : 0, in->from_start || !in->log);
    int rc = 0;
    ssize_t i;
    for (size_t k = 0; c && k < c->n_classes; k++) {
        if ((i = last_match(&ls, &c->classes[k].re)) >= 0) {
            rc = found(c->classes[k].name, &ls, i, cls, line);
            goto done;
        }
    }
    if ((i = last_match(&ls, &builtin_re[B_CUDA_OOM])) >= 0) {
        rc = found(builtins[B_CUDA_OOM].name, &ls, i, cls, line);
        goto done;
    }
    if ((i = last_match(&ls, &builtin_re[B_NCCL])) >= 0) {
        rc = found(builtins[B_NCCL].name, &ls, i, cls, line);
        goto done;
    }
    /* A segfault: the job's own process died of SIGSEGV, or its shell said one of its
     * commands did ("Segmentation fault (core dumped)", exit 139). */
    i = last_match(&ls, &builtin_re[B_SEGFAULT]);
    if (in->signal == SIGSEGV || i >= 0) {
        rc = found(builtins[B_SEGFAULT].name, &ls, i, cls, line);
        goto done;
    }
    if (in->signal > 0) {
        char name[48];
        snprintf(name, sizeof(name), "Killed (%s)", job_signal_name(in->signal));
        rc = found(name, &ls, -1, cls, line);
        goto done;
    }
    /* The shell's "command not found" (its status is 127, but a job may exit 127 for
     * its own reasons, as shim/lookup.c says: the line is needed). */
    if ((i = last_match(&ls, &builtin_re[B_NOT_FOUND])) >= 0) {
        rc = found(builtins[B_NOT_FOUND].name, &ls, i, cls, line);
        goto done;
    }
    char *type = NULL;
    if ((i = python_exception(&ls, &type)) >= 0) {
        char name[TRIAGE_NAME_MAX + 32];
        snprintf(name, sizeof(name), "PythonException: %.*s", TRIAGE_NAME_MAX, type);
        free(type);
        rc = found(name, &ls, i, cls, line);
        goto done;
    }
done:
    lines_free(&ls);
    return rc;
}
