/* jobopts_deps: the one dependency parser of gbatch, gjob update and gflow-mcp
 * (jobopts.h): --depends-on / --depends-on-all / --depends-on-any lists, @ and @~N
 * references, Slurm's --dependency spec; the result de-duplicated in the order given;
 * and jobopts_merge, which keeps a spec's dependency mode with its list. */
#include "jobopts.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "job.h"
#include "parse.h"
#include "util.h"

struct jo_dep {
    int64_t id;
    enum job_dep_kind kind;
    size_t pos; /* the order given, kept through de-duplication */
};

struct jo_deps {
    struct jo_dep *v;
    size_t n, cap, next_pos;
};

static int jo_dep_cmp_key(const void *a, const void *b)
{
    const struct jo_dep *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int jo_dep_cmp_pos(const void *a, const void *b)
{
    const struct jo_dep *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Drops repeated (id, kind) entries, keeping the first of each, in the order given.
 * Sorting keeps it O(n log n): a range may name many jobs. */
static void jo_deps_dedupe(struct jo_deps *d)
{
    if (d->n < 2)
        return;
    qsort(d->v, d->n, sizeof(*d->v), jo_dep_cmp_key);
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (k == 0 || d->v[i].id != d->v[k - 1].id || d->v[i].kind != d->v[k - 1].kind)
            d->v[k++] = d->v[i];
    }
    d->n = k;
    qsort(d->v, d->n, sizeof(*d->v), jo_dep_cmp_pos);
}

static int jo_deps_bound(const struct jobopts_ctx *ctx, const char *opt, struct jo_deps *d)
{
    jo_deps_dedupe(d);
    if (d->n > JOBOPTS_DEPS_MAX)
        return jobopts_fail(ctx, "%s: too many dependencies; a job may wait for at most %d jobs",
                            opt, JOBOPTS_DEPS_MAX);
    return 0;
}

static int jo_deps_push(const struct jobopts_ctx *ctx, const char *opt, struct jo_deps *d,
                        int64_t id, enum job_dep_kind kind)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->v = xrealloc(d->v, d->cap * sizeof(*d->v));
    }
    d->v[d->n++] = (struct jo_dep){id, kind, d->next_pos++};
    /* Repeated long ranges must not pile up before the end: de-duplicate on the way,
     * rarely enough that it stays cheap. */
    if (d->n > 2 * (size_t)JOBOPTS_DEPS_MAX)
        return jo_deps_bound(ctx, opt, d);
    return 0;
}

/* An id list "1,3,5-7" (the core's grammar and its bound on a range). */
static int jo_deps_ids(const struct jobopts_ctx *ctx, const char *opt, const char *s,
                       enum job_dep_kind kind, struct jo_deps *d)
{
    int64_t *ids;
    size_t n;
    char *err = NULL;
    int r = 0;
    if (parse_id_list(s, &ids, &n, &err) < 0)
        return jobopts_fail_err(ctx, opt, err);
    for (size_t i = 0; i < n && r == 0; i++)
        r = jo_deps_push(ctx, opt, d, ids[i], kind);
    free(ids);
    return r;
}

/* The job '@~back' names, asked of the daemon; a failure is the daemon's message, with
 * the status of a failed request. */
static int jo_deps_ref(const struct jobopts_ctx *ctx, int back, int64_t *id)
{
    char *err = NULL;
    if (cli_try_resolve_ref(back, id, &err) == 0)
        return 0;
    free(ctx->error->message);
    *ctx->error = (struct jobopts_err){CLI_EXIT_FAIL, err};
    return -1;
}

/* One item of a list: a reference ("@", "@~2") or ids ("3", "5-7"). */
static int jo_deps_item(const struct jobopts_ctx *ctx, const char *opt, const char *tok,
                        enum job_dep_kind kind, struct jo_deps *d)
{
    int back;
    int64_t id;
    char *err = NULL;
    int r = parse_job_ref(tok, &back, &err);
    if (r < 0)
        return jobopts_fail_err(ctx, opt, err);
    if (r == 0)
        return jo_deps_ids(ctx, opt, tok, kind, d);
    if (jo_deps_ref(ctx, back, &id) < 0)
        return -1;
    return jo_deps_push(ctx, opt, d, id, kind);
}

/* A list of ids, ranges and references "3,@,@~2,5-7", as cli_parse_ids reads one. */
static int jo_deps_list(const struct jobopts_ctx *ctx, const char *opt, const char *list,
                        enum job_dep_kind kind, struct jo_deps *d)
{
    if (!strchr(list, '@'))
        return jo_deps_ids(ctx, opt, list, kind, d);
    size_t len = strlen(list);
    if (list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,"))
        return jobopts_fail(ctx, "%s: invalid job id list '%s': empty item; use e.g. 1,3,5-7", opt,
                            list);
    char *copy = xstrdup(list), *save = NULL;
    int r = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && r == 0; tok = strtok_r(NULL, ",", &save))
        r = jo_deps_item(ctx, opt, tok, kind, d);
    free(copy);
    return r;
}

