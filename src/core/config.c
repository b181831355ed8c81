/* config: gflow's settings (see config.h). Every known setting is one line of
 * config_keys below: its dotted name, type, field, lower bound or allowed words, and
 * default. The TOML file, the GFLOW_<SECTION>__<KEY> environment variables and
 * config_set all go through that table, so a setting is checked the same way whatever
 * its source, and anything not in the table is an error naming where it came from. */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fairshare.h"
#include "parse.h"
#include "timefmt.h"
#include "timeplan.h"
#include "toml.h"
#include "util.h"

#define CONFIG_ENV_PREFIX "GFLOW_"

enum config_kind {
    CONFIG_STRING,
    CONFIG_INT,
    CONFIG_BOOL, /* TOML true/false; in text form exactly "true" or "false" */
};

struct config_key {
    const char *name; /* "section.key" */
    enum config_kind kind;
    size_t offset;              /* of the field in struct gflow_config */
    int64_t min;                /* CONFIG_INT: the smallest allowed value */
    const char *const *choices; /* CONFIG_STRING: the allowed words; NULL = any string */
    const char *def;            /* the default in text form; NULL = unset */
    /* CONFIG_STRING: checks a value (0, or -1 with *err); NULL = any. */
    int (*check)(const char *s, char **err);
    /* CONFIG_STRING: also taken as a TOML list, kept joined by ',' (gflow writes lists:
     * daemon.gpus = [0, 2], projects.known_projects = ["a", "b"]). */
    enum { LIST_NONE, LIST_INTS, LIST_STRINGS } list;
    /* CONFIG_STRING: where its parsed form goes (struct gflow_parsed_settings): PARSED_SECS,
     * the int64_t seconds of a duration; PARSED_CHOICE, the int index of the choice;
     * PARSED_TIME_PLAN, a struct time_plan;
     * PARSED_NONE: only the text is kept. */
    enum { PARSED_NONE, PARSED_SECS, PARSED_CHOICE, PARSED_TIME_PLAN } parsed_kind;
    size_t parsed;
};

static const char *const config_log_levels[] = {"error", "warn", "info", "debug", NULL};

#define CONFIG_INT_KEY(name_, field, min_, def_)                                                   \
    {                                                                                              \
        .name = name_, .kind = CONFIG_INT, .offset = offsetof(struct gflow_config, field),         \
        .min = min_, .def = def_                                                                   \
    }
#define CONFIG_STRING_KEY(name_, field, choices_, def_)                                            \
    {                                                                                              \
        .name = name_, .kind = CONFIG_STRING, .offset = offsetof(struct gflow_config, field),      \
        .choices = choices_, .def = def_                                                           \
    }
#define CONFIG_BOOL_KEY(name_, field, def_)                                                        \
    {                                                                                              \
        .name = name_, .kind = CONFIG_BOOL, .offset = offsetof(struct gflow_config, field),        \
        .def = def_                                                                                \
    }
/* A string that parse_duration reads ("24h"), also kept as seconds in parsed.secs. */
#define CONFIG_DURATION_KEY(name_, field, def_, secs)                                              \
    {                                                                                              \
        .name = name_, .kind = CONFIG_STRING, .offset = offsetof(struct gflow_config, field),      \
        .def = def_, .check = config_duration, .parsed_kind = PARSED_SECS,                         \
        .parsed = offsetof(struct gflow_config, parsed.secs)                                       \
    }
/* One of choices, also kept as its index in parsed.index. */
#define CONFIG_CHOICE_KEY(name_, field, choices_, def_, index)                                     \
    {                                                                                              \
        .name = name_, .kind = CONFIG_STRING, .offset = offsetof(struct gflow_config, field),      \
        .choices = choices_, .def = def_, .parsed_kind = PARSED_CHOICE,                            \
        .parsed = offsetof(struct gflow_config, parsed.index)                                      \
    }
/* A string that a TOML list may also give (list_: LIST_INTS or LIST_STRINGS). */
#define CONFIG_LIST_KEY(name_, field, def_, list_, check_)                                         \
    {                                                                                              \
        .name = name_, .kind = CONFIG_STRING, .offset = offsetof(struct gflow_config, field),      \
        .def = def_, .list = list_, .check = check_                                                \
    }
/* A list of shares ("alice=2,bob=1"). */
#define CONFIG_SHARES_KEY(name_, field)                                                            \
    {                                                                                              \
        .name = name_, .kind = CONFIG_STRING, .offset = offsetof(struct gflow_config, field),      \
        .def = "", .check = config_shares                                                          \
    }

static int config_duration(const char *s, char **err)
{
    int64_t secs;
    return parse_duration(s, &secs, err);
}

static int config_time_plan(const char *s, char **err)
{
    struct time_plan p;
    return time_plan_parse(s, &p, err);
}

