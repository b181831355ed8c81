/* sweep: arrays and parameter sweeps, one submission expanded into many jobs (see
 * sweep.h). */
#include "sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "parse.h"
#include "util.h"

/* A copy of base for one task of an array or a sweep (the payload shared or copied). */
/* A task of base. Only the first (the group's leader) gets its own copy of the script;
 * the others share the environment object and leave the script (an array's) and the
 * templates (a sweep's) to the first: the store keeps those once, with the group's
 * leader, and reads them from there (store_job.c, payload_beside), so 100,000 copies
 * would only be compared and freed. */
static struct job *task_of(const struct job *base, bool first, bool own_command)
{
    /* Its name (and a sweep's command) are made for it: not copied only to be freed. */
    struct job view = *base;
    view.name = NULL;
    if (own_command)
        view.command = NULL;
    struct job *t = job_dup(&view, false);
    t->script = first && base->script ? xstrdup(base->script) : NULL;
    t->env = base->env ? json_incref(base->env) : NULL;
    return t;
}

/* "_N" into out (24 bytes): a task's name suffix, once per task (no printf). */
static void task_suffix(char *out, long long v)
{
    char digits[24];
    size_t n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t k = 0;
    out[k++] = '_';
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = digits[--n];
    out[k] = '\0';
}

int sweep_expand(struct job *base, const json_t *array, const json_t *params,
                 const json_t *name_tmpl, struct job ***out, size_t *n_out, int64_t *limit,
                 char **err)
{
    struct job **jobs = NULL;
    size_t n = 0;
    *limit = 0;
    if (array) {
        int64_t *tasks;
        if (!json_is_string(array)) {
            *err = xstrdup("'array' must be a string such as \"1-10\", \"1-10:2\" or "
                           "\"1,3,7%2\"");
            goto fail;
        }
        if (parse_array_spec(json_string_value(array), &tasks, &n, limit, err) < 0)
            goto fail;
        jobs = xmalloc(n * sizeof(*jobs));
        for (size_t i = 0; i < n; i++) {
            struct job *t = task_of(base, i == 0, false);
            t->array_task = tasks[i];
            char suffix[24];
            task_suffix(suffix, (long long)tasks[i]);
            /* NAME_<task>, a long NAME cut to fit; none given: the daemon's gjob-<id> */
            t->name = base->name ? job_name_fit(base->name, suffix) : NULL;
            jobs[i] = t;
        }
        free(tasks);
    } else {
        json_t *names = json_object_get(params, "names");
        json_t *rows = json_object_get(params, "rows");
        size_t nn = json_array_size(names);
        if (!json_is_object(params) || !json_is_array(names) || !json_is_array(rows) || !nn ||
            !json_array_size(rows) || (name_tmpl && !json_is_string(name_tmpl))) {
            *err = xstrdup("'params' must be {\"names\": [...], \"rows\": [[...], ...]} (values "
                           "as strings) and 'name_template' a string");
            goto fail;
        }
        char **pn = xcalloc(nn, sizeof(*pn)), **pv = xcalloc(nn, sizeof(*pv));
        for (size_t k = 0; k < nn; k++) {
            const char *s = json_string_value(json_array_get(names, k));
            if (!s || !param_name_valid(s)) {
                *err = xstrdup("params: each name must be letters, digits and '_', not starting "
                               "with a digit");
                free(pn);
                free(pv);
                goto fail;
            }
            pn[k] = (char *)s;
        }
        size_t nr = json_array_size(rows);
        jobs = xmalloc(nr * sizeof(*jobs));
        for (size_t r = 0; r < nr; r++) {
            json_t *row = json_array_get(rows, r);
            bool ok = json_is_array(row) && json_array_size(row) == nn;
            for (size_t k = 0; ok && k < nn; k++)
                ok = (pv[k] = (char *)json_string_value(json_array_get(row, k))) != NULL;
            if (!ok) {
                *err = xasprintf("params: row %zu must be a list of %zu strings", r + 1, nn);
                free(pn);
                free(pv);
                goto fail;
            }
            bool first = r == 0;
            struct job *t = task_of(base, first, true);
            jobs[n++] = t;
            /* The job keeps its values and (through the first) the templates (gjob
             * update --param). */
            t->params = json_object();
            for (size_t k = 0; k < nn; k++)
                json_object_set_new(t->params, pn[k], json_string(pv[k]));
            if (name_tmpl && first)
                t->name_template = xstrdup(json_string_value(name_tmpl));
            if (base->command) {
                t->command = sweep_fill_command(base->command, pn, pv, nn);
                if (first)
                    t->command_template = xstrdup(base->command);
            }
            if (base->script) {
                free(t->script);
                t->script = sweep_fill_command(base->script, pn, pv, nn);
                if (first)
                    t->script_template = xstrdup(base->script);
            }
            char suffix[24];
            task_suffix(suffix, (long long)(r + 1));
            t->name = name_tmpl    ? sweep_fill_name(json_string_value(name_tmpl), pn, pv, nn)
                      : base->name ? job_name_fit(base->name, suffix)
                                   : NULL;
            if (t->name && !job_name_valid(t->name)) {
                *err = xasprintf("params: row %zu: the name '%s' is not valid (1 to %d "
                                 "printable characters)",
                                 r + 1, t->name, JOB_NAME_MAX);
                free(pn);
                free(pv);
                goto fail;
            }
        }
        free(pn);
        free(pv);
    }
    job_free(base);
    *out = jobs;
    *n_out = n;
    return 0;
fail:
    for (size_t i = 0; i < n && jobs; i++)
        job_free(jobs[i]);
    free(jobs);
    job_free(base);
    return -1;
}

