/* store_row: the column table of a job row (store_internal.h): each column's name, how
 * a field of struct job is bound to it and read back from it. One list, so the SQL the
 * store generates and the code that binds and reads cannot drift apart. */
#include "store_internal.h"

#include <stdlib.h>
#include <string.h>

#include "gpuinfo.h"
#include "parse.h"

/* mutable: written by store_update_job (the payload and the submitter's identity are
 * fixed at submission). */
const struct store_column store_columns[C_COUNT] = {
    [C_ID] = {"id", false},
    [C_NAME] = {"name", true},
    [C_USER] = {"user", false},
    [C_UID] = {"uid", false},
    [C_GID] = {"gid", false},
    [C_STATE] = {"state", true},
    [C_PRIORITY] = {"priority", true},
    [C_TIME_LIMIT] = {"time_limit", true},
    [C_COMMAND] = {"command", false},
    [C_SCRIPT_PATH] = {"script_path", false},
    [C_WORKDIR] = {"workdir", false},
    [C_SUBMIT_TIME] = {"submit_time", false},
    [C_START_TIME] = {"start_time", true},
    [C_END_TIME] = {"end_time", true},
    [C_EXIT_CODE] = {"exit_code", true},
    [C_SIGNAL] = {"signal", true},
    [C_OOM] = {"oom", true},
    [C_REASON] = {"reason", true}, /* the reason's detail (LaunchFailed: ...) */
    [C_END_REQUEST] = {"end_request", true},
    [C_SHIM_PID] = {"shim_pid", true},
    [C_SHIM_START] = {"shim_start", true},
    [C_MAX_RSS_KB] = {"max_rss_kb", true},
    [C_GPUS] = {"gpus", true},
    [C_GPU_IDS] = {"gpu_ids", true},
    [C_MEMORY_MB] = {"memory_mb", true},
    [C_GPU_MEMORY_MB] = {"gpu_memory_mb", true},
    [C_SHARED] = {"shared", true},
    [C_GROUP_ID] = {"group_id", true},
    [C_ARRAY_TASK] = {"array_task", true},
    [C_MAX_RETRIES] = {"max_retries", true},
    [C_ATTEMPT] = {"attempt", true},
    [C_RETRY_OF] = {"retry_of", true},
    [C_GPUS_PER_TASK] = {"gpus_per_task", true},
    [C_DEPENDS_ON] = {"depends_on", true},
    [C_DEPENDS_ANY] = {"depends_any", true},
    [C_AUTO_CANCEL] = {"auto_cancel", true},
    [C_CONDA_ENV] = {"conda_env", true},
    [C_SIGNAL_SPEC] = {"signal_spec", true},
    [C_BEGIN_TIME] = {"begin_time", true},
    [C_REASON_CODE] = {"reason_code", true},
    [C_REASON_JOB] = {"reason_job", true},
    [C_UMASK] = {"umask", true}, /* -1: none given (the job runs with 0077) */
    [C_MIG_PROFILE] = {"mig_profile", true},
    [C_MIG_COUNT] = {"mig_count", true},
    [C_MIG_UUIDS] = {"mig_uuids", true}, /* the instances held while running */
    [C_PROJECT] = {"project", true},
    [C_NICE] = {"nice", true},
    [C_NOTIFY_EMAIL] = {"notify_email", true},
    [C_NOTIFY_ON] = {"notify_on", true}, /* event names joined by ',' */
    [C_AUTO_CLOSE] = {"auto_close", true},
    [C_REQUEUE] = {"requeue", true},
    [C_REQUEUE_COUNT] = {"requeue_count", true},
    [C_PREEMPTED_BY] = {"preempted_by", true},
    [C_PTY] = {"pty", true},
    [C_SLURM_ID] = {"slurm_id", true},         /* the slurm backend's job id; 0: none */
    [C_SLURM_REASON] = {"slurm_reason", true}, /* why Slurm has not started it */
    [C_SCRIPT] = {"script", false},
    /* Rows written before schema 11 hold the text; later ones name an envs row. */
    [C_ENV] = {"env", false, "COALESCE(env,(SELECT text FROM envs WHERE envs.id=env_id))"},
    [C_PARAMS] = {"params", false},
    [C_COMMAND_TEMPLATE] = {"command_template", false},
    [C_SCRIPT_TEMPLATE] = {"script_template", false},
    [C_NAME_TEMPLATE] = {"name_template", false},
    [C_ENV_ID] = {"env_id", false},
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

int store_bind_column(sqlite3_stmt *st, enum col c, const struct job *j, int64_t env_id)
{
    int i = (int)c + 1; /* ?N is column N-1 in every generated statement */
    switch (c) {
    case C_ID:
        return sqlite3_bind_int64(st, i, j->id);
    case C_NAME:
        return store_bind_text(st, i, j->name);
    case C_USER:
        return store_bind_text(st, i, j->user);
    case C_UID:
        return sqlite3_bind_int64(st, i, j->uid);
    case C_GID:
        return sqlite3_bind_int64(st, i, j->gid);
    case C_STATE:
        return sqlite3_bind_int(st, i, (int)j->state);
    case C_PRIORITY:
        return sqlite3_bind_int(st, i, j->priority);
    case C_TIME_LIMIT:
        return sqlite3_bind_int64(st, i, j->time_limit);
    case C_COMMAND:
        return store_bind_text(st, i, j->command);
    case C_SCRIPT_PATH:
        return store_bind_text(st, i, j->script_path);
    case C_WORKDIR:
        return store_bind_text(st, i, j->workdir);
    case C_SUBMIT_TIME:
        return sqlite3_bind_double(st, i, j->submit_time);
    case C_START_TIME:
        return sqlite3_bind_double(st, i, j->start_time);
    case C_END_TIME:
        return sqlite3_bind_double(st, i, j->end_time);
    case C_EXIT_CODE:
        return sqlite3_bind_int(st, i, j->exit_code);
    case C_SIGNAL:
        return sqlite3_bind_int(st, i, j->signal);
    case C_OOM:
        return sqlite3_bind_int(st, i, j->oom);
    case C_REASON:
        return store_bind_text(st, i, j->reason_detail);
    case C_REASON_CODE:
        return sqlite3_bind_int(st, i, (int)j->reason);
    case C_REASON_JOB:
        return sqlite3_bind_int64(st, i, j->reason_job);
    case C_UMASK:
        return sqlite3_bind_int(st, i, j->umask);
    case C_MIG_PROFILE:
        return store_bind_text(st, i, j->mig_profile);
    case C_MIG_COUNT:
        return sqlite3_bind_int(st, i, j->mig_count);
    case C_MIG_UUIDS:
        return store_bind_text(st, i, j->mig_uuids);
    case C_PROJECT:
        return store_bind_text(st, i, j->project);
    case C_NICE:
        return sqlite3_bind_int(st, i, j->nice);
    case C_NOTIFY_EMAIL:
        return store_bind_text(st, i, j->notify_email);
    case C_NOTIFY_ON:
        return store_bind_text(st, i, j->notify_on);
    case C_AUTO_CLOSE:
        return sqlite3_bind_int(st, i, j->auto_close);
    case C_REQUEUE:
        return sqlite3_bind_int(st, i, j->requeue);
    case C_REQUEUE_COUNT:
        return sqlite3_bind_int(st, i, j->requeue_count);
    case C_PREEMPTED_BY:
        return sqlite3_bind_int64(st, i, j->preempted_by);
    case C_PTY:
        return sqlite3_bind_int(st, i, j->pty);
    case C_SLURM_ID:
        return sqlite3_bind_int64(st, i, j->backend_id > 0 ? j->backend_id : 0);
    case C_SLURM_REASON:
        return store_bind_text(st, i, j->backend_reason);
    case C_END_REQUEST:
        return sqlite3_bind_int(st, i, (int)j->end_request);
    case C_SHIM_PID:
        return sqlite3_bind_int64(st, i, j->shim_pid);
    case C_SHIM_START:
        return sqlite3_bind_int64(st, i, j->shim_start);
    case C_MAX_RSS_KB:
        return sqlite3_bind_int64(st, i, j->max_rss_kb);
    case C_GPUS:
        return sqlite3_bind_int(st, i, j->gpus);
    case C_GPU_IDS:
        if (!j->gpu_mask)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, gpu_mask_format(j->gpu_mask), -1, free);
    case C_MEMORY_MB:
        return sqlite3_bind_int64(st, i, j->memory_mb);
    case C_GPU_MEMORY_MB:
        return sqlite3_bind_int64(st, i, j->gpu_memory_mb);
    case C_SHARED:
        return sqlite3_bind_int(st, i, j->shared);
    case C_GROUP_ID:
        return sqlite3_bind_int64(st, i, j->group_id);
    case C_ARRAY_TASK:
        return sqlite3_bind_int64(st, i, j->array_task);
    case C_MAX_RETRIES:
        return sqlite3_bind_int(st, i, j->max_retries);
    case C_ATTEMPT:
        return sqlite3_bind_int(st, i, j->attempt);
    case C_RETRY_OF:
        return sqlite3_bind_int64(st, i, j->retry_of);
    case C_GPUS_PER_TASK:
        return sqlite3_bind_int(st, i, j->gpus_per_task);
    case C_DEPENDS_ON:
        if (!j->n_deps)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, job_deps_format(j), -1, free);
    case C_DEPENDS_ANY:
        return sqlite3_bind_int(st, i, j->deps_any);
    case C_AUTO_CANCEL:
        return sqlite3_bind_int(st, i, j->auto_cancel);
    case C_CONDA_ENV:
        return store_bind_text(st, i, j->conda_env);
    case C_BEGIN_TIME:
        return sqlite3_bind_double(st, i, j->begin_time);
    case C_SIGNAL_SPEC:
        if (j->warn_signal <= 0)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(
            st, i, format_signal_spec(j->warn_signal, j->warn_secs, j->warn_main_only), -1, free);
    case C_SCRIPT:
        return store_bind_text(st, i, j->script);
    case C_ENV:
        return sqlite3_bind_null(st, i); /* the text is in envs (C_ENV_ID) */
    case C_PARAMS:
        if (!j->params)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_text(st, i, store_params_text(j->params), -1, free);
    case C_COMMAND_TEMPLATE:
        return store_bind_text(st, i, j->command_template);
    case C_SCRIPT_TEMPLATE:
        return store_bind_text(st, i, j->script_template);
    case C_NAME_TEMPLATE:
        return store_bind_text(st, i, j->name_template);
    case C_ENV_ID:
        if (env_id <= 0)
            return sqlite3_bind_null(st, i);
        return sqlite3_bind_int64(st, i, env_id);
    case C_COUNT:
        break;
    }
    return SQLITE_RANGE;
}