static int config_shares(const char *s, char **err)
{
    return fairshare_set_shares(NULL, FAIRSHARE_USER, s, err);
}

/* projects.known_projects: names as gbatch --project takes them, joined by ','. */
static int config_projects(const char *s, char **err)
{
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n > 64 || p[0] == ' ' || p[n - 1] == ' ') {
            *err = xasprintf("'%.*s' is not a project name (1-64 characters, no blanks around "
                             "it, no ',')",
                             (int)n, p);
            return -1;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

static const char *const config_executor_types[] = {"process", "tmux", NULL};

/* The top-level `timezone` (gflow's): the zone the commands show and read times in. */
static int config_zone(const char *s, char **err)
{
    return timefmt_zone_check(s, err);
}

static const char *const config_gpu_strategies[] = {"topology", "sequential", "random", NULL};
static const char *const config_gpu_id_formats[] = {"auto", "index", "uuid", NULL};
static const char *const config_container[] = {"auto", "yes", "no", NULL};
static const char *const config_backfill_untimed[] = {"planned", "outside", NULL};
static const char *const config_backend_kinds[] = {"local", "slurm", NULL};
static const char *const config_reservations_who[] = {"admins", "users", NULL};
static const char *const config_stray_modes[] = {"block", "kill", "warn", NULL};

static const struct config_key config_keys[] = {
    /* A top-level key (no section), as in gflow's file. */
    {.name = "timezone",
     .kind = CONFIG_STRING,
     .offset = offsetof(struct gflow_config, timezone),
     .check = config_zone},
    CONFIG_STRING_KEY("daemon.socket_path", socket_path, NULL, NULL),
    CONFIG_STRING_KEY("daemon.data_dir", data_dir, NULL, NULL),
    CONFIG_INT_KEY("daemon.max_running_jobs", max_running_jobs, 0, "0"),
    CONFIG_INT_KEY("daemon.kill_grace_secs", kill_grace_secs, 0, "10"),
    /* The per-request body limit predates [limits]: both names set it. */
    CONFIG_INT_KEY("daemon.max_request_bytes", limits.max_request_bytes, 1, "8388608"),
    CONFIG_STRING_KEY("daemon.admin_group", admin_group, NULL, NULL),
    CONFIG_STRING_KEY("daemon.log_level", log_level, config_log_levels, "info"),
    CONFIG_LIST_KEY("daemon.gpus", gpus, "all", LIST_INTS, NULL),
    CONFIG_STRING_KEY("daemon.nvml_library", nvml_library, NULL, NULL),
    CONFIG_CHOICE_KEY("daemon.gpu_allocation_strategy", gpu_allocation_strategy,
                      config_gpu_strategies, "topology", gpu_allocation_strategy),
    /* How long a job without --time is planned to run (backfill's plan): a percentile of
     * recent run times or a duration (timeplan.h). */
    {.name = "daemon.default_time_plan",
     .kind = CONFIG_STRING,
     .offset = offsetof(struct gflow_config, default_time_plan),
     .def = "p95",
     .check = config_time_plan,
     .parsed_kind = PARSED_TIME_PLAN,
     .parsed = offsetof(struct gflow_config, parsed.default_time_plan)},
    CONFIG_INT_KEY("daemon.gpu_poll_interval_secs", gpu_poll_interval_secs, 1, "10"),
    CONFIG_INT_KEY("daemon.gpu_samples_max", gpu_samples_max, 1, "60480"),
    CONFIG_STRING_KEY("daemon.gpu_id_format", gpu_id_format, config_gpu_id_formats, "auto"),
    CONFIG_STRING_KEY("daemon.container", container, config_container, "auto"),
    CONFIG_CHOICE_KEY("daemon.stray", stray, config_stray_modes, "block", stray),
    CONFIG_STRING_KEY("daemon.host_proc", host_proc, NULL, NULL),
    CONFIG_INT_KEY("daemon.nvml_timeout_secs", nvml_timeout_secs, 1, "10"),
    CONFIG_INT_KEY("daemon.nvml_retry_max_secs", nvml_retry_max_secs, 1, "60"),
    CONFIG_INT_KEY("daemon.unowned_memory_mib", unowned_memory_mib, 0, "1024"),
    CONFIG_BOOL_KEY("daemon.constrain_devices", constrain_devices, "false"),
    CONFIG_BOOL_KEY("daemon.cpu_affinity", cpu_affinity, "false"),
    CONFIG_STRING_KEY("daemon.log_dir", log_dir, NULL, NULL),
    CONFIG_INT_KEY("daemon.max_log_bytes", max_log_bytes, 0, "1073741824"),
    CONFIG_INT_KEY("daemon.log_keep_on_full_disk", log_keep_on_full_disk, 0, "4194304"),
    CONFIG_STRING_KEY("daemon.keep_finished", keep_finished, NULL, NULL),
    CONFIG_STRING_KEY("daemon.host", host, NULL, NULL),
    CONFIG_INT_KEY("daemon.port", port, 0, "0"),
    CONFIG_BOOL_KEY("daemon.fair_share.enabled", fair_share_enabled, "false"),
    CONFIG_INT_KEY("daemon.fair_share.half_life_secs", fair_share_half_life_secs, 1, "604800"),
    CONFIG_LIST_KEY("projects.known_projects", known_projects, "", LIST_STRINGS, config_projects),
    CONFIG_BOOL_KEY("projects.require_project", require_project, "false"),
    CONFIG_STRING_KEY("executor.type", executor_type, config_executor_types, "process"),
    CONFIG_BOOL_KEY("scheduler.backfill", scheduler_backfill, "true"),
    CONFIG_INT_KEY("scheduler.backfill_depth", scheduler_backfill_depth, 1, "1"),
    CONFIG_DURATION_KEY("scheduler.default_time_limit", scheduler_default_time_limit, "24h",
                        default_time_limit_secs),
    CONFIG_CHOICE_KEY("scheduler.backfill_untimed", scheduler_backfill_untimed,
                      config_backfill_untimed, "planned", backfill_untimed),
    CONFIG_BOOL_KEY("scheduler.preempt", scheduler_preempt, "false"),
    CONFIG_INT_KEY("scheduler.preempt_priority_gap", scheduler_preempt_priority_gap, 1, "10"),
    CONFIG_DURATION_KEY("scheduler.preempt_grace", scheduler_preempt_grace, "30s",
                        preempt_grace_secs),
    CONFIG_INT_KEY("scheduler.priority_weight_priority", scheduler_priority_weight_priority, 0,
                   "255"),
    CONFIG_INT_KEY("scheduler.priority_weight_fairshare", scheduler_priority_weight_fairshare, 0,
                   "0"),
    CONFIG_INT_KEY("scheduler.priority_weight_age", scheduler_priority_weight_age, 0, "0"),
    CONFIG_DURATION_KEY("scheduler.priority_max_age", scheduler_priority_max_age, "7d",
                        priority_max_age_secs),
    CONFIG_DURATION_KEY("scheduler.fairshare_half_life", scheduler_fairshare_half_life, "7d",
                        fairshare_half_life_secs),
    CONFIG_SHARES_KEY("scheduler.fairshare_user_shares", scheduler_fairshare_user_shares),
    CONFIG_SHARES_KEY("scheduler.fairshare_project_shares", scheduler_fairshare_project_shares),
    CONFIG_STRING_KEY("metrics.listen", metrics_listen, NULL, NULL),
    CONFIG_CHOICE_KEY("reservations.who", reservations_who, config_reservations_who, "admins",
                      reservations_who),
    CONFIG_INT_KEY("reservations.max_gpus", reservations_max_gpus, 1, "2"),
    CONFIG_DURATION_KEY("reservations.max_duration", reservations_max_duration, "24h",
                        reservations_max_duration_secs),
    CONFIG_DURATION_KEY("reservations.max_ahead", reservations_max_ahead, "7d",
                        reservations_max_ahead_secs),
    CONFIG_INT_KEY("reservations.max_per_user", reservations_max_per_user, 1, "4"),
    CONFIG_CHOICE_KEY("backend.kind", backend_kind, config_backend_kinds, "local", backend),
    CONFIG_STRING_KEY("backend.partition", backend_partition, NULL, ""),
    CONFIG_STRING_KEY("backend.account", backend_account, NULL, ""),
    CONFIG_STRING_KEY("backend.qos", backend_qos, NULL, ""),
    CONFIG_STRING_KEY("backend.sbatch_args", backend_sbatch_args, NULL, ""),
    CONFIG_INT_KEY("backend.poll_secs", backend_poll_secs, 1, "5"),
    /* [hooks]: run by the job's shim (src/shim/hook.c). */
    CONFIG_STRING_KEY("hooks.pre", hooks_pre, NULL, ""),
    CONFIG_STRING_KEY("hooks.post", hooks_post, NULL, ""),
    CONFIG_DURATION_KEY("hooks.timeout", hooks_timeout, "60s", hooks_timeout_secs),
    /* [triage]: its classes ([[triage.classes]]) are read by triage_config_from_toml. */
    CONFIG_INT_KEY("triage.tail_bytes", triage_tail_bytes, 1024, "65536"),
    CONFIG_INT_KEY("triage.timeout_secs", triage_timeout_secs, 1, "10"),
    CONFIG_INT_KEY("limits.max_request_bytes", limits.max_request_bytes, 1, "8388608"),
    CONFIG_INT_KEY("limits.max_body_bytes_in_flight", limits.max_body_bytes_in_flight, 1,
                   "67108864"),
    CONFIG_INT_KEY("limits.max_body_bytes_per_user", limits.max_body_bytes_per_user, 1, "8388608"),
    CONFIG_INT_KEY("limits.min_body_bytes_per_sec", limits.min_body_bytes_per_sec, 0, "1024"),
    CONFIG_INT_KEY("limits.body_rate_window_secs", limits.body_rate_window_secs, 1, "10"),
    CONFIG_INT_KEY("limits.max_connections", limits.max_connections, 1, "4000"),
    CONFIG_INT_KEY("limits.max_connections_per_user", limits.max_connections_per_user, 1, "64"),
    CONFIG_INT_KEY("limits.idle_timeout_secs", limits.idle_timeout_secs, 1, "10"),
    CONFIG_INT_KEY("limits.max_jobs_per_request", limits.max_jobs_per_request, 1, "100000"),
    CONFIG_INT_KEY("limits.max_active_jobs_per_user", limits.max_active_jobs_per_user, 1, "500000"),
    CONFIG_INT_KEY("limits.max_ids_per_request", limits.max_ids_per_request, 1, "1000000"),
    CONFIG_INT_KEY("limits.max_log_scan_bytes", limits.max_log_scan_bytes, 4096, "16777216"),
    CONFIG_INT_KEY("limits.max_event_clients", limits.max_event_clients, 1, "256"),
    CONFIG_INT_KEY("limits.max_event_clients_per_user", limits.max_event_clients_per_user, 1, "16"),
    CONFIG_INT_KEY("limits.event_buffer_bytes", limits.event_buffer_bytes, 4096, "262144"),
};

#define CONFIG_NKEYS (sizeof(config_keys) / sizeof(config_keys[0]))

/* ---- the key table --------------------------------------------------------------- */

static const struct config_key *config_find_key(const char *dotted)
{
    for (size_t i = 0; i < CONFIG_NKEYS; i++)
        if (strcmp(config_keys[i].name, dotted) == 0)
            return &config_keys[i];
    return NULL;
}

/* True if some known key lives in [section]. */
static bool config_section_known(const char *section)
{
    size_t n = strlen(section);
    for (size_t i = 0; i < CONFIG_NKEYS; i++)
        if (strncmp(config_keys[i].name, section, n) == 0 && config_keys[i].name[n] == '.')
            return true;
    return false;
}

static int64_t *config_int_field(struct gflow_config *c, const struct config_key *k)
{
    return (int64_t *)((char *)c + k->offset);
}

static bool *config_bool_field(struct gflow_config *c, const struct config_key *k)
{
    return (bool *)((char *)c + k->offset);
}

static char **config_string_field(struct gflow_config *c, const struct config_key *k)
{
    return (char **)((char *)c + k->offset);
}

/* "an integer >= 0", "one of error, warn, info, debug", ... for error messages. */
static char *config_describe(const struct config_key *k)
{
    if (k->kind == CONFIG_BOOL)
        return xstrdup("true or false");
    if (k->kind == CONFIG_INT) {
        if (k->min == 1)
            return xstrdup("an integer > 0");
        return xasprintf("an integer >= %lld", (long long)k->min);
    }
    if (!k->choices)
        return xstrdup("a string");
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_adds(&sb, "one of ");
    for (size_t i = 0; k->choices[i]; i++)
        strbuf_addf(&sb, "%s%s", i ? ", " : "", k->choices[i]);
    return strbuf_detach(&sb);
}

/* "daemon.x must be <description>" */
static char *config_type_error(const struct config_key *k)
{
    char *desc = config_describe(k);
    char *msg = xasprintf("%s must be %s", k->name, desc);
    free(desc);
    return msg;
}

/* ---- storing values -------------------------------------------------------------- */

static int config_store_int(struct gflow_config *c, const struct config_key *k, int64_t v,
                            char **err)
{
    if (v < k->min) {
        *err = config_type_error(k);
        return -1;
    }
    *config_int_field(c, k) = v;
    return 0;
}

static bool config_choice_ok(const struct config_key *k, const char *s)
{
    if (!k->choices)
        return true;
    for (size_t i = 0; k->choices[i]; i++)
        if (strcmp(k->choices[i], s) == 0)
            return true;
    return false;
}

/* The parsed form of a string key's value s (checked already). */
static void config_store_parsed(struct gflow_config *c, const struct config_key *k, const char *s)
{
    char *base = (char *)c + k->parsed;
    if (k->parsed_kind == PARSED_SECS) {
        int64_t secs = 0;
        char *err = NULL;
        parse_duration(s, &secs, &err);
        free(err);
        memcpy(base, &secs, sizeof(secs));
    } else if (k->parsed_kind == PARSED_TIME_PLAN) {
        struct time_plan p = {0, 0};
        char *err = NULL;
        time_plan_parse(s, &p, &err);
        free(err);
        memcpy(base, &p, sizeof(p));
    } else if (k->parsed_kind == PARSED_CHOICE) {
        int i = 0;
        while (strcmp(k->choices[i], s) != 0)
            i++;
        memcpy(base, &i, sizeof(i));
    }
}

static int config_store_string(struct gflow_config *c, const struct config_key *k, const char *s,
                               char **err)
{
    if (!config_choice_ok(k, s)) {
        *err = config_type_error(k);
        return -1;
    }
    char *why = NULL;
    if (k->check && k->check(s, &why) < 0) {
        *err = xasprintf("%s: %s", k->name, why);
        free(why);
        return -1;
    }
    char **field = config_string_field(c, k);
    free(*field);
    *field = xstrdup(s);
    config_store_parsed(c, k, s);
    return 0;
}

/* Strict decimal: an optional '-' and digits only (no spaces, '+' or base prefixes). */
static int config_parse_int(const char *s, int64_t *out)
{
    const char *d = *s == '-' ? s + 1 : s;
    if (!*d || strspn(d, "0123456789") != strlen(d))
        return -1;
    return parse_int64(s, out);
}

/* Sets a key from its text form. On error *err is "NAME must be ..." */
static int config_set_text(struct gflow_config *c, const struct config_key *k, const char *value,
                           char **err)
{
    if (k->kind == CONFIG_STRING)
        return config_store_string(c, k, value, err);
    if (k->kind == CONFIG_BOOL) {
        /* Strict, like TOML itself: no "1", "yes" or "True". */
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0) {
            *err = config_type_error(k);
            return -1;
        }
        *config_bool_field(c, k) = strcmp(value, "true") == 0;
        return 0;
    }
    int64_t v;
    if (config_parse_int(value, &v) < 0) {
        *err = config_type_error(k);
        return -1;
    }
    return config_store_int(c, k, v, err);
}

