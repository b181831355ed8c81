/* store_job: the statements the store keeps for its life, and one job's rows: inserting a
 * job with its payload and dependencies, updating it (all of it or its state), reading
 * it back (the payload its group's first job holds for it), its state and dependents,
 * gjob update's changes and its retry lineage.
 *
 * Every column is listed once in store_row.c (store_columns), in table order, payload
 * last; the SQL of the hot statements (insert, update, get, load) is generated from
 * that list with numbered parameters ?N = column N, so the bind and read code cannot
 * drift. Listings and the small tables are store_list.c. */
#include "store_internal.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* What a job's move between PD, H and an end (CA) changes (store_update_state): its state,
 * reason, end and begin times, and the GPUs it gives back when queued again
 * (store_same_state compares the same). */
static const int state_columns[] = {C_STATE,      C_END_TIME,   C_REASON,  C_REASON_CODE,
                                    C_REASON_JOB, C_BEGIN_TIME, C_GPU_IDS, C_MIG_UUIDS};
_Static_assert(sizeof(state_columns) / sizeof(state_columns[0]) == 8,
               "store_same_state compares the state columns");

static int prepare_sb(struct store *s, sqlite3_stmt **st, struct strbuf *sb)
{
    int rc = store_prepare(s, st, sb->buf);
    strbuf_reset(sb);
    return rc;
}

int store_prepare_statements(struct store *s)
{
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = 0;

    strbuf_adds(&sb, "INSERT INTO jobs(");
    store_add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, ") VALUES (");
    for (int c = 0; c < C_LIGHT_COUNT; c++)
        strbuf_addf(&sb, "%s?%d", c ? "," : "", c + 1);
    strbuf_adds(&sb, ")");
    rc |= prepare_sb(s, &s->st_insert, &sb);

    /* OR REPLACE: a payload row left by a job deleted with foreign keys off must not
     * block the new job. */
    strbuf_addf(&sb, "INSERT OR REPLACE INTO job_payload(job_id");
    for (int c = C_LIGHT_COUNT; c < C_COUNT; c++)
        strbuf_addf(&sb, ",%s", store_columns[c].name);
    strbuf_addf(&sb, ") VALUES (?%d", C_ID + 1);
    for (int c = C_LIGHT_COUNT; c < C_COUNT; c++)
        strbuf_addf(&sb, ",?%d", c + 1);
    strbuf_adds(&sb, ")");
    rc |= prepare_sb(s, &s->st_insert_payload, &sb);

    strbuf_adds(&sb, "UPDATE jobs SET ");
    bool first = true;
    for (int c = 0; c < C_COUNT; c++) {
        if (!store_columns[c].mutable)
            continue;
        strbuf_addf(&sb, "%s%s=?%d", first ? "" : ",", store_columns[c].name, c + 1);
        first = false;
    }
    strbuf_addf(&sb, " WHERE id=?%d", C_ID + 1);
    rc |= prepare_sb(s, &s->st_update, &sb);

    first = true;
    strbuf_adds(&sb, "UPDATE jobs SET ");
    for (size_t i = 0; i < sizeof(state_columns) / sizeof(state_columns[0]); i++) {
        int c = state_columns[i];
        strbuf_addf(&sb, "%s%s=?%d", first ? "" : ",", store_columns[c].name, c + 1);
        first = false;
    }
    /* A run of consecutive ids at once (store_update_state's last): ?(C_COUNT + 1). */
    strbuf_addf(&sb, " WHERE id BETWEEN ?%d AND ?%d", C_ID + 1, C_COUNT + 1);
    rc |= prepare_sb(s, &s->st_update_state, &sb);

    strbuf_adds(&sb, "SELECT ");
    store_add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, " FROM jobs WHERE id=?1");
    rc |= prepare_sb(s, &s->st_get, &sb);

    strbuf_adds(&sb, "SELECT ");
    store_add_column_list(&sb, C_COUNT);
    strbuf_adds(&sb, " FROM jobs LEFT JOIN job_payload ON job_id=id WHERE id=?1");
    rc |= prepare_sb(s, &s->st_get_full, &sb);

    strbuf_adds(&sb, "SELECT ");
    store_add_column_list(&sb, C_LIGHT_COUNT);
    strbuf_adds(&sb, " FROM jobs WHERE " STORE_ACTIVE " ORDER BY id");
    rc |= prepare_sb(s, &s->st_load_active, &sb);
    strbuf_free(&sb);

    rc |= store_prepare(s, &s->st_begin, "BEGIN IMMEDIATE");
    rc |= store_prepare(s, &s->st_commit, "COMMIT");
    rc |= store_prepare(s, &s->st_rollback, "ROLLBACK");
    rc |= store_prepare(s, &s->st_count, "SELECT state, n FROM job_counts");
    rc |= store_prepare(s, &s->st_count_add,
                        "INSERT INTO job_counts(state, n) VALUES (?1, ?2)"
                        " ON CONFLICT(state) DO UPDATE SET n = n + excluded.n");
    rc |= store_prepare(s, &s->st_dep_insert,
                        "INSERT OR IGNORE INTO job_deps(job_id, dep_id, kind) VALUES (?1, ?2, ?3)");
    rc |= store_prepare(s, &s->st_dependents,
                        "SELECT DISTINCT job_id FROM job_deps WHERE dep_id=?1 ORDER BY job_id");
    rc |= store_prepare(s, &s->st_state, "SELECT state FROM jobs WHERE id=?1");
    rc |= store_prepare(s, &s->st_meta_next,
                        "UPDATE meta SET value=?1 WHERE key='next_job_id' AND value<?1");
    rc |= store_prepare(s, &s->st_setting_get, "SELECT value FROM settings WHERE key=?1");
    rc |= store_prepare(s, &s->st_setting_set,
                        "INSERT INTO settings(key, value) VALUES (?1, ?2)"
                        " ON CONFLICT(key) DO UPDATE SET value=excluded.value");
    rc |= store_prepare(s, &s->st_setting_del, "DELETE FROM settings WHERE key=?1");
    rc |= store_prepare(s, &s->st_env_find, "SELECT id FROM envs WHERE hash=?1 AND text=?2");
    rc |= store_prepare(s, &s->st_env_insert, "INSERT INTO envs(hash, text) VALUES (?1, ?2)");
    return rc ? -1 : 0;
}

