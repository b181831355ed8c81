/* fuzz_config: config_load_text (the TOML file read by every program) on arbitrary
 * bytes, on top of the defaults.
 *
 * Invariants: a refused file gives "fuzz.toml:LINE..." and leaves the settings exactly
 * as they were (all or nothing); an accepted one names its source, and the settings it
 * gave, written back as a TOML file ([daemon] and [limits]), as GFLOW_<SECTION>__<KEY>
 * environment entries (config_load_env) or as config_set calls, give the same settings
 * again. No crash, no leak. */
#include <stddef.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"
#include "util.h"

enum kind { K_STRING, K_INT, K_BOOL };

/* The settings of struct gflow_config (config.h), by section ([daemon], then
 * [limits]); daemon.max_request_bytes is another name of limits.max_request_bytes. */
#define D(name, kind)                                                                              \
    {                                                                                              \
        "daemon." #name, kind, offsetof(struct gflow_config, name)                                 \
    }
#define L(name)                                                                                    \
    {                                                                                              \
        "limits." #name, K_INT, offsetof(struct gflow_config, limits.name)                         \
    }
static const struct {
    const char *key; /* "section.key" */
    enum kind kind;
    size_t offset;
} settings[] = {
    D(socket_path, K_STRING),
    D(data_dir, K_STRING),
    D(max_running_jobs, K_INT),
    D(kill_grace_secs, K_INT),
    D(admin_group, K_STRING),
    D(log_level, K_STRING),
    D(gpus, K_STRING),
    D(nvml_library, K_STRING),
    D(gpu_allocation_strategy, K_STRING),
    D(gpu_poll_interval_secs, K_INT),
    D(gpu_id_format, K_STRING),
    D(constrain_devices, K_BOOL),
    {"daemon.max_request_bytes", K_INT, offsetof(struct gflow_config, limits.max_request_bytes)},
    L(max_request_bytes),
    L(max_body_bytes_in_flight),
    L(max_connections),
    L(max_connections_per_user),
    L(idle_timeout_secs),
    L(max_jobs_per_request),
    L(max_active_jobs_per_user),
    L(max_ids_per_request),
    L(max_log_scan_bytes),
    L(max_event_clients),
    L(max_event_clients_per_user),
    L(event_buffer_bytes),
};
#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

static const void *field(const struct gflow_config *c, size_t i)
{
    return (const char *)c + settings[i].offset;
}

/* Every setting as text, one per line ("\N" for unset), for comparisons. */
static char *describe(const struct gflow_config *c)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const void *f = field(c, i);
        strbuf_addf(&sb, "%s=", settings[i].key);
        if (settings[i].kind == K_INT)
            strbuf_addf(&sb, "%lld\n", (long long)*(const int64_t *)f);
        else if (settings[i].kind == K_BOOL)
            strbuf_addf(&sb, "%s\n", *(const bool *)f ? "true" : "false");
        else if (*(char *const *)f)
            strbuf_addf(&sb, "[%s]\n", *(char *const *)f);
        else
            strbuf_adds(&sb, "\\N\n");
    }
    return strbuf_detach(&sb);
}

/* A TOML basic string of s. */
static void put_string(struct strbuf *sb, const char *s)
{
    strbuf_addc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            strbuf_addf(sb, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            strbuf_addf(sb, "\\u%04x", *p);
        else
            strbuf_addc(sb, (char)*p);
    }
    strbuf_addc(sb, '"');
}

/* The setting's value as config_set and the environment take it; NULL if unset. */
static char *value_text(const struct gflow_config *c, size_t i)
{
    const void *f = field(c, i);
    if (settings[i].kind == K_INT)
        return xasprintf("%lld", (long long)*(const int64_t *)f);
    if (settings[i].kind == K_BOOL)
        return xstrdup(*(const bool *)f ? "true" : "false");
    return *(char *const *)f ? xstrdup(*(char *const *)f) : NULL;
}

static void check_same(const struct gflow_config *a, const struct gflow_config *b)
{
    char *da = describe(a), *db = describe(b);
    FUZZ_CHECK_TEXT(strcmp(da, db) == 0, da, db);
    free(da);
    free(db);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gflow_config c;
    config_init(&c);
    char *before = describe(&c);
    char *err = NULL;
    if (config_load_text(&c, "fuzz.toml", (const char *)data, size, &err) < 0) {
        FUZZ_CHECK(err && strncmp(err, "fuzz.toml:", 10) == 0);
        char *after = describe(&c);
        FUZZ_CHECK_TEXT(strcmp(before, after) == 0, before, after);
        FUZZ_CHECK(c.source_path == NULL);
        free(after);
        free(err);
        free(before);
        config_free(&c);
        return 0;
    }
    FUZZ_CHECK(c.source_path && strcmp(c.source_path, "fuzz.toml") == 0);

    /* Written back as a file. */
    struct strbuf file;
    strbuf_init(&file);
    const char *section = "";
    /* As the environment and as config_set calls. */
    char *envp[N_SETTINGS + 2];
    size_t n_env = 0;
    char *sections[N_SETTINGS] = {NULL};
    size_t n_sections = 0;
    envp[n_env++] = xstrdup("GFLOW_NOT_A_SETTING=x"); /* no __: not ours */
    struct gflow_config by_set;
    config_init(&by_set);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        char *v = value_text(&c, i);
        if (!v)
            continue;
        const char *dot = strchr(settings[i].key, '.');
        size_t slen = (size_t)(dot - settings[i].key);
        if (strlen(section) != slen || strncmp(section, settings[i].key, slen) != 0) {
            strbuf_addf(&file, "[%.*s]\n", (int)slen, settings[i].key);
            sections[n_sections] = xstrndup(settings[i].key, slen);
            section = sections[n_sections++];
        }
        strbuf_addf(&file, "%s = ", dot + 1);
        if (settings[i].kind == K_STRING)
            put_string(&file, v);
        else
            strbuf_adds(&file, v);
        strbuf_addc(&file, '\n');
        /* GFLOW_<SECTION>__<KEY> */
        char *name = xasprintf("GFLOW_%.*s__%s=%s", (int)slen, settings[i].key, dot + 1, v);
        for (char *p = name; *p != '='; p++)
            if (*p >= 'a' && *p <= 'z')
                *p = (char)(*p - 'a' + 'A');
        envp[n_env++] = name;
        FUZZ_CHECK(config_set(&by_set, settings[i].key, v, &err) == 0);
        free(v);
    }
    envp[n_env] = NULL;

    struct gflow_config by_file;
    config_init(&by_file);
    if (config_load_text(&by_file, "again.toml", file.buf, file.len, &err) < 0)
        FUZZ_CHECK_TEXT(!"the written file is accepted", file.buf, err);
    check_same(&c, &by_file);

    struct gflow_config by_env;
    config_init(&by_env);
    if (config_load_env(&by_env, envp, &err) < 0)
        FUZZ_CHECK_TEXT(!"the environment is accepted", file.buf, err);
    check_same(&c, &by_env);
    check_same(&c, &by_set);

    for (size_t i = 0; i < n_env; i++)
        free(envp[i]);
    for (size_t i = 0; i < n_sections; i++)
        free(sections[i]);
    strbuf_free(&file);
    config_free(&by_file);
    config_free(&by_env);
    config_free(&by_set);
    free(before);
    config_free(&c);
    return 0;
}