/* ---- defaults, copies ------------------------------------------------------------ */

void config_init(struct gflow_config *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < CONFIG_NKEYS; i++) {
        char *err = NULL;
        if (config_keys[i].def &&
            config_set_text(c, &config_keys[i], config_keys[i].def, &err) < 0) {
            /* A default that fails its own check is a bug in the table above (and
             * test_config's first test fails on it). */
            abort();
        }
    }
    quota_config_init(&c->quota);
    notify_config_init(&c->notify);
    triage_config_init(&c->triage);
}

static void config_warnings_clear(struct gflow_config *c);

void config_free(struct gflow_config *c)
{
    for (size_t i = 0; i < CONFIG_NKEYS; i++)
        if (config_keys[i].kind == CONFIG_STRING)
            free(*config_string_field(c, &config_keys[i]));
    free(c->source_path);
    free(c->log_dir_relative);
    config_warnings_clear(c);
    quota_config_free(&c->quota);
    notify_config_free(&c->notify);
    triage_config_free(&c->triage);
    memset(c, 0, sizeof(*c));
}

static void config_warnings_clear(struct gflow_config *c)
{
    for (size_t i = 0; i < c->n_warnings; i++)
        free(c->warnings[i]);
    free(c->warnings);
    c->warnings = NULL;
    c->n_warnings = 0;
}

