/* store_row: the column table of a job row (store_internal.h): each column's name, how
 * a field of struct job is bound to it and read back from it. One list, so the SQL the
 * store generates and the code that binds and reads cannot drift apart. */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

#include "gpuinfo.h"
#include "parse.h"

const struct store_column store_columns[C_COUNT] = {
#define JOB_FIELD(ID, name, api, store, m, d, flags) [C_##ID] = {name, ((flags)&JOB_MUT) != 0},
#define JOB_COLUMN(ID, name, store, m, flags) [C_##ID] = {name, ((flags)&JOB_MUT) != 0},
#define JOB_PAYLOAD(ID, name, store, m, flags) [C_##ID] = {name, ((flags)&JOB_MUT) != 0},
#include "job_fields.def"
};

/* ---- binding and reading job rows ---- */

char *store_params_text(const json_t *params)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_addc(&sb, '{');
    const char *key;
    json_t *v;
    bool first = true;
    json_object_foreach ((json_t *)params, key, v) {
        if (!json_is_string(v)) {
            strbuf_free(&sb);
            return json_dumps(params, JSON_COMPACT);
        }
        if (!first)
            strbuf_addc(&sb, ',');
        first = false;
        strbuf_add_json_string(&sb, key, JSON_STR_JANSSON);
        strbuf_addc(&sb, ':');
        strbuf_add_json_string(&sb, json_string_value(v), JSON_STR_JANSSON);
    }
    strbuf_addc(&sb, '}');
    return strbuf_detach(&sb);
}

int store_bind_text(sqlite3_stmt *st, int idx, const char *v)
{
    return v ? sqlite3_bind_text(st, idx, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, idx);
}

/* The cases of store_bind_column for the plain kinds of job_fields.def. */
#define BIND_TEXT(ID, m)                                                                           \
    case C_##ID:                                                                                   \
        return store_bind_text(st, i, j->m);
#define BIND_INT(ID, m)                                                                            \
    case C_##ID:                                                                                   \
        return sqlite3_bind_int64(st, i, j->m);
#define BIND_BOOL(ID, m)                                                                           \
    case C_##ID:                                                                                   \
        return sqlite3_bind_int(st, i, j->m);
#define BIND_TIME(ID, m)                                                                           \
    case C_##ID:                                                                                   \
        return sqlite3_bind_double(st, i, j->m);
#define BIND_REAL BIND_TIME
#define BIND_SPECIAL(ID, m)

int store_bind_column(sqlite3_stmt *st, enum col c, const struct job *j, int64_t env_id)
{
    int i = (int)c + 1; /* ?N is column N-1 in every generated statement */
    switch (c) {
#define JOB_FIELD(ID, name, api, store, m, d, flags) BIND_##store(ID, m)
#define JOB_COLUMN(ID, name, store, m, flags) BIND_##store(ID, m)
#define JOB_PAYLOAD(ID, name, store, m, flags) BIND_##store(ID, m)
#include "job_fields.def"
    case C_REASON_CODE:
        return sqlite3_bind_int(st, i, (int)j->reason);
    case C_SLURM_ID:
        return sqlite3_bind_int64(st, i, j->backend_id > 0 ? j->backend_id : 0);
    case C_GPU_IDS:
        if (!j->gpu_mask)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, gpu_mask_format(j->gpu_mask), -1, free);
    case C_DEPENDS_ON:
        if (!j->n_deps)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, job_deps_format(j), -1, free);
    case C_SIGNAL_SPEC:
        if (j->warn_signal <= 0)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(
            st, i, format_signal_spec(j->warn_signal, j->warn_secs, j->warn_main_only), -1, free);
    case C_ENV:
        return sqlite3_bind_null(st, i); /* the text is in envs (C_ENV_ID) */
    case C_PARAMS:
        if (!j->params)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, store_params_text(j->params), -1, free);
    case C_ENV_ID:
        if (env_id <= 0)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_int64(st, i, env_id);
    default:
        break;
    }
    return SQLITE_RANGE;
}

char *store_col_str(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? xstrndup((const char *)t, (size_t)sqlite3_column_bytes(st, i)) : NULL;
}