int sweep_rewrite(const struct job *f, json_t *over, struct job *carry, char **err)
{
    json_t *p = json_object_get(over, "params");
    if (!f->params) {
        if (p) {
            *err = xasprintf("job %lld has no parameters (only the jobs of a sweep, gbatch "
                             "--param, have them)",
                             (long long)f->id);
            return -1;
        }
        return 0;
    }
    const char *key;
    json_t *v;
    if (p) {
        if (!json_is_object(p) || !json_object_size(p)) {
            *err = xstrdup("'params' must be an object of parameter names and values "
                           "(strings), e.g. {\"lr\": \"0.2\"}");
            return -1;
        }
        struct strbuf unknown, have;
        strbuf_init(&unknown);
        strbuf_init(&have);
        json_object_foreach (p, key, v) {
            if (!json_object_get(f->params, key))
                strbuf_addf(&unknown, "%s'%s'", unknown.len ? ", " : "", key);
            else if (!json_is_string(v)) {
                *err = xasprintf("params: the value of '%s' must be a string", key);
                strbuf_free(&unknown);
                strbuf_free(&have);
                return -1;
            }
        }
        if (unknown.len) {
            json_object_foreach (f->params, key, v)
                strbuf_addf(&have, "%s%s", have.len ? ", " : "", key);
            *err = xasprintf("job %lld has no parameter %s (its parameters: %s)", (long long)f->id,
                             unknown.buf, have.buf);
            strbuf_free(&unknown);
            strbuf_free(&have);
            return -1;
        }
        strbuf_free(&unknown);
        strbuf_free(&have);
    }
    carry->params = json_deep_copy(f->params);
    json_object_foreach (p, key, v)
        json_object_set(carry->params, key, v);
    json_t *cmd = json_object_get(over, "command"), *script = json_object_get(over, "script");
    json_t *name = json_object_get(over, "name");
    carry->command_template = f->command_template ? xstrdup(f->command_template) : NULL;
    carry->script_template = f->script_template ? xstrdup(f->script_template) : NULL;
    carry->name_template = f->name_template ? xstrdup(f->name_template) : NULL;
    if (json_is_string(cmd)) {
        free(carry->command_template);
        free(carry->script_template);
        carry->command_template = xstrdup(json_string_value(cmd));
        carry->script_template = NULL;
    } else if (json_is_string(script)) {
        free(carry->command_template);
        free(carry->script_template);
        carry->script_template = xstrdup(json_string_value(script));
        carry->command_template = NULL;
    }
    if (name) {
        free(carry->name_template);
        carry->name_template = json_is_string(name) ? xstrdup(json_string_value(name)) : NULL;
    }
    json_incref(p);
    json_object_del(over, "params");
    if (p || cmd || script || name) {
        size_t nn = json_object_size(carry->params), k = 0;
        char **pn = xcalloc(nn ? nn : 1, sizeof(*pn)), **pv = xcalloc(nn ? nn : 1, sizeof(*pv));
        json_object_foreach (carry->params, key, v) {
            pn[k] = (char *)key;
            pv[k++] = (char *)(json_is_string(v) ? json_string_value(v) : "");
        }
        if (carry->command_template && (p || cmd)) {
            char *text = sweep_fill_command(carry->command_template, pn, pv, nn);
            json_object_set_new(over, "command", json_string(text));
            free(text);
        } else if (carry->script_template && (p || script)) {
            char *text = sweep_fill_command(carry->script_template, pn, pv, nn);
            json_object_set_new(over, "script", json_string(text));
            free(text);
            if (!script && f->script_path)
                json_object_set_new(over, "script_path", json_string(f->script_path));
        }
        if (carry->name_template && (p || json_is_string(name))) {
            char *filled = sweep_fill_name(carry->name_template, pn, pv, nn);
            json_object_set_new(over, "name", json_string(filled));
            free(filled);
        }
        free(pn);
        free(pv);
    }
    json_decref(p);
    return 0;
}