static void config_warn(struct gflow_config *c, char *line)
{
    c->warnings = xrealloc(c->warnings, (c->n_warnings + 1) * sizeof(*c->warnings));
    c->warnings[c->n_warnings++] = line;
}

/* The warnings of the settings as they are now: gflow's keys that we accept but that
 * mean nothing here. */
static void config_warnings_refresh(struct gflow_config *c)
{
    config_warnings_clear(c);
    if (c->executor_type && !strcmp(c->executor_type, "tmux"))
        config_warn(c, xstrdup("executor.type = \"tmux\" (gflow's): jobs here run without "
                               "tmux, each under its own gflow-shim (gjob attach needs "
                               "gbatch --pty); set \"process\" to silence this"));
}

/* A deep copy, so that a file can be applied all or nothing. */
static void config_copy(struct gflow_config *dst, const struct gflow_config *src)
{
    *dst = *src;
    for (size_t i = 0; i < CONFIG_NKEYS; i++) {
        if (config_keys[i].kind != CONFIG_STRING)
            continue;
        char **field = config_string_field(dst, &config_keys[i]);
        if (*field)
            *field = xstrdup(*field);
    }
    if (dst->source_path)
        dst->source_path = xstrdup(dst->source_path);
    if (dst->log_dir_relative)
        dst->log_dir_relative = xstrdup(dst->log_dir_relative);
    quota_config_copy(&dst->quota, &src->quota);
    notify_config_copy(&dst->notify, &src->notify);
    triage_config_copy(&dst->triage, &src->triage);
    dst->warnings = NULL;
    dst->n_warnings = 0;
    for (size_t i = 0; i < src->n_warnings; i++)
        config_warn(dst, xstrdup(src->warnings[i]));
}

