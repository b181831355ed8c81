/* store_list: many jobs at once and the store's small tables: the active jobs at
 * start-up, GET /v1/jobs listings of the history (filters, sort, limit), counts per
 * state, runtime settings and submission groups. */
#include "store_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* Collects the rows of st (light columns) into a growing array. */
struct job_vec {
    struct job **v;
    size_t n, cap;
};

static void job_vec_push(struct job_vec *jv, struct job *j)
{
    if (jv->n == jv->cap) {
        jv->cap = jv->cap ? jv->cap * 2 : 64;
        jv->v = xrealloc(jv->v, jv->cap * sizeof(*jv->v));
    }
    jv->v[jv->n++] = j;
}

static void job_vec_free(struct job_vec *jv)
{
    for (size_t i = 0; i < jv->n; i++)
        job_free(jv->v[i]);
    free(jv->v);
}

int store_load_active(struct store *s, store_job_cb cb, void *arg)
{
    /* Read everything first, then call back: at start-up the callback re-adopts jobs and
     * may well update them, which must not happen under a running SELECT. */
    struct job_vec jv = {0};
    sqlite3_stmt *st = s->st_load_active;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct job *j = xmalloc(sizeof(*j));
        store_read_job(s, st, j, false);
        job_vec_push(&jv, j);
    }
    if (rc != SQLITE_DONE) {
        store_db_err(s, "loading the active jobs");
        store_finish(st);
        job_vec_free(&jv);
        return -1;
    }
    store_finish(st);
    for (size_t i = 0; i < jv.n; i++)
        cb(jv.v[i], arg);
    free(jv.v);
    return 0;
}

/* The SQL of each sort key of job.h (a fixed list: nothing a caller sends is ever
 * pasted into SQL); NULL: the id alone. "?" in time's expression is the current time. */
static const char *const sort_sql[JOB_SORT_COUNT] = {
    [JOB_SORT_ID] = NULL,
    [JOB_SORT_NAME] = "name",
    [JOB_SORT_STATE] = "state",
    [JOB_SORT_PRIORITY] = "priority",
    [JOB_SORT_USER] = "user",
    [JOB_SORT_SUBMIT] = "submit_time",
    [JOB_SORT_START] = "start_time",
    [JOB_SORT_END] = "end_time",
    [JOB_SORT_TIME] = "CASE WHEN start_time > 0 THEN (CASE WHEN end_time > 0 THEN end_time"
                      " ELSE ? END) - start_time ELSE 0 END",
};

/* The columns each job field is read from (n 0: one without a column of its own, for
 * which every column is read, so that a field added later cannot come out empty). */
