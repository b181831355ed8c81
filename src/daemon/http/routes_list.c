/* routes_list: GET /v1/jobs, the job list (docs/api.md): filters (state, id, user,
 * since), a sort key and a limit, as JSON or as TSV with chosen fields. Active jobs are
 * all in memory and listed from there (the common case: gqueue); history is read from
 * the store, merged with the active jobs by id when a listing has both (gqueue -a). */
#include "routes.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "jobs/jobs.h"
#include "jobs/priority.h"
#include "parse.h"
#include "store/store.h"
#include "util.h"

struct list_ctx {
    const struct jobs *jobs;
    struct strbuf out;
    size_t count;
    bool tsv;
    bool count_only; /* format=count: {"total": N} */
    int fields[JOB_FIELD_COUNT];
    size_t n_fields;
};

static void emit(struct list_ctx *ctx, const struct job *j)
{
    if (ctx->tsv) {
        job_append_tsv(&ctx->out, j, ctx->fields, ctx->n_fields);
        return;
    }
    if (ctx->count++)
        strbuf_addc(&ctx->out, ',');
    job_append_json(&ctx->out, j);
}

/* format=tsv: a header line with the field names (fields=..., default all), then one
 * line per job. Much cheaper than JSON for a client to read 10,000 jobs. */
static int parse_format(const struct route_req *r, struct list_ctx *ctx, char **err)
{
    const char *format = route_query(r, "format");
    if (!format || !strcmp(format, "json"))
        return 0;
    if (!strcmp(format, "count")) {
        ctx->count_only = true;
        return 0;
    }
    if (strcmp(format, "tsv") != 0) {
        *err = xasprintf("unknown format '%s': use json, tsv or count", format);
        return -1;
    }
    ctx->tsv = true;
    const char *fields = route_query(r, "fields");
    if (!fields || !*fields) {
        for (int f = 0; f < JOB_FIELD_COUNT; f++)
            ctx->fields[ctx->n_fields++] = f;
        return 0;
    }
    char *copy = xstrdup(fields), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int f = job_field_parse(tok);
        if (f < 0 || ctx->n_fields == JOB_FIELD_COUNT) {
            *err = xasprintf("unknown or repeated field '%s'", tok);
            free(copy);
            return -1;
        }
        ctx->fields[ctx->n_fields++] = f;
    }
    free(copy);
    return 0;
}

/* A job from the store: a queued one shows why it waits, as the live table knows. */
static void list_cb(struct job *j, void *arg)
{
    struct list_ctx *ctx = arg;
    if (j->state == JOB_QUEUED || j->state == JOB_RUNNING) {
        struct job *live = jobs_get(ctx->jobs, j->id);
        if (live && j->state == JOB_QUEUED)
            j->wait_reason = live->wait_reason;
        if (live && j->state == JOB_RUNNING) /* its GPU figures so far are in memory */
            job_gpu_use_copy(j, live);
    }
    emit(ctx, j);
    job_free(j);
}

/* ---- listing active jobs from memory ---- */

struct sort_spec {
    enum job_sort key;
    bool descending;
    double now;
};

/* Same order as store_list: the key, then the id, both in the requested direction. */
static int job_cmp(const void *pa, const void *pb, void *arg)
{
    const struct job *a = *(struct job *const *)pa, *b = *(struct job *const *)pb;
    const struct sort_spec *s = arg;
    int c = job_sort_compare(a, b, s->key, s->now);
    return s->descending ? -c : c;
}

static bool only_active_states(const struct store_query *q)
{
    if (q->n_states == 0)
        return false;
    for (size_t i = 0; i < q->n_states; i++)
        if (!job_state_is_active(q->states[i]))
            return false;
    return true;
}