int config_set(struct gflow_config *c, const char *dotted_key, const char *value, char **err)
{
    const struct config_key *k = config_find_key(dotted_key);
    if (!k) {
        *err = xasprintf("unknown key '%s'", dotted_key);
        return -1;
    }
    char *why = NULL;
    if (config_set_text(c, k, value, &why) < 0) {
        *err = xasprintf("%s (got '%s')", why, value);
        free(why);
        return -1;
    }
    return 0;
}

/* ---- the file -------------------------------------------------------------------- */

/* A table key as a C string, or NULL if it holds a NUL byte (then no key matches). */
static const char *config_toml_key(const struct toml_value *table, size_t i)
{
    size_t len;
    const char *key = toml_table_key(table, i, &len);
    return strlen(key) == len ? key : NULL;
}

/* A TOML list for a list key, joined by ','; NULL with *why if an element is not of the
 * key's kind (or daemon.gpus = [] names no GPU). */
static char *config_join_list(const struct config_key *k, const struct toml_value *v, char **why)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t n = toml_array_len(v);
    for (size_t i = 0; i < n; i++) {
        const struct toml_value *e = toml_array_at(v, i);
        size_t len = 0;
        if (k->list == LIST_INTS && toml_type_of(e) == TOML_INTEGER && toml_integer(e) >= 0) {
            strbuf_addf(&sb, "%s%lld", i ? "," : "", (long long)toml_integer(e));
        } else if (k->list == LIST_STRINGS && toml_type_of(e) == TOML_STRING &&
                   strlen(toml_string(e, &len)) == len && !strchr(toml_string(e, NULL), ',')) {
            strbuf_addf(&sb, "%s%s", i ? "," : "", toml_string(e, NULL));
        } else {
            *why = xasprintf("%s must be a list of %s", k->name,
                             k->list == LIST_INTS ? "GPU indices (e.g. [0, 2]) or a string "
                                                    "like \"0,2-3\" or \"all\""
                                                  : "names without ',' (e.g. [\"a\", \"b\"])");
            strbuf_free(&sb);
            return NULL;
        }
    }
    if (k->list == LIST_INTS && n == 0) {
        *why = xasprintf("%s = [] names no GPU; leave it out (or \"all\") for every GPU", k->name);
        strbuf_free(&sb);
        return NULL;
    }
    return strbuf_detach(&sb);
}