/* One item of Slurm's form, "afterok:1:2" (item is changed). */
static int jo_deps_slurm_item(const struct jobopts_ctx *ctx, const char *spec, char *item,
                              struct jo_deps *d)
{
    char *colon = strchr(item, ':');
    enum job_dep_kind kind;
    if (colon)
        *colon = '\0';
    if (job_dep_kind_parse(item, &kind) < 0)
        return jobopts_fail(ctx,
                            "unsupported dependency type '%s' in --dependency '%s': use "
                            "afterok, afterany or afternotok",
                            item, spec);
    if (!colon || !colon[1])
        return jobopts_fail(ctx, "no job id after '%s:' in --dependency '%s'", item, spec);
    char *save = NULL;
    int r = 0;
    for (char *id = strtok_r(colon + 1, ":", &save); id && r == 0; id = strtok_r(NULL, ":", &save))
        r = jo_deps_list(ctx, "--dependency", id, kind, d);
    return r;
}

/* Slurm's form: "afterok:1:2,afterany:3" (all must hold) or "afterok:1?afternotok:2" (any
 * one suffices). Returns 1 for the '?' form, 0 for the other, -1 on a bad one. */
static int jo_deps_slurm(const struct jobopts_ctx *ctx, const char *spec, struct jo_deps *d)
{
    bool any = strchr(spec, '?') != NULL;
    if (any && strchr(spec, ','))
        return jobopts_fail(
            ctx, "invalid --dependency '%s': join with ',' (all) or '?' (any), not both", spec);
    const char *sep = any ? "?" : ",";
    char *copy = xstrdup(spec), *save = NULL;
    int r = 0;
    for (char *item = strtok_r(copy, sep, &save); item && r == 0; item = strtok_r(NULL, sep, &save))
        r = jo_deps_slurm_item(ctx, spec, item, d);
    free(copy);
    return r < 0 ? -1 : any;
}

/* arg's entries after those spec already has, de-duplicated and bounded. */
static int jo_deps_collect(const struct jobopts_ctx *ctx, const char *opt, const char *arg,
                           bool slurm, const char **mode, const json_t *spec, struct jo_deps *d)
{
    size_t i;
    const json_t *e;
    json_array_foreach (json_object_get(spec, JOB_KEY_DEPENDS_ON), i, e) {
        enum job_dep_kind kind = job_dep_kind_of_json(e);
        if (jo_deps_push(ctx, opt, d, json_integer_value(json_object_get(e, "id")), kind) < 0)
            return -1;
    }
    if (slurm && !strncasecmp(arg, "after", 5)) {
        int any = jo_deps_slurm(ctx, arg, d);
        if (any < 0)
            return -1;
        if (any)
            *mode = "any";
    } else if (jo_deps_list(ctx, opt, arg, JOB_DEP_AFTEROK, d) < 0) {
        return -1;
    }
    return jo_deps_bound(ctx, opt, d);
}

int jobopts_deps(const struct jobopts_ctx *ctx, const char *opt, const char *arg, bool slurm,
                 const char *mode, json_t *spec)
{
    struct jo_deps d = {0};
    if (jo_deps_collect(ctx, opt, arg, slurm, &mode, spec, &d) < 0) {
        free(d.v);
        return -1;
    }
    json_t *deps = json_array();
    for (size_t i = 0; i < d.n; i++)
        json_array_append_new(deps, json_pack("{s:I, s:s}", "id", (json_int_t)d.v[i].id, "kind",
                                              job_dep_kind_name(d.v[i].kind)));
    free(d.v);
    json_object_set_new(spec, JOB_KEY_DEPENDS_ON, deps);
    if (mode)
        json_object_set_new(spec, JOB_KEY_DEPENDS_MODE, json_string(mode));
    else if (!json_object_get(spec, JOB_KEY_DEPENDS_MODE))
        json_object_set_new(spec, JOB_KEY_DEPENDS_MODE, json_string("all"));
    return 0;
}

void jobopts_merge(json_t *spec, const json_t *from)
{
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)from, key, v) {
        if (!strcmp(key, "depends_mode") || json_object_get(spec, key))
            continue;
        json_object_set(spec, key, v);
        json_t *mode = json_object_get(from, "depends_mode");
        if (!strcmp(key, "depends_on") && mode)
            json_object_set(spec, JOB_KEY_DEPENDS_MODE, mode);
    }
}