/* Whether name is one of the ','-separated list's items (NULL is none of them). */
static bool in_list(const char *list, const char *name)
{
    size_t len = name ? strlen(name) : 0;
    for (const char *p = list; name && *p;) {
        size_t n = strcspn(p, ",");
        if (n == len && !strncmp(p, name, n))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

static bool matches(const struct job *j, const struct store_query *q, const int64_t *sorted_ids)
{
    bool state_ok = false;
    /* A job Slurm has not started is listed as it is shown: PD (job_backend_pending). */
    enum job_state shown = job_backend_pending(j) ? JOB_QUEUED : j->state;
    for (size_t i = 0; i < q->n_states && !state_ok; i++)
        state_ok = shown == q->states[i];
    if (!state_ok || (q->user && strcmp(j->user ? j->user : "", q->user) != 0))
        return false;
    if (q->running_cancelling_only && j->state == JOB_RUNNING && !job_is_cancelling(j))
        return false;
    if (q->since > 0 && j->submit_time < q->since)
        return false;
    if (q->projects && !in_list(q->projects, j->project))
        return false;
    return !sorted_ids || bsearch(&j->id, sorted_ids, q->n_ids, sizeof(int64_t), int64_cmp);
}

/* The query's ids sorted for matches()'s bsearch; NULL when it names none. */
static int64_t *query_ids_sorted(const struct store_query *q)
{
    if (!q->n_ids)
        return NULL;
    int64_t *ids = xmalloc(q->n_ids * sizeof(*ids));
    memcpy(ids, q->ids, q->n_ids * sizeof(*ids));
    qsort(ids, q->n_ids, sizeof(*ids), int64_cmp);
    return ids;
}

static void list_active(const struct store_query *q, struct list_ctx *ctx)
{
    size_t n;
    struct job **all = jobs_active(ctx->jobs, &n);
    int64_t *ids = query_ids_sorted(q);
    struct job **hits = xmalloc((n ? n : 1) * sizeof(*hits));
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (matches(all[i], q, ids))
            hits[count++] = all[i];
    free(ids);
    if (ctx->count_only) {
        ctx->count = count;
        free(hits);
        return;
    }
    struct sort_spec spec = {q->sort, q->descending, now_wall()};
    if (spec.key != JOB_SORT_ID || spec.descending)
        qsort_r(hits, count, sizeof(*hits), job_cmp, &spec);
    size_t from = 0, to = count;
    if (q->limit > 0 && (size_t)q->limit < count)
        to = (size_t)q->limit;
    else if (q->limit < 0 && (size_t)-q->limit < count)
        from = count - (size_t)-q->limit;
    for (size_t i = from; i < to; i++)
        emit(ctx, hits[i]);
    free(hits);
}

/* ---- listing active and finished jobs together ---- */

/* A listing of every state (gqueue -a) in id order takes the active jobs from memory, as
 * list_active does, and only the finished ones from the store, the two merged by id: the
 * store then reads no row of an active job (for 10,000 queued ones that was most of the
 * answer's time), and none at all when no finished job can match. */
struct merge_ctx {
    struct list_ctx *ctx;
    struct job **active; /* the matching active jobs, in id order */
    size_t n_active, next;
    bool descending;
    int64_t left; /* rows still to emit; -1: no limit */
};

static bool merge_goes_first(const struct merge_ctx *m, int64_t active_id, int64_t store_id)
{
    return m->descending ? active_id > store_id : active_id < store_id;
}

static void merge_emit(struct merge_ctx *m, const struct job *j)
{
    if (m->left == 0)
        return;
    emit(m->ctx, j);
    if (m->left > 0)
        m->left--;
}

/* A finished job from the store, after the active jobs that come before it. */
static void merge_cb(struct job *j, void *arg)
{
    struct merge_ctx *m = arg;
    while (m->next < m->n_active && merge_goes_first(m, m->active[m->next]->id, j->id))
        merge_emit(m, m->active[m->next++]);
    merge_emit(m, j);
    job_free(j);
}

/* Whether q can be listed by list_merged: sorted by id, the first N or all, asking for
 * some active state (the other listings are list_active's or the store's alone). */
static bool can_merge(const struct store_query *q)
{
    if (q->sort != JOB_SORT_ID || q->limit < 0 || only_active_states(q))
        return false;
    for (size_t i = 0; i < q->n_states; i++)
        if (job_state_is_active(q->states[i]))
            return true;
    return q->n_states == 0;
}

/* q's states split into the active and the finished ones (none given: all of each). */
static void split_states(const struct store_query *q, enum job_state *active, size_t *n_active,
                         enum job_state *finished, size_t *n_finished)
{
    *n_active = *n_finished = 0;
    for (int s = 0; s < JOB_STATE_COUNT; s++) {
        bool asked = q->n_states == 0;
        for (size_t i = 0; i < q->n_states && !asked; i++)
            asked = q->states[i] == (enum job_state)s;
        if (!asked)
            continue;
        if (job_state_is_active((enum job_state)s))
            active[(*n_active)++] = (enum job_state)s;
        else
            finished[(*n_finished)++] = (enum job_state)s;
    }
}

static int list_merged(struct store *store, const struct store_query *q, struct list_ctx *ctx)
{
    enum job_state active_states[JOB_STATE_COUNT], finished_states[JOB_STATE_COUNT];
    size_t n_active_states, n_finished_states;
    split_states(q, active_states, &n_active_states, finished_states, &n_finished_states);

    /* The active side: the table is in id order already. */
    struct store_query aq = *q;
    aq.states = active_states;
    aq.n_states = n_active_states;
    size_t n;
    struct job **all = jobs_active(ctx->jobs, &n);
    int64_t *ids = query_ids_sorted(q);
    struct merge_ctx m = {
        .ctx = ctx, .descending = q->descending, .left = q->limit > 0 ? q->limit : -1};
    m.active = xmalloc((n ? n : 1) * sizeof(*m.active));
    for (size_t i = 0; i < n; i++) {
        struct job *j = all[q->descending ? n - 1 - i : i];
        if (matches(j, &aq, ids))
            m.active[m.n_active++] = j;
    }
    free(ids);

    /* The finished side, unless the store holds no job in those states. */
    int64_t counts[JOB_STATE_COUNT];
    bool any_finished = false;
    if (store_count_states(store, counts) < 0) {
        free(m.active);
        return -1;
    }
    for (size_t i = 0; i < n_finished_states; i++)
        any_finished = any_finished || counts[finished_states[i]] > 0;
    int rc = 0;
    if (any_finished) {
        struct store_query fq = *q;
        fq.states = finished_states;
        fq.n_states = n_finished_states;
        rc = store_list(store, &fq, merge_cb, &m);
    }
    while (rc == 0 && m.next < m.n_active && m.left != 0)
        merge_emit(&m, m.active[m.next++]);
    free(m.active);
    return rc;
}

/* The states of a state=... filter. CG (a running job being cancelled) is R narrowed to
 * those jobs, unless R itself is asked too: R includes them (they still run). */
static int parse_states(const char *s, struct store_query *q, enum job_state *states, char **err)
{
    size_t n = 0;
    bool running = false, cancelling = false;
    char *copy = xstrdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        enum job_state st;
        if (job_state_parse(tok, &st) < 0) {
            *err = xasprintf("unknown state '%s': use PD, H, R, CG, CD, F, CA or TO", tok);
            free(copy);
            return -1;
        }
        if (job_state_is_cancelling_name(tok))
            cancelling = true;
        else if (st == JOB_RUNNING)
            running = true;
        if (n < 64)
            states[n++] = st;
    }
    free(copy);
    q->states = states;
    q->n_states = n;
    q->running_cancelling_only = cancelling && !running;
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    int64_t x = ((const struct id_range *)a)->lo, y = ((const struct id_range *)b)->lo;
    return (x > y) - (x < y);
}

/* The ids an id list names among those that can exist (ids beyond the last one given
 * out are no job's, so "1-1000000" on a young daemon is a few ids), at most
 * limits.max_ids_per_request of them. 0, or -1 with *err and the status in *status. */
static int existing_ids(const struct route_req *r, const char *text, int64_t **ids, size_t *n,
                        unsigned *status, char **err)
{
    struct id_range *rg;
    size_t nr;
    *status = 400;
    if (parse_id_ranges(text, &rg, &nr, err) < 0)
        return -1;
    int64_t last = jobs_next_id(r->d->jobs) - 1;
    int64_t max = r->d->cfg.limits.max_ids_per_request;
    /* Clipped, sorted and merged, so that each id counts once. */
    size_t m = 0;
    for (size_t i = 0; i < nr; i++) {
        if (rg[i].hi > last)
            rg[i].hi = last;
        if (rg[i].lo <= rg[i].hi)
            rg[m++] = rg[i];
    }
    qsort(rg, m, sizeof(*rg), cmp_range);
    nr = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < m; i++) {
        if (nr && rg[i].lo <= rg[nr - 1].hi + 1) {
            if (rg[i].hi > rg[nr - 1].hi)
                rg[nr - 1].hi = rg[i].hi;
        } else {
            rg[nr++] = rg[i];
        }
    }
    for (size_t i = 0; i < nr; i++)
        total += (uint64_t)(rg[i].hi - rg[i].lo) + 1;
    if (total > (uint64_t)max) {
        *status = 413;
        *err = xasprintf("the id list names %llu existing jobs, more than "
                         "limits.max_ids_per_request (%lld); ask for fewer at a time",
                         (unsigned long long)total, (long long)max);
        free(rg);
        return -1;
    }
    int64_t *out = xmalloc((total ? total : 1) * sizeof(*out));
    size_t k = 0;
    for (size_t i = 0; i < nr; i++)
        for (int64_t id = rg[i].lo; id <= rg[i].hi; id++)
            out[k++] = id;
    free(rg);
    if (k == 0) /* none can exist; an empty list would mean every job */
        out[k++] = last + 1;
    *ids = out;
    *n = k;
    return 0;
}