static const struct {
    int n;
    int c[7];
} field_cols[JOB_FIELD_COUNT] = {
    [JOB_FIELD_ID] = {1, {C_ID}},
    [JOB_FIELD_NAME] = {1, {C_NAME}},
    [JOB_FIELD_USER] = {1, {C_USER}},
    [JOB_FIELD_UID] = {1, {C_UID}},
    /* CG: R with a cancel asked; PD: R not started by Slurm yet (slurm_reason) */
    [JOB_FIELD_STATE] = {3, {C_STATE, C_END_REQUEST, C_SLURM_REASON}},
    [JOB_FIELD_STATE_NAME] = {3, {C_STATE, C_END_REQUEST, C_SLURM_REASON}},
    [JOB_FIELD_PRIORITY] = {1, {C_PRIORITY}},
    [JOB_FIELD_TIME_LIMIT] = {1, {C_TIME_LIMIT}},
    [JOB_FIELD_SUBMIT_TIME] = {1, {C_SUBMIT_TIME}},
    [JOB_FIELD_START_TIME] = {1, {C_START_TIME}},
    [JOB_FIELD_END_TIME] = {1, {C_END_TIME}},
    [JOB_FIELD_EXIT_CODE] = {1, {C_EXIT_CODE}},
    [JOB_FIELD_SIGNAL] = {1, {C_SIGNAL}},
    [JOB_FIELD_SIGNAL_NAME] = {1, {C_SIGNAL}},
    [JOB_FIELD_OOM] = {1, {C_OOM}},
    /* a failed job's class reads as its reason */
    [JOB_FIELD_REASON] = {7,
                          {C_REASON, C_REASON_CODE, C_REASON_JOB, C_STATE, C_END_REQUEST,
                           C_SLURM_REASON, C_FAILURE_CLASS}},
    [JOB_FIELD_COMMAND] = {1, {C_COMMAND}},
    [JOB_FIELD_SCRIPT_PATH] = {1, {C_SCRIPT_PATH}},
    [JOB_FIELD_WORKDIR] = {1, {C_WORKDIR}},
    [JOB_FIELD_GPUS] = {1, {C_GPUS}},
    [JOB_FIELD_GPU_IDS] = {1, {C_GPU_IDS}},
    [JOB_FIELD_SHIM_PID] = {1, {C_SHIM_PID}},
    [JOB_FIELD_MAX_RSS_KB] = {1, {C_MAX_RSS_KB}},
    [JOB_FIELD_GPU_MEMORY_MB] = {1, {C_GPU_MEMORY_MB}},
    [JOB_FIELD_SHARED] = {1, {C_SHARED}},
    [JOB_FIELD_GPUS_PER_TASK] = {1, {C_GPUS_PER_TASK}},
    [JOB_FIELD_DEPENDS_ON] = {1, {C_DEPENDS_ON}},
    [JOB_FIELD_DEPENDS_MODE] = {1, {C_DEPENDS_ANY}},
    [JOB_FIELD_AUTO_CANCEL] = {1, {C_AUTO_CANCEL}},
    [JOB_FIELD_MEMORY_MB] = {1, {C_MEMORY_MB}},
    [JOB_FIELD_CONDA_ENV] = {1, {C_CONDA_ENV}},
    [JOB_FIELD_SIGNAL_SPEC] = {1, {C_SIGNAL_SPEC}},
    [JOB_FIELD_BEGIN_TIME] = {1, {C_BEGIN_TIME}},
    [JOB_FIELD_MAX_RETRIES] = {1, {C_MAX_RETRIES}},
    [JOB_FIELD_ATTEMPT] = {1, {C_ATTEMPT}},
    [JOB_FIELD_RETRY_OF] = {1, {C_RETRY_OF}},
    [JOB_FIELD_GROUP_ID] = {1, {C_GROUP_ID}},
    [JOB_FIELD_ARRAY_TASK] = {1, {C_ARRAY_TASK}},
    /* max_concurrent: the live group's, not stored with the job: n 0 */
    [JOB_FIELD_UMASK] = {1, {C_UMASK}},
    [JOB_FIELD_MIG_PROFILE] = {1, {C_MIG_PROFILE}},
    [JOB_FIELD_MIG_COUNT] = {1, {C_MIG_COUNT}},
    [JOB_FIELD_MIG_DEVICES] = {1, {C_MIG_UUIDS}},
    [JOB_FIELD_PROJECT] = {1, {C_PROJECT}},
    [JOB_FIELD_NICE] = {1, {C_NICE}},
    [JOB_FIELD_NOTIFY_EMAIL] = {1, {C_NOTIFY_EMAIL}},
    [JOB_FIELD_NOTIFY_ON] = {1, {C_NOTIFY_ON}},
    [JOB_FIELD_AUTO_CLOSE] = {1, {C_AUTO_CLOSE}},
    /* Not stored (a plan of the running daemon): a job read from the store has none. */
    [JOB_FIELD_EXPECTED_START] = {1, {C_ID}},
    /* Computed for active jobs (in memory); a stored job has none. */
    [JOB_FIELD_EFFECTIVE_PRIORITY] = {1, {C_PRIORITY}},
    [JOB_FIELD_PTY] = {1, {C_PTY}},
    [JOB_FIELD_SLURM_ID] = {1, {C_SLURM_ID}},
    [JOB_FIELD_LOG_LOST_BYTES] = {1, {C_LOG_LOST_BYTES}},
    [JOB_FIELD_STRAY] = {1, {C_STRAY}},
    [JOB_FIELD_CPUS_PER_GPU] = {1, {C_CPUS_PER_GPU}},
    [JOB_FIELD_CPUS] = {1, {C_CPUS}},
    [JOB_FIELD_CPUS_FAR] = {1, {C_CPUS_FAR}},
    [JOB_FIELD_FAILURE_CLASS] = {1, {C_FAILURE_CLASS}},
    [JOB_FIELD_FAILURE_LINE] = {1, {C_FAILURE_LINE}},
};