/* ---- jobs ---- */

int64_t store_next_job_id(struct store *s)
{
    return s->next_id;
}

/* Binds columns [from, to) of j and runs st. */
static int insert_columns(struct store *s, sqlite3_stmt *st, const struct job *j, int64_t env_id,
                          int from, int to)
{
    int rc = sqlite3_bind_int64(st, C_ID + 1, j->id);
    for (int c = from; c < to && rc == SQLITE_OK; c++)
        rc = store_bind_column(st, (enum col)c, j, env_id);
    if (rc != SQLITE_OK) {
        store_finish(st);
        return store_db_err(s, "binding a new job");
    }
    /* The context is written only on failure (a 100,000-job sweep inserts 200,000 rows),
     * and the bindings are not cleared: every parameter the statement uses is bound
     * again before its next step (3% of a sweep's instructions, callgrind). */
    int ret = 0;
    if (sqlite3_step(st) != SQLITE_DONE) {
        char context[64];
        snprintf(context, sizeof(context), "inserting job %lld", (long long)j->id);
        ret = store_db_err(s, context);
    }
    sqlite3_reset(st);
    return ret;
}

/* 64-bit FNV-1a: the envs row's hash (its index finds the candidates, the text decides). */
static int64_t env_hash(const char *text)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return (int64_t)h;
}

/* The envs row of j's environment, made if there is none yet: *id (0 without an
 * environment). Each distinct environment is stored once, so a history of jobs
 * submitted from the same shell holds its 2-5 KB once rather than per job. */
static int env_ref(struct store *s, const struct job *j, int64_t *id)
{
    *id = 0;
    if (!j->env)
        return 0;
    char *text = json_dumps(j->env, JSON_COMPACT);
    if (!text)
        abort(); /* out of memory: what xmalloc does too */
    int64_t hash = env_hash(text);
    sqlite3_bind_int64(s->st_env_find, 1, hash);
    sqlite3_bind_text(s->st_env_find, 2, text, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s->st_env_find);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(s->st_env_find, 0);
    store_finish(s->st_env_find);
    int ret = 0;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        ret = store_db_err(s, "looking up an environment");
    } else if (!*id) {
        sqlite3_bind_int64(s->st_env_insert, 1, hash);
        sqlite3_bind_text(s->st_env_insert, 2, text, -1, SQLITE_STATIC);
        ret = store_step_done(s, s->st_env_insert, "storing an environment");
        *id = sqlite3_last_insert_rowid(s->db);
    }
    free(text);
    return ret;
}

/* j's payload row (script, environment, a sweep's params and templates), replacing any. */
static int insert_payload(struct store *s, const struct job *j)
{
    int64_t env_id;
    if (env_ref(s, j, &env_id) < 0)
        return -1;
    return insert_columns(s, s->st_insert_payload, j, env_id, C_LIGHT_COUNT, C_COUNT);
}

/* Records j's dependencies (job_deps). */
static int insert_deps(struct store *s, const struct job *j)
{
    for (size_t i = 0; i < j->n_deps; i++) {
        sqlite3_bind_int64(s->st_dep_insert, 1, j->id);
        sqlite3_bind_int64(s->st_dep_insert, 2, j->deps[i].id);
        sqlite3_bind_text(s->st_dep_insert, 3, job_dep_kind_name(j->deps[i].kind), -1,
                          SQLITE_STATIC);
        if (store_step_done(s, s->st_dep_insert, "recording a dependency") < 0)
            return -1;
    }
    return 0;
}