/* The cases of read_column for the plain kinds of job_fields.def. */
#define READ_TEXT(ID, m)                                                                           \
    case C_##ID:                                                                                   \
        j->m = store_col_str(st, i);                                                               \
        break;
#define READ_INT(ID, m)                                                                            \
    case C_##ID:                                                                                   \
        j->m = (__typeof__(j->m))sqlite3_column_int64(st, i);                                      \
        break;
#define READ_BOOL(ID, m)                                                                           \
    case C_##ID:                                                                                   \
        j->m = sqlite3_column_int(st, i) != 0;                                                     \
        break;
#define READ_TIME(ID, m)                                                                           \
    case C_##ID:                                                                                   \
        j->m = sqlite3_column_double(st, i);                                                       \
        break;
#define READ_REAL READ_TIME
#define READ_SPECIAL(ID, m)

/* Reads result column i (table column c) into j. */
static void read_column(sqlite3_stmt *st, enum col c, int i, struct job *j)
{
    switch (c) {
#define JOB_FIELD(ID, name, api, store, m, d, flags) READ_##store(ID, m)
#define JOB_COLUMN(ID, name, store, m, flags) READ_##store(ID, m)
#define JOB_PAYLOAD(ID, name, store, m, flags) READ_##store(ID, m)
#include "job_fields.def"
    case C_REASON_CODE: {
        int r = sqlite3_column_int(st, i);
        j->reason = r > 0 && r < JOB_REASON_COUNT ? (enum job_reason)r : JOB_REASON_NONE;
        break;
    }
    case C_SLURM_ID:
        j->backend_id = sqlite3_column_int64(st, i);
        break;
    case C_GPU_IDS:
        j->gpu_mask = gpu_mask_parse((const char *)sqlite3_column_text(st, i));
        break;
    case C_DEPENDS_ON:
        job_deps_parse(j, (const char *)sqlite3_column_text(st, i));
        break;
    case C_SIGNAL_SPEC:
        job_set_signal_spec(j, (const char *)sqlite3_column_text(st, i));
        break;
    default: /* env and params: parsed by store_read_job; env_id: env reads the text */
        break;
    }
}

/* Fills j (initialised here) from the current row of a statement that selects
 * columns 0..C_LIGHT_COUNT-1, or every column with payload. */
int store_read_job(struct store *s, sqlite3_stmt *st, struct job *j, bool payload)
{
    job_init(j);
    int n = payload ? C_COUNT : C_LIGHT_COUNT;
    for (int c = 0; c < n; c++)
        read_column(st, (enum col)c, c, j);
    if (payload) {
        const char *env = (const char *)sqlite3_column_text(st, C_ENV);
        if (env) {
            json_error_t jerr;
            j->env = json_loads(env, JSON_REJECT_DUPLICATES, &jerr);
            if (!json_is_object(j->env)) {
                store_set_err(s, "job %lld: stored env is not a JSON object: %s", (long long)j->id,
                              jerr.text);
                job_clear(j);
                return -1;
            }
        }
        const char *params = (const char *)sqlite3_column_text(st, C_PARAMS);
        if (params) {
            json_error_t jerr;
            j->params = json_loads(params, JSON_REJECT_DUPLICATES, &jerr);
            if (!json_is_object(j->params)) {
                store_set_err(s, "job %lld: stored params are not a JSON object: %s",
                              (long long)j->id, jerr.text);
                job_clear(j);
                return -1;
            }
        }
    }
    return 0;
}

void store_read_columns(sqlite3_stmt *st, const int *cols, size_t n, struct job *j)
{
    job_init(j);
    for (size_t i = 0; i < n; i++)
        read_column(st, (enum col)cols[i], (int)i, j);
}

/* "id,name,...": what a SELECT reads for the first n columns. */
void store_add_column_list(struct strbuf *sb, int n)
{
    for (int c = 0; c < n; c++) {
        if (c)
            strbuf_addc(sb, ',');
        /* Rows written before schema 11 hold env's text; later ones name an envs row. */
        strbuf_adds(sb, c == C_ENV ? "COALESCE(env,(SELECT text FROM envs WHERE envs.id=env_id))"
                                   : store_columns[c].name);
    }
}