/* One section.key = value from the file. */
static int config_apply_toml(struct gflow_config *c, const char *path, const char *section,
                             const char *key, const struct toml_value *v, char **err)
{
    char *dotted = section ? xasprintf("%s.%s", section, key ? key : "\\u0000")
                           : xstrdup(key ? key : "\\u0000");
    const struct config_key *k = key ? config_find_key(dotted) : NULL;
    char *why = NULL;
    int r = -1;
    if (!k) {
        *err = xasprintf("%s:%d: unknown key '%s'", path, toml_line(v), dotted);
        goto out;
    }
    enum toml_type want = k->kind == CONFIG_INT    ? TOML_INTEGER
                          : k->kind == CONFIG_BOOL ? TOML_BOOL
                                                   : TOML_STRING;
    size_t len = 0;
    if (k->list != LIST_NONE && toml_type_of(v) == TOML_ARRAY) {
        char *joined = config_join_list(k, v, &why);
        if (joined)
            r = config_store_string(c, k, joined, &why);
        free(joined);
    } else if (toml_type_of(v) != want ||
               (want == TOML_STRING && strlen(toml_string(v, &len)) != len))
        why = config_type_error(k);
    else if (want == TOML_BOOL) {
        *config_bool_field(c, k) = toml_bool(v);
        r = 0;
    } else if (want == TOML_INTEGER)
        r = config_store_int(c, k, toml_integer(v), &why);
    else
        r = config_store_string(c, k, toml_string(v, NULL), &why);
    if (r < 0)
        *err = xasprintf("%s:%d: %s", path, toml_line(v), why);
out:
    free(why);
    free(dotted);
    return r;
}