/* The query's filters, order and limit. 0, or -1 with *err and the status in *status. */
static int parse_query(const struct route_req *r, struct store_query *q, enum job_state *states,
                       int64_t **ids, unsigned *status, char **err)
{
    *status = 400;
    const char *v;
    if ((v = route_query(r, "state")) && *v) {
        if (parse_states(v, q, states, err) < 0)
            return -1;
    }
    if ((v = route_query(r, "id")) && *v) {
        if (existing_ids(r, v, ids, &q->n_ids, status, err) < 0)
            return -1;
        q->ids = *ids;
    }
    v = route_query(r, "user");
    q->user = !v || !*v ? r->who->user : (strcmp(v, "all") == 0 ? NULL : v);
    if ((v = route_query(r, "project")) && *v)
        q->projects = v;
    if ((v = route_query(r, "since")) && *v) {
        char *end;
        q->since = strtod(v, &end);
        if (*end) {
            *err = xasprintf("'since' must be unix seconds, not '%s'", v);
            return -1;
        }
    }
    if ((v = route_query(r, "sort")) && *v) {
        q->descending = v[0] == '-';
        const char *key = q->descending ? v + 1 : v;
        if (job_sort_parse(key, &q->sort) < 0) {
            *err = xasprintf("unknown sort key '%s': use %s", key, job_sort_names());
            return -1;
        }
    }
    if ((v = route_query(r, "limit")) && *v && parse_int64(v, &q->limit) < 0) {
        *err = xasprintf("'limit' must be an integer, not '%s'", v);
        return -1;
    }
    return 0;
}