static int insert_row(struct store *s, const struct job *j)
{
    if (insert_columns(s, s->st_insert, j, 0, 0, C_LIGHT_COUNT) < 0)
        return -1;
    if (j->state >= 0 && j->state < JOB_STATE_COUNT)
        s->inserted[j->state]++;
    if ((j->script || j->env || j->params) && insert_payload(s, j) < 0)
        return -1;
    if (insert_deps(s, j) < 0)
        return -1;
    if (j->id >= s->next_id) {
        s->next_id = j->id + 1;
        s->next_id_unsaved = true;
    }
    return 0;
}

int store_save_counts(struct store *s)
{
    for (int i = 0; i < JOB_STATE_COUNT; i++) {
        if (!s->inserted[i])
            continue;
        sqlite3_bind_int(s->st_count_add, 1, i);
        sqlite3_bind_int64(s->st_count_add, 2, s->inserted[i]);
        if (store_step_done(s, s->st_count_add, "counting the new jobs") < 0)
            return -1;
        s->inserted[i] = 0; /* in the transaction now, whatever becomes of it */
    }
    return 0;
}

int store_save_next_id(struct store *s)
{
    if (!s->next_id_unsaved)
        return 0;
    sqlite3_bind_int64(s->st_meta_next, 1, s->next_id);
    if (store_step_done(s, s->st_meta_next, "recording the next job id") < 0)
        return -1;
    s->next_id_unsaved = false;
    return 0;
}

/* Whether two payload texts are the same (both absent counts as the same). */
static bool same_text(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* j as it is written beside its group's leader: the parts of the payload that are the
 * leader's are left out, and read_group_payload reads them from the leader. Tasks of an
 * array or a sweep share the leader's environment object (so a pointer comparison
 * decides, not a comparison of kilobytes of JSON per task). */
static struct job payload_beside(const struct job *j, const struct job *leader)
{
    struct job view = *j; /* shallow: only fields are cleared, nothing freed */
    if (leader->env && j->env == leader->env)
        view.env = NULL;
    if (j->script && same_text(j->script, leader->script))
        view.script = NULL;
    if (same_text(j->script_template, leader->script_template))
        view.script_template = NULL;
    if (same_text(j->command_template, leader->command_template))
        view.command_template = NULL;
    return view;
}

int store_insert_job(struct store *s, const struct job *j, const struct job *leader)
{
    struct job view;
    if (leader && j->group_id == leader->id && j->id != leader->id) {
        view = payload_beside(j, leader);
        j = &view;
    }
    if (j->id <= 0) {
        store_set_err(s, "inserting a job: invalid id %lld", (long long)j->id);
        return -1;
    }
    if (store_refuse_if_lost(s) < 0)
        return -1;
    /* The rows and next_job_id change together. */
    bool own = !store_in_transaction(s);
    if (own && store_begin(s) < 0)
        return -1;
    int ret = insert_row(s, j);
    if (own) {
        if (ret == 0)
            ret = store_commit(s);
        else
            store_rollback(s);
    }
    return ret;
}

/* Runs an UPDATE of job j (and, up to last, the jobs after it) whose columns were bound
 * (rc: how binding went). */
static int store_step_update(struct store *s, sqlite3_stmt *st, int rc, const struct job *j,
                             int64_t last)
{
    if (rc != SQLITE_OK) {
        store_finish(st);
        return store_db_err(s, "binding a job update");
    }
    char context[64];
    snprintf(context, sizeof(context), "updating job %lld", (long long)j->id);
    if (store_step_done(s, st, context) < 0)
        return -1;
    if (sqlite3_changes64(s->db) != last - j->id + 1) {
        if (last == j->id)
            store_set_err(s, "updating job %lld: no such job", (long long)j->id);
        else
            store_set_err(s, "updating jobs %lld-%lld: some are missing", (long long)j->id,
                          (long long)last);
        return -1;
    }
    return 0;
}

int store_update_job(struct store *s, const struct job *j)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st = s->st_update;
    int rc = SQLITE_OK;
    for (int c = 0; c < C_COUNT && rc == SQLITE_OK; c++) {
        if (c == C_ID || store_columns[c].mutable)
            rc = store_bind_column(st, (enum col)c, j, 0);
    }
    return store_step_update(s, st, rc, j, j->id);
}