/* The keys of [section] (or of a table inside one: [daemon.fair_share]). */
static int config_apply_table(struct gflow_config *c, const char *path, const char *section,
                              const struct toml_value *t, char **err)
{
    /* gflow's fair-share is on unless its table says otherwise (enabled defaults to
     * true there); ours is off without the table. */
    if (!strcmp(section, "daemon.fair_share"))
        c->fair_share_enabled = true;
    for (size_t j = 0; j < toml_table_len(t); j++) {
        const char *key = config_toml_key(t, j);
        const struct toml_value *v = toml_table_value(t, j);
        if (key && toml_type_of(v) == TOML_TABLE) {
            char *sub = xasprintf("%s.%s", section, key);
            bool known = config_section_known(sub);
            int r = known ? config_apply_table(c, path, sub, v, err) : 0;
            if (!known)
                *err = xasprintf("%s:%d: unknown key '%s'", path, toml_line(v), sub);
            free(sub);
            if (!known || r < 0)
                return -1;
            continue;
        }
        if (!strcmp(section, "triage") && key && !strcmp(key, "classes")) {
            char *why = NULL;
            int line;
            if (triage_config_from_toml(&c->triage, v, &why, &line) < 0) {
                *err = xasprintf("%s:%d: %s", path, line, why);
                free(why);
                return -1;
            }
            continue;
        }
        if (config_apply_toml(c, path, section, key, v, err) < 0)
            return -1;
    }
    return 0;
}

/* A top-level entry that is not a known section: "FILE:LINE: unknown section 'x'". */
static char *config_section_error(const char *path, const char *name, const struct toml_value *t,
                                  bool known)
{
    int line = toml_line(t);
    if (!name)
        name = "\\u0000";
    if (known)
        return xasprintf("%s:%d: '%s' must be a table", path, line, name);
    if (toml_type_of(t) == TOML_TABLE)
        return xasprintf("%s:%d: unknown section '%s'", path, line, name);
    return xasprintf("%s:%d: unknown key '%s'", path, line, name);
}

/* Applies the parsed document: known sections hold known keys, nothing else. */
static int config_apply_tree(struct gflow_config *c, const struct toml_value *root,
                             const char *path, char **err)
{
    for (size_t i = 0; i < toml_table_len(root); i++) {
        const char *section = config_toml_key(root, i);
        const struct toml_value *t = toml_table_value(root, i);
        if (section && strcmp(section, "quota") == 0 && toml_type_of(t) == TOML_TABLE) {
            char *why = NULL;
            int line;
            if (quota_config_from_toml(&c->quota, t, &why, &line) < 0) {
                *err = xasprintf("%s:%d: %s", path, line, why);
                free(why);
                return -1;
            }
            continue;
        }
        if (section && strcmp(section, "notifications") == 0 && toml_type_of(t) == TOML_TABLE) {
            char *why = NULL;
            int line;
            if (notify_config_from_toml(&c->notify, t, &why, &line) < 0) {
                *err = xasprintf("%s:%d: %s", path, line, why);
                free(why);
                return -1;
            }
            continue;
        }
        if (section && !strchr(section, '.') && config_find_key(section) &&
            toml_type_of(t) != TOML_TABLE) { /* a top-level key: timezone */
            if (config_apply_toml(c, path, NULL, section, t, err) < 0)
                return -1;
            continue;
        }
        bool known = section && config_section_known(section);
        if (!known || toml_type_of(t) != TOML_TABLE) {
            *err = config_section_error(path, section, t, known);
            return -1;
        }
        if (config_apply_table(c, path, section, t, err) < 0)
            return -1;
    }
    return 0;
}

int config_load_text(struct gflow_config *c, const char *path, const char *text, size_t len,
                     char **err)
{
    struct toml_error te;
    struct toml_value *root = toml_parse(text, len, &te);
    if (!root) {
        *err = xasprintf("%s:%d:%d: %s", path, te.line, te.column, te.message);
        return -1;
    }
    struct gflow_config next;
    config_copy(&next, c);
    int r = config_apply_tree(&next, root, path, err);
    toml_free(root);
    if (r < 0) {
        config_free(&next);
        return -1;
    }
    free(next.source_path);
    next.source_path = xstrdup(path);
    config_warnings_refresh(&next);
    config_free(c);
    *c = next;
    return 0;
}

/* ---- the environment ------------------------------------------------------------- */

/* "GFLOW_DAEMON__KILL_GRACE_SECS" -> "daemon.kill_grace_secs"; NULL if the name does not
 * have the GFLOW_<SECTION>__<KEY> shape. Caller frees. */