void route_list(const struct route_req *r, struct reply *rep)
{
    struct store_query q = {0};
    enum job_state states[64];
    int64_t *ids = NULL;
    char *err = NULL;
    struct list_ctx ctx = {.jobs = r->d->jobs};
    unsigned status = 400;
    if (parse_query(r, &q, states, &ids, &status, &err) < 0 || parse_format(r, &ctx, &err) < 0)
        goto bad;
    bool want[JOB_FIELD_COUNT] = {false};
    if (ctx.tsv) { /* the store reads only the columns these fields show */
        for (size_t i = 0; i < ctx.n_fields; i++)
            want[ctx.fields[i]] = true;
        q.fields = want;
    }
    if (ctx.count_only) {
        int64_t total = 0;
        if (only_active_states(&q)) {
            list_active(&q, &ctx);
            total = (int64_t)ctx.count;
        } else if (store_count(r->d->store, &q, &total) < 0) {
            err = xstrdup(store_error(r->d->store));
            status = 500;
            goto bad;
        }
        free(ids);
        reply_json(rep, 200, json_pack("{s:I}", "total", (json_int_t)total));
        return;
    }
    strbuf_init(&ctx.out);
    if (ctx.tsv) {
        for (size_t i = 0; i < ctx.n_fields; i++) {
            strbuf_adds(&ctx.out, job_field_name((enum job_field)ctx.fields[i]));
            strbuf_addc(&ctx.out, i + 1 < ctx.n_fields ? '\t' : '\n');
        }
    } else {
        strbuf_adds(&ctx.out, "{\"jobs\":[");
    }
    /* The waiting jobs' effective priority, when the listing shows it. */
    if (!ctx.tsv || want[JOB_FIELD_EFFECTIVE_PRIORITY]) {
        struct priority_weights w = priority_weights_of(&r->d->cfg);
        jobs_priority_refresh(r->d->jobs, &w, now_wall());
    }
    /* Active jobs are all in memory; only history needs the database. */
    int rc = 0;
    if (only_active_states(&q))
        list_active(&q, &ctx);
    else if (can_merge(&q))
        rc = list_merged(r->d->store, &q, &ctx);
    else
        rc = store_list(r->d->store, &q, list_cb, &ctx);
    if (rc < 0) {
        strbuf_free(&ctx.out);
        err = xstrdup(store_error(r->d->store));
        status = 500;
        goto bad;
    }
    if (!ctx.tsv)
        strbuf_adds(&ctx.out, "]}\n");
    free(ids);
    size_t len = ctx.out.len;
    reply_text(rep, 200, strbuf_detach(&ctx.out), len,
               ctx.tsv ? "text/tab-separated-values" : "application/json");
    return;
bad:
    reply_error(rep, status, "%s", err);
    free(err);
    free(ids);
}