/* The columns q->fields need (id and state always), or all light ones; returns n. */
static size_t list_columns(const struct store_query *q, int cols[C_LIGHT_COUNT])
{
    bool want[C_LIGHT_COUNT] = {[C_ID] = true, [C_STATE] = true};
    bool all = !q->fields;
    for (int f = 0; f < JOB_FIELD_COUNT && !all; f++) {
        if (!q->fields[f])
            continue;
        if (field_cols[f].n == 0)
            all = true;
        for (int i = 0; i < field_cols[f].n; i++)
            want[field_cols[f].c[i]] = true;
    }
    size_t n = 0;
    for (int c = 0; c < C_LIGHT_COUNT; c++)
        if (all || want[c])
            cols[n++] = c;
    return n;
}

/* Builds the listing query for q; *now_param tells whether the sort expression takes the
 * current time. Returns -1 with the error set for a bad query. */
static int build_list_sql(struct store *s, const struct store_query *q, bool reverse,
                          const int *cols, size_t ncols, struct strbuf *sb, bool *now_param,
                          bool count)
{
    if ((unsigned)q->sort >= JOB_SORT_COUNT) {
        store_set_err(s, "listing jobs: invalid sort key %d", (int)q->sort);
        return -1;
    }
    const char *expr = sort_sql[q->sort];
    *now_param = expr && strchr(expr, '?') != NULL;

    strbuf_adds(sb, count ? "SELECT COUNT(*)" : "SELECT ");
    for (size_t i = 0; i < ncols && !count; i++) {
        if (i)
            strbuf_addc(sb, ',');
        strbuf_adds(sb, store_columns[cols[i]].name);
    }
    strbuf_adds(sb, " FROM jobs");
    const char *glue = " WHERE ";
    if (q->states && q->n_states) {
        bool all_active = true;
        strbuf_addf(sb, "%sstate IN (", glue);
        for (size_t i = 0; i < q->n_states; i++) {
            if ((unsigned)q->states[i] >= JOB_STATE_COUNT) {
                store_set_err(s, "listing jobs: invalid state %d", (int)q->states[i]);
                return -1;
            }
            all_active = all_active && job_state_is_active(q->states[i]);
            strbuf_adds(sb, i ? ",?" : "?");
        }
        strbuf_adds(sb, ")");
        /* A constant copy of the partial index's condition, so the planner may use it
         * (it cannot know what the parameters will hold). */
        if (all_active)
            strbuf_adds(sb, " AND " STORE_ACTIVE);
        glue = " AND ";
    }
    if (q->running_cancelling_only) {
        strbuf_addf(sb, "%s(state != %d OR end_request = %d)", glue, (int)JOB_RUNNING,
                    (int)JOB_END_CANCEL);
        glue = " AND ";
    }
    if (q->ids && q->n_ids) {
        /* One parameter whatever the number of ids: a JSON array. */
        strbuf_addf(sb, "%sid IN (SELECT value FROM json_each(?))", glue);
        glue = " AND ";
    }
    if (q->user) {
        strbuf_addf(sb, "%suser = ?", glue);
        glue = " AND ";
    }
    if (q->projects) { /* one parameter: a JSON array */
        strbuf_addf(sb, "%sproject IN (SELECT value FROM json_each(?))", glue);
        glue = " AND ";
    }
    if (q->since > 0) {
        strbuf_addf(sb, "%ssubmit_time >= ?", glue);
        glue = " AND ";
    }
    if (count) {
        *now_param = false;
        return 0;
    }
    /* Ties are broken by id in the same direction, so descending is exactly ascending
     * reversed. */
    const char *dir = q->descending != reverse ? " DESC" : "";
    strbuf_adds(sb, " ORDER BY ");
    if (expr)
        strbuf_addf(sb, "%s%s, ", expr, dir);
    strbuf_addf(sb, "id%s", dir);
    if (q->limit != 0)
        strbuf_adds(sb, " LIMIT ?");
    return 0;
}