static char *config_env_key(const char *name, size_t len)
{
    size_t plen = strlen(CONFIG_ENV_PREFIX);
    if (len < plen || memcmp(name, CONFIG_ENV_PREFIX, plen) != 0)
        return NULL;
    const char *rest = name + plen;
    const char *sep = memmem(rest, len - plen, "__", 2);
    if (!sep) { /* GFLOW_TIMEZONE: a top-level key, as gflow reads its environment */
        char *top = xstrndup(rest, len - plen);
        for (char *s = top; *s; s++)
            if (*s >= 'A' && *s <= 'Z')
                *s = (char)(*s - 'A' + 'a');
        const struct config_key *k = config_find_key(top);
        if (k && !strchr(k->name, '.'))
            return top;
        free(top);
        return NULL;
    }
    char *dotted = xstrndup(rest, len - plen);
    /* Every "__" is a level, as in gflow: GFLOW_DAEMON__FAIR_SHARE__ENABLED. */
    for (char *at = strstr(dotted, "__"); at; at = strstr(at + 1, "__")) {
        *at = '.';
        memmove(at + 1, at + 2, strlen(at + 2) + 1);
    }
    for (char *s = dotted; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
    return dotted;
}

/* One NAME=VALUE entry of the environment. */
static int config_apply_env(struct gflow_config *c, const char *entry, char **err)
{
    const char *eq = strchr(entry, '=');
    if (!eq)
        return 0;
    int name_len = (int)(eq - entry);
    char *dotted = config_env_key(entry, (size_t)name_len);
    if (!dotted)
        return 0;
    char *why = NULL;
    int r = config_set(c, dotted, eq + 1, &why);
    if (r < 0)
        *err = xasprintf("environment %.*s: %s", name_len, entry, why);
    free(why);
    free(dotted);
    return r;
}

int config_load_env(struct gflow_config *c, char *const *envp, char **err)
{
    for (char *const *e = envp; e && *e; e++)
        if (config_apply_env(c, *e, err) < 0)
            return -1;
    config_warnings_refresh(c);
    return 0;
}

/* ---- gflow's settings, as the daemon uses them ------------------------------------ */

/* gflow's fair-share orders jobs by usage within one priority only. --priority (0..255)
 * times CONFIG_FS_PRIORITY_WEIGHT / 255 moves 1000 per step, more than the fair-share
 * factor (0..1) times CONFIG_FS_FAIRSHARE_WEIGHT ever adds. */
#define CONFIG_FS_PRIORITY_WEIGHT 255000
#define CONFIG_FS_FAIRSHARE_WEIGHT 999
#define CONFIG_DEFAULT_HALF_LIFE (7 * 24 * 3600)

void config_priority(const struct gflow_config *c, struct config_priority *out)
{
    out->weight_priority = c->scheduler_priority_weight_priority;
    out->weight_fairshare = c->scheduler_priority_weight_fairshare;
    out->weight_age = c->scheduler_priority_weight_age;
    out->half_life_secs = c->parsed.fairshare_half_life_secs;
    if (!c->fair_share_enabled)
        return;
    /* Weights of one's own win over gflow's switch. */
    if (out->weight_priority == 255 && out->weight_fairshare == 0 && out->weight_age == 0) {
        out->weight_priority = CONFIG_FS_PRIORITY_WEIGHT;
        out->weight_fairshare = CONFIG_FS_FAIRSHARE_WEIGHT;
    }
    if (out->half_life_secs == CONFIG_DEFAULT_HALF_LIFE)
        out->half_life_secs = c->fair_share_half_life_secs;
}

int config_check_project(const struct gflow_config *c, const char *project, char **err)
{
    bool none = !project || !*project;
    const char *known = c->known_projects ? c->known_projects : "";
    if (none && c->require_project) {
        *err = *known ? xasprintf("a project is required (projects.require_project): submit "
                                  "with --project NAME, one of %s",
                                  known)
                      : xstrdup("a project is required (projects.require_project): submit "
                                "with --project NAME");
        return -1;
    }
    if (none || !*known)
        return 0;
    size_t n = strlen(project);
    for (const char *p = known; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, project, n))
            return 0;
        p += len + (p[len] == ',');
    }
    *err =
        xasprintf("unknown project '%s' (projects.known_projects): use one of %s", project, known);
    return -1;
}

/* ---- the key table, read from outside ----------------------------------------------- */

const char *config_key_name(size_t i)
{
    return i < CONFIG_NKEYS ? config_keys[i].name : NULL;
}

const char *config_key_default(size_t i)
{
    return i < CONFIG_NKEYS ? config_keys[i].def : NULL;
}

bool config_key_is_string(size_t i)
{
    return i < CONFIG_NKEYS && config_keys[i].kind == CONFIG_STRING;
}

char *config_get_text(const struct gflow_config *c, const char *dotted_key)
{
    const struct config_key *k = config_find_key(dotted_key);
    if (!k)
        return NULL;
    struct gflow_config *m = (struct gflow_config *)c; /* the accessors only read here */
    switch (k->kind) {
    case CONFIG_INT:
        return xasprintf("%lld", (long long)*config_int_field(m, k));
    case CONFIG_BOOL:
        return xstrdup(*config_bool_field(m, k) ? "true" : "false");
    case CONFIG_STRING:
        break;
    }
    const char *s = *config_string_field(m, k);
    return s ? xstrdup(s) : NULL;
}