void sweep_move(struct job *n, struct job *carry)
{
    n->params = carry->params;
    n->command_template = carry->command_template;
    n->script_template = carry->script_template;
    n->name_template = carry->name_template;
    carry->params = NULL;
    carry->command_template = carry->script_template = carry->name_template = NULL;
}

/* ---- filling in the values ---- */

/* The index of the parameter named by p[0..len), or -1. */
static ssize_t sweep_param(const char *p, size_t len, char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && memcmp(names[i], p, len) == 0)
            return (ssize_t)i;
    return -1;
}

/* If tmpl[i] starts "{NAME}" for a parameter: its index and *skip (the length). */
static ssize_t sweep_placeholder(const char *t, char *const *names, size_t n, size_t *skip)
{
    if (*t != '{')
        return -1;
    const char *close = strchr(t + 1, '}');
    if (!close)
        return -1;
    ssize_t k = sweep_param(t + 1, (size_t)(close - t - 1), names, n);
    if (k >= 0)
        *skip = (size_t)(close - t) + 1;
    return k;
}

char *sweep_fill_command(const char *tmpl, char *const *names, char *const *values, size_t n)
{
    struct strbuf sb;
    strbuf_init(&sb);
    enum { NONE, SQ, DQ } q = NONE;
    for (const char *t = tmpl; *t;) {
        size_t skip;
        ssize_t k =
            (q == SQ || t == tmpl || t[-1] != '$') ? sweep_placeholder(t, names, n, &skip) : -1;
        if (k >= 0 && q == SQ && t > tmpl && t[-1] == '\'' && t[skip] == '\'') {
            /* A whole single-quoted word '{x}' (gbatch quotes the {x} it is given):
             * the value's own quoting replaces it, so 7 reads 7, not ''7''. */
            sb.buf[--sb.len] = '\0';
            shell_quote_add(&sb, values[k]);
            t += skip + 1;
            q = NONE;
            continue;
        }
        if (k >= 0) {
            /* Never leave a value bare next to other text that could merge with it:
             * shell_quote keeps safe words unquoted, which is fine, they hold no syntax. */
            if (q == SQ)
                strbuf_addc(&sb, '\'');
            else if (q == DQ)
                strbuf_addc(&sb, '"');
            shell_quote_add(&sb, values[k]);
            if (q == SQ)
                strbuf_addc(&sb, '\'');
            else if (q == DQ)
                strbuf_addc(&sb, '"');
            t += skip;
            continue;
        }
        char c = *t;
        if (q == NONE) {
            if (c == '\\' && t[1]) {
                strbuf_add(&sb, t, 2);
                t += 2;
                continue;
            }
            if (c == '\'')
                q = SQ;
            else if (c == '"')
                q = DQ;
        } else if (q == SQ) {
            if (c == '\'')
                q = NONE;
        } else {
            if (c == '\\' && t[1]) {
                strbuf_add(&sb, t, 2);
                t += 2;
                continue;
            }
            if (c == '"')
                q = NONE;
        }
        strbuf_addc(&sb, c);
        t++;
    }
    return strbuf_detach(&sb);
}

char *sweep_fill_name(const char *tmpl, char *const *names, char *const *values, size_t n)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (const char *t = tmpl; *t;) {
        size_t skip;
        ssize_t k = sweep_placeholder(t, names, n, &skip);
        if (k >= 0) {
            strbuf_adds(&sb, values[k]);
            t += skip;
        } else {
            strbuf_addc(&sb, *t++);
        }
    }
    return strbuf_detach(&sb);
}