/* store_list's statement for q, its parameters bound (count: COUNT(*) of the matches,
 * no order or limit); *reverse: the rows come in the opposite order. NULL on error. */
static sqlite3_stmt *list_statement(struct store *s, const struct store_query *q, bool count,
                                    const int *cols, size_t ncols, bool *reverse_out)
{
    /* limit < 0 (the last N): read the first N in the opposite order, call back reversed. */
    bool reverse = q->limit < 0;
    int64_t limit = q->limit == INT64_MIN ? INT64_MAX : (q->limit < 0 ? -q->limit : q->limit);
    struct strbuf sb;
    strbuf_init(&sb);
    bool now_param = false;
    *reverse_out = reverse;
    if (build_list_sql(s, q, reverse, cols, ncols, &sb, &now_param, count) < 0) {
        strbuf_free(&sb);
        return NULL;
    }
    sqlite3_stmt *st;
    /* Per call: SQLite caches nothing across prepares, but preparing is ~20 us. */
    if (sqlite3_prepare_v2(s->db, sb.buf, -1, &st, NULL) != SQLITE_OK) {
        store_db_err(s, "preparing the job listing");
        strbuf_free(&sb);
        return NULL;
    }

    int p = 1, rc = SQLITE_OK;
    if (q->states && q->n_states) {
        for (size_t i = 0; i < q->n_states && rc == SQLITE_OK; i++)
            rc = sqlite3_bind_int(st, p++, (int)q->states[i]);
    }
    if (q->ids && q->n_ids && rc == SQLITE_OK) {
        strbuf_reset(&sb);
        strbuf_addc(&sb, '[');
        for (size_t i = 0; i < q->n_ids; i++)
            strbuf_addf(&sb, "%s%lld", i ? "," : "", (long long)q->ids[i]);
        strbuf_addc(&sb, ']');
        rc = sqlite3_bind_text(st, p++, sb.buf, (int)sb.len, SQLITE_TRANSIENT);
    }
    if (q->user && rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, p++, q->user, -1, SQLITE_STATIC);
    if (q->projects && rc == SQLITE_OK) {
        json_t *list = json_array();
        char *copy = xstrdup(q->projects), *save = NULL;
        for (char *n = strtok_r(copy, ",", &save); n; n = strtok_r(NULL, ",", &save))
            json_array_append_new(list, json_string(n));
        free(copy);
        rc = sqlite3_bind_text(st, p++, json_dumps(list, JSON_COMPACT), -1, free);
        json_decref(list);
    }
    if (q->since > 0 && rc == SQLITE_OK)
        rc = sqlite3_bind_double(st, p++, q->since);
    if (now_param && rc == SQLITE_OK)
        rc = sqlite3_bind_double(st, p++, now_wall());
    if (q->limit != 0 && !count && rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, p++, limit);
    if (rc != SQLITE_OK) {
        store_db_err(s, "binding the job listing");
        sqlite3_finalize(st);
        strbuf_free(&sb);
        return NULL;
    }
    strbuf_free(&sb); /* bound as SQLITE_TRANSIENT copies */
    return st;
}

int store_count(struct store *s, const struct store_query *q, int64_t *total)
{
    bool reverse;
    sqlite3_stmt *st = list_statement(s, q, true, NULL, 0, &reverse);
    if (!st)
        return -1;
    int rc = sqlite3_step(st);
    *total = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    int ret = rc == SQLITE_ROW ? 0 : store_db_err(s, "counting jobs");
    sqlite3_finalize(st);
    return ret;
}

int store_list(struct store *s, const struct store_query *q, store_job_cb cb, void *arg)
{
    static const struct store_query everything;
    if (!q)
        q = &everything;
    int cols[C_LIGHT_COUNT];
    size_t ncols = list_columns(q, cols);
    bool reverse;
    sqlite3_stmt *st = list_statement(s, q, false, cols, ncols, &reverse);
    if (!st)
        return -1;
    int rc;

    /* Rows go to the callback as they are read; the statement is this call's own, so a
     * callback that calls into the store does no harm (but should not change jobs). */
    struct job_vec jv = {0};
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct job *j = xmalloc(sizeof(*j));
        store_read_columns(st, cols, ncols, j);
        if (reverse)
            job_vec_push(&jv, j);
        else
            cb(j, arg);
    }
    int ret = 0;
    if (rc != SQLITE_DONE) {
        ret = store_db_err(s, "listing jobs");
        job_vec_free(&jv);
    } else {
        for (size_t i = jv.n; i-- > 0;)
            cb(jv.v[i], arg);
        free(jv.v);
    }
    sqlite3_finalize(st);
    return ret;
}