char *store_col_str(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? xstrndup((const char *)t, (size_t)sqlite3_column_bytes(st, i)) : NULL;
}

/* Reads result column i (table column c) into j. */
static void read_column(sqlite3_stmt *st, enum col c, int i, struct job *j)
{
    switch (c) {
    case C_ID:
        j->id = sqlite3_column_int64(st, i);
        break;
    case C_NAME:
        j->name = store_col_str(st, i);
        break;
    case C_USER:
        j->user = store_col_str(st, i);
        break;
    case C_UID:
        j->uid = (uint32_t)sqlite3_column_int64(st, i);
        break;
    case C_GID:
        j->gid = (uint32_t)sqlite3_column_int64(st, i);
        break;
    case C_STATE:
        j->state = (enum job_state)sqlite3_column_int(st, i);
        break;
    case C_PRIORITY:
        j->priority = sqlite3_column_int(st, i);
        break;
    case C_TIME_LIMIT:
        j->time_limit = sqlite3_column_int64(st, i);
        break;
    case C_COMMAND:
        j->command = store_col_str(st, i);
        break;
    case C_SCRIPT_PATH:
        j->script_path = store_col_str(st, i);
        break;
    case C_WORKDIR:
        j->workdir = store_col_str(st, i);
        break;
    case C_SUBMIT_TIME:
        j->submit_time = sqlite3_column_double(st, i);
        break;
    case C_START_TIME:
        j->start_time = sqlite3_column_double(st, i);
        break;
    case C_END_TIME:
        j->end_time = sqlite3_column_double(st, i);
        break;
    case C_EXIT_CODE:
        j->exit_code = sqlite3_column_int(st, i);
        break;
    case C_SIGNAL:
        j->signal = sqlite3_column_int(st, i);
        break;
    case C_OOM:
        j->oom = sqlite3_column_int(st, i) != 0;
        break;
    case C_REASON:
        j->reason_detail = store_col_str(st, i);
        break;
    case C_REASON_CODE: {
        int r = sqlite3_column_int(st, i);
        j->reason = r > 0 && r < JOB_REASON_COUNT ? (enum job_reason)r : JOB_REASON_NONE;
        break;
    }
    case C_REASON_JOB:
        j->reason_job = sqlite3_column_int64(st, i);
        break;
    case C_UMASK:
        j->umask = sqlite3_column_int(st, i);
        break;
    case C_MIG_PROFILE:
        j->mig_profile = store_col_str(st, i);
        break;
    case C_MIG_COUNT:
        j->mig_count = sqlite3_column_int(st, i);
        break;
    case C_MIG_UUIDS:
        j->mig_uuids = store_col_str(st, i);
        break;
    case C_PROJECT:
        j->project = store_col_str(st, i);
        break;
    case C_NICE:
        j->nice = sqlite3_column_int(st, i);
        break;
    case C_NOTIFY_EMAIL:
        j->notify_email = store_col_str(st, i);
        break;
    case C_NOTIFY_ON:
        j->notify_on = store_col_str(st, i);
        break;
    case C_AUTO_CLOSE:
        j->auto_close = sqlite3_column_int(st, i) != 0;
        break;
    case C_REQUEUE:
        j->requeue = sqlite3_column_int(st, i) != 0;
        break;
    case C_REQUEUE_COUNT:
        j->requeue_count = sqlite3_column_int(st, i);
        break;
    case C_PREEMPTED_BY:
        j->preempted_by = sqlite3_column_int64(st, i);
        break;
    case C_PTY:
        j->pty = sqlite3_column_int(st, i) != 0;
        break;
    case C_SLURM_ID:
        j->backend_id = sqlite3_column_int64(st, i);
        break;
    case C_SLURM_REASON:
        j->backend_reason = store_col_str(st, i);
        break;
    case C_END_REQUEST:
        j->end_request = (enum job_end_request)sqlite3_column_int(st, i);
        break;
    case C_SHIM_PID:
        j->shim_pid = sqlite3_column_int64(st, i);
        break;
    case C_SHIM_START:
        j->shim_start = sqlite3_column_int64(st, i);
        break;
    case C_MAX_RSS_KB:
        j->max_rss_kb = sqlite3_column_int64(st, i);
        break;
    case C_GPUS:
        j->gpus = sqlite3_column_int(st, i);
        break;
    case C_GPU_IDS:
        j->gpu_mask = gpu_mask_parse((const char *)sqlite3_column_text(st, i));
        break;
    case C_MEMORY_MB:
        j->memory_mb = sqlite3_column_int64(st, i);
        break;
    case C_GPU_MEMORY_MB:
        j->gpu_memory_mb = sqlite3_column_int64(st, i);
        break;
    case C_SHARED:
        j->shared = sqlite3_column_int(st, i) != 0;
        break;
    case C_GROUP_ID:
        j->group_id = sqlite3_column_int64(st, i);
        break;
    case C_ARRAY_TASK:
        j->array_task = sqlite3_column_int64(st, i);
        break;
    case C_MAX_RETRIES:
        j->max_retries = sqlite3_column_int(st, i);
        break;
    case C_ATTEMPT:
        j->attempt = sqlite3_column_int(st, i);
        break;
    case C_RETRY_OF:
        j->retry_of = sqlite3_column_int64(st, i);
        break;
    case C_GPUS_PER_TASK:
        j->gpus_per_task = sqlite3_column_int(st, i);
        break;
    case C_DEPENDS_ON:
        job_deps_parse(j, (const char *)sqlite3_column_text(st, i));
        break;
    case C_DEPENDS_ANY:
        j->deps_any = sqlite3_column_int(st, i) != 0;
        break;
    case C_AUTO_CANCEL:
        j->auto_cancel = sqlite3_column_int(st, i) != 0;
        break;
    case C_CONDA_ENV:
        j->conda_env = store_col_str(st, i);
        break;
    case C_SIGNAL_SPEC:
        job_set_signal_spec(j, (const char *)sqlite3_column_text(st, i));
        break;
    case C_BEGIN_TIME:
        j->begin_time = sqlite3_column_double(st, i);
        break;
    case C_SCRIPT:
        j->script = store_col_str(st, i);
        break;
    case C_ENV:
    case C_PARAMS:
        break; /* parsed by store_read_job */
    case C_COMMAND_TEMPLATE:
        j->command_template = store_col_str(st, i);
        break;
    case C_SCRIPT_TEMPLATE:
        j->script_template = store_col_str(st, i);
        break;
    case C_NAME_TEMPLATE:
        j->name_template = store_col_str(st, i);
        break;
    case C_ENV_ID: /* C_ENV reads the text */
    case C_COUNT:
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
        strbuf_adds(sb,
                    store_columns[c].read_as ? store_columns[c].read_as : store_columns[c].name);
    }
}
