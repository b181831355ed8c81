/* jobopts_directives: a script's "# GFLOW" lines, read by gbatch and gflow-mcp: the
 * walk over them and the splitting of one into words (jobopts.h). */
#include "jobopts.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

int jobopts_split_words(const char *s, char ***words, int *n)
{
    int cap = 8;
    *words = xmalloc((size_t)cap * sizeof(char *));
    *n = 0;
    struct strbuf w;
    strbuf_init(&w);
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        strbuf_reset(&w);
        strbuf_adds(&w, "");
        while (*p && *p != ' ' && *p != '\t') {
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                while (*p && *p != q) {
                    if (q == '"' && *p == '\\' && (p[1] == '"' || p[1] == '\\'))
                        p++;
                    strbuf_addc(&w, *p++);
                }
                if (!*p) {
                    strbuf_free(&w);
                    for (int i = 0; i < *n; i++)
                        free((*words)[i]);
                    free(*words);
                    return -1;
                }
                p++;
            } else {
                strbuf_addc(&w, *p++);
            }
        }
        if (*n + 2 > cap) {
            cap *= 2;
            *words = xrealloc(*words, (size_t)cap * sizeof(char *));
        }
        (*words)[(*n)++] = strbuf_detach(&w);
    }
    strbuf_free(&w);
    (*words)[*n] = NULL;
    return 0;
}

/* One directive, body (the text after "# GFLOW"), read as line lineno of file. */
static int jo_directive(const char *body, const char *file, int lineno, jobopts_directive_fn fn,
                        void *arg, struct jobopts_err *error)
{
    struct jobopts_ctx ctx = {JOBOPTS_SUBMIT, "gbatch", file, lineno, error};
    char **words;
    int n;
    if (jobopts_split_words(body, &words, &n) < 0)
        return jobopts_fail(&ctx, "unterminated quote");
    /* getopt wants a program name in argv[0]. */
    char **argv = xmalloc((size_t)(n + 2) * sizeof(char *));
    argv[0] = "gbatch";
    memcpy(argv + 1, words, (size_t)(n + 1) * sizeof(char *));
    int r = fn(n + 1, argv, &ctx, arg);
    free(argv);
    for (int i = 0; i < n; i++)
        free(words[i]);
    free(words);
    return r;
}

int jobopts_each_directive(const char *text, const char *file, jobopts_directive_fn fn, void *arg,
                           struct jobopts_err *error)
{
    const char *line = text;
    int r = 0;
    for (int lineno = 1; *line && r == 0; lineno++) {
        size_t len = strcspn(line, "\n");
        const char *rest = NULL;
        if (!strncmp(line, "# GFLOW", 7))
            rest = line + 7;
        else if (!strncmp(line, "#GFLOW", 6))
            rest = line + 6;
        if (rest && (rest == line + len || *rest == ' ' || *rest == '\t' || *rest == '\r')) {
            char *body = xstrndup(rest, (size_t)(line + len - rest));
            body[strcspn(body, "\r")] = '\0';
            r = jo_directive(body, file, lineno, fn, arg, error);
            free(body);
        }
        line += len;
        if (*line == '\n')
            line++;
    }
    return r;
}