int store_count_states(struct store *s, int64_t counts[JOB_STATE_COUNT])
{
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        counts[i] = 0;
    sqlite3_stmt *st = s->st_count;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int state = sqlite3_column_int(st, 0);
        if (state >= 0 && state < JOB_STATE_COUNT)
            counts[state] = sqlite3_column_int64(st, 1);
    }
    int ret = rc == SQLITE_DONE ? 0 : store_db_err(s, "counting jobs");
    store_finish(st);
    for (int i = 0; i < JOB_STATE_COUNT; i++)
        counts[i] += s->inserted[i]; /* not in job_counts before the commit */
    return ret;
}

/* ---- settings ---- */

int store_get_setting(struct store *s, const char *key, char **value)
{
    *value = NULL;
    sqlite3_stmt *st = s->st_setting_get;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    int ret;
    if (rc == SQLITE_ROW) {
        *value = store_col_str(st, 0);
        ret = *value ? 0 : 1;
    } else if (rc == SQLITE_DONE) {
        ret = 1;
    } else {
        ret = store_db_err(s, "reading a setting");
    }
    store_finish(st);
    return ret;
}

/* A NULL value removes the key. */
int store_set_setting(struct store *s, const char *key, const char *value)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st = value ? s->st_setting_set : s->st_setting_del;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (value)
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    return store_step_done(s, st, "writing a setting");
}

/* ---- submission groups ---- */

int store_set_group(struct store *s, int64_t id, int64_t max_concurrent)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO job_groups(id, max_concurrent) VALUES (?1, ?2)"
                           " ON CONFLICT(id) DO UPDATE SET max_concurrent=excluded.max_concurrent",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to record a group");
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, max_concurrent);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "recording a group");
    return 0;
}

int store_load_groups(struct store *s, store_group_cb cb, void *arg)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, max_concurrent FROM job_groups WHERE id IN"
                           " (SELECT group_id FROM jobs WHERE " STORE_ACTIVE ") ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, "preparing to load groups");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), arg);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "loading groups");
    return 0;
}

/* ---- history retention ---- */

int store_keep_parse(const char *text, int64_t *count, int64_t *age_secs, char **err)
{
    *count = *age_secs = -1;
    if (!text || !*text)
        return 0;
    char *end;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (end == text || errno || n < 0 || (text[0] < '0' || text[0] > '9')) {
        *err = xasprintf("daemon.keep_finished: '%s' is not an age (e.g. 90d) or a count "
                         "(e.g. 100000)",
                         text);
        return -1;
    }
    if (!*end) {
        *count = n;
        return 0;
    }
    long long unit = !strcmp(end, "s")   ? 1
                     : !strcmp(end, "m") ? 60
                     : !strcmp(end, "h") ? 3600
                     : !strcmp(end, "d") ? 86400
                                         : 0;
    if (!unit || n > INT64_MAX / unit) {
        *err = xasprintf("daemon.keep_finished: '%s': an age is N followed by s, m, h or d "
                         "(e.g. 90d); a count is a plain number",
                         text);
        return -1;
    }
    *age_secs = n * unit;
    return 0;
}

/* Whether finished job id must stay (store_prune). */
static int prune_keep(struct store *s, sqlite3_stmt *members, sqlite3_stmt *waiting, int64_t id,
                      int64_t group_id)
{
    int keep = 0;
    if (group_id == id) {
        sqlite3_bind_int64(members, 1, id);
        int rc = sqlite3_step(members);
        keep = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
        sqlite3_reset(members);
    }
    if (keep == 0) {
        sqlite3_bind_int64(waiting, 1, id);
        int rc = sqlite3_step(waiting);
        keep = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
        sqlite3_reset(waiting);
    }
    return keep < 0 ? store_db_err(s, "pruning the history") : keep;
}