int store_update_state(struct store *s, const struct job *j, int64_t last)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    if (last < j->id) {
        store_set_err(s, "updating jobs %lld-%lld: not a range", (long long)j->id, (long long)last);
        return -1;
    }
    sqlite3_stmt *st = s->st_update_state;
    int rc = store_bind_column(st, C_ID, j, 0);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, C_COUNT + 1, last);
    for (size_t i = 0; i < sizeof(state_columns) / sizeof(state_columns[0]) && rc == SQLITE_OK; i++)
        rc = store_bind_column(st, (enum col)state_columns[i], j, 0);
    return store_step_update(s, st, rc, j, last);
}

bool store_same_state(const struct job *a, const struct job *b)
{
    return a->state == b->state && a->end_time == b->end_time && a->reason == b->reason &&
           a->reason_job == b->reason_job && a->begin_time == b->begin_time &&
           a->gpu_mask == b->gpu_mask && same_text(a->reason_detail, b->reason_detail) &&
           same_text(a->mig_uuids, b->mig_uuids);
}

/* The tasks of an array or a sweep usually share the first job's environment (and
 * script, and a sweep's templates): stored once, with that job (the group's id), and
 * read from there. */
static int read_group_payload(struct store *s, struct job *j)
{
    struct job leader;
    int rc = store_get_job(s, j->group_id, &leader, true);
    if (rc != 0) {
        if (rc > 0)
            store_set_err(s, "job %lld: the payload of its group %lld is missing", (long long)j->id,
                          (long long)j->group_id);
        return -1;
    }
    if (!j->env)
        j->env = json_incref(leader.env);
    if (!j->script && !j->command && leader.script)
        j->script = xstrdup(leader.script);
    if (j->params && !j->script_template && !j->command_template && leader.script_template)
        j->script_template = xstrdup(leader.script_template);
    if (j->params && j->command && !j->command_template && leader.command_template)
        j->command_template = xstrdup(leader.command_template);
    if (j->params && !j->name_template && leader.name_template)
        j->name_template = xstrdup(leader.name_template);
    job_clear(&leader);
    return 0;
}

int store_get_job(struct store *s, int64_t id, struct job *out, bool with_payload)
{
    sqlite3_stmt *st = with_payload ? s->st_get_full : s->st_get;
    job_init(out);
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int ret;
    if (rc == SQLITE_ROW)
        ret = store_read_job(s, st, out, with_payload);
    else if (rc == SQLITE_DONE)
        ret = 1;
    else
        ret = store_db_err(s, "reading a job");
    store_finish(st);
    if (ret == 0 && with_payload && out->group_id && out->group_id != out->id &&
        (!out->env || (!out->script && !out->command) ||
         (out->params && !out->script_template && !out->command_template)) &&
        read_group_payload(s, out) < 0) {
        job_clear(out);
        return -1;
    }
    return ret;
}

int store_job_state(struct store *s, int64_t id, enum job_state *out)
{
    sqlite3_stmt *st = s->st_state;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int ret = 0;
    if (rc == SQLITE_ROW)
        *out = (enum job_state)sqlite3_column_int(st, 0);
    else if (rc == SQLITE_DONE)
        ret = 1;
    else
        ret = store_db_err(s, "reading a job's state");
    store_finish(st);
    return ret;
}

int store_dependents(struct store *s, int64_t id, int64_t **ids, size_t *n)
{
    sqlite3_stmt *st = s->st_dependents;
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    sqlite3_bind_int64(st, 1, id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            *ids = xrealloc(*ids, cap * sizeof(**ids));
        }
        (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    int ret = rc == SQLITE_DONE ? 0 : store_db_err(s, "reading dependents");
    store_finish(st);
    return ret;
}

/* ---- changes of a queued job (gjob update) and retry lineage ---- */

int store_replace_deps(struct store *s, const struct job *j)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (store_adhoc(s, &st, "DELETE FROM job_deps WHERE job_id=?1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, j->id);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "replacing dependencies");
    if (insert_deps(s, j) < 0)
        return -1;
    return store_update_job(s, j);
}

int store_update_what(struct store *s, const struct job *j, bool payload)
{
    if (store_refuse_if_lost(s) < 0)
        return -1;
    sqlite3_stmt *st;
    if (store_adhoc(s, &st, "UPDATE jobs SET command=?2, script_path=?3, workdir=?4 WHERE id=?1") <
        0)
        return -1;
    sqlite3_bind_int64(st, 1, j->id);
    store_bind_text(st, 2, j->command);
    store_bind_text(st, 3, j->script_path);
    store_bind_text(st, 4, j->workdir);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return store_db_err(s, "updating a job's command");
    if (!payload)
        return 0;
    return insert_payload(s, j);
}

int store_retried_as(struct store *s, int64_t id, int64_t *out)
{
    sqlite3_stmt *st;
    *out = 0;
    if (store_adhoc(s, &st,
                    "SELECT id FROM jobs WHERE retry_of=?1 AND retry_of > 0 "
                    "ORDER BY id LIMIT 1") < 0)
        return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return store_db_err(s, "reading a job's next attempt");
    return 0;
}