int64_t store_prune(struct store *s, int64_t keep_count, double end_before, int64_t *cursor,
                    int max_rows)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    /* The members of a group are found from its first job (kept, as it holds the group's
     * payload, while any member is left) through this index, made only when pruning is
     * on: it costs every array task's insert. A large history takes a while, once. */
    if (store_exec(s, "CREATE INDEX IF NOT EXISTS jobs_group ON jobs(group_id) WHERE group_id > 0",
                   "pruning the history: creating its index") < 0)
        return -1;
    int64_t excess = INT64_MAX;
    if (keep_count >= 0) {
        int64_t counts[JOB_STATE_COUNT];
        if (store_count_states(s, counts) < 0)
            return -1;
        int64_t finished = 0;
        for (int i = 0; i < JOB_STATE_COUNT; i++)
            if (job_state_is_terminal((enum job_state)i))
                finished += counts[i];
        excess = finished - keep_count;
        if (excess <= 0) {
            *cursor = 0;
            return 0;
        }
    }
    sqlite3_stmt *scan = NULL, *members = NULL, *waiting = NULL, *del_deps = NULL, *del = NULL;
    int64_t *ids = xmalloc((size_t)max_rows * sizeof(*ids));
    int64_t n_ids = 0, n_read = 0, last = *cursor, deleted = -1;
    if (store_adhoc(s, &scan,
                    "SELECT id, state, end_time, group_id FROM jobs WHERE id > ?1 ORDER BY id "
                    "LIMIT ?2") < 0 ||
        store_adhoc(s, &members, "SELECT 1 FROM jobs WHERE group_id = ?1 AND id <> ?1 LIMIT 1") <
            0 ||
        store_adhoc(s, &waiting,
                    "SELECT 1 FROM job_deps d JOIN jobs j ON j.id = d.job_id WHERE d.dep_id = ?1 "
                    "AND j.state < 3 LIMIT 1") < 0 ||
        store_adhoc(s, &del_deps, "DELETE FROM job_deps WHERE dep_id = ?1") < 0 ||
        store_adhoc(s, &del, "DELETE FROM jobs WHERE id = ?1") < 0)
        goto out;
    sqlite3_bind_int64(scan, 1, *cursor);
    sqlite3_bind_int(scan, 2, max_rows);
    int rc;
    while ((rc = sqlite3_step(scan)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(scan, 0);
        int state = sqlite3_column_int(scan, 1);
        double end = sqlite3_column_double(scan, 2);
        n_read++;
        last = id;
        if (state < 0 || state >= JOB_STATE_COUNT || !job_state_is_terminal((enum job_state)state))
            continue;
        if (end_before > 0 && end >= end_before)
            continue;
        if (n_ids >= excess) {
            n_read = -1; /* stopped short: start from the oldest again next time */
            break;
        }
        int keep = prune_keep(s, members, waiting, id, sqlite3_column_int64(scan, 3));
        if (keep < 0)
            goto out;
        if (!keep)
            ids[n_ids++] = id;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        store_db_err(s, "pruning the history");
        goto out;
    }
    sqlite3_reset(scan);
    if (n_ids && store_begin(s) < 0)
        goto out;
    for (int64_t i = 0; i < n_ids; i++) {
        sqlite3_bind_int64(del_deps, 1, ids[i]);
        sqlite3_bind_int64(del, 1, ids[i]);
        if (store_step_done(s, del_deps, "pruning dependencies") < 0 ||
            store_step_done(s, del, "pruning a job") < 0)
            goto out;
    }
    /* The environments no payload names any more (few rows: one per distinct env). */
    if (n_ids && store_exec(s,
                            "DELETE FROM envs WHERE NOT EXISTS "
                            "(SELECT 1 FROM job_payload WHERE env_id = envs.id)",
                            "pruning environments") < 0)
        goto out;
    *cursor = n_read < max_rows ? 0 : last; /* the end reached, or stopped short */
    deleted = n_ids;
out:
    sqlite3_finalize(scan);
    sqlite3_finalize(members);
    sqlite3_finalize(waiting);
    sqlite3_finalize(del_deps);
    sqlite3_finalize(del);
    free(ids);
    return deleted;
}
