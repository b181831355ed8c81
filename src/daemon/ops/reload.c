/* reload: gflowd reload (see reload.h). Every key whose value differs after reading
 * the file again is either applied (the ones in live_keys: read where they are used,
 * or re-applied here) or reported as needing a restart. */
#include "reload.h"

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>

#include "config_file.h"
#include "daemon.h"
#include "gpu/gpu.h"
#include "jobs/jobs.h"
#include "jobs/priority.h"
#include "log.h"
#include "ops/notify.h"
#include "policy/quota_state.h"
#include "userdb.h"
#include "util.h"

extern char **environ;

/* Settings read where they are used: the new value counts from the next scheduling
 * pass, request, poll or job start. The rest (paths, the HTTP server's limits, NVML's
 * set-up) are read once at start. */
static const char *const live_keys[] = {
    "daemon.max_running_jobs",
    "daemon.kill_grace_secs",
    "daemon.log_level",
    "daemon.gpu_allocation_strategy",
    "daemon.gpu_poll_interval_secs",
    "daemon.admin_group",
    "daemon.max_log_bytes",
    "daemon.log_keep_on_full_disk",
    "daemon.gpus",
    "daemon.stray",
    "daemon.host_proc",
    "daemon.cpu_affinity", /* read at each launch */
    "scheduler.backfill",
    "scheduler.backfill_depth",
    "scheduler.default_time_limit",
    "scheduler.backfill_untimed",
    "daemon.default_time_plan",
    "scheduler.preempt",
    "scheduler.preempt_priority_gap",
    "scheduler.preempt_grace",
    "scheduler.priority_weight_priority",
    "scheduler.priority_weight_fairshare",
    "scheduler.priority_weight_age",
    "scheduler.priority_max_age",
    "scheduler.fairshare_half_life",
    "scheduler.fairshare_user_shares",
    "scheduler.fairshare_project_shares",
    "daemon.fair_share.enabled", /* gflow's: mapped onto the weights above */
    "daemon.fair_share.half_life_secs",
    "daemon.host", /* read by gflowd web, not by the daemon */
    "daemon.port",
    "projects.known_projects", /* read at each submission */
    "projects.require_project",
    "executor.type",    /* only a warning */
    "reservations.who", /* the [reservations] keys: read at each gctl reserve create */
    "reservations.max_gpus",
    "reservations.max_duration",
    "reservations.max_ahead",
    "reservations.max_per_user",
    "hooks.pre", /* the [hooks] keys: passed to each job's shim at its launch */
    "hooks.post",
    "hooks.timeout",
    "limits.max_jobs_per_request",
    "limits.max_active_jobs_per_user",
    "limits.max_ids_per_request",
    "limits.max_log_scan_bytes",
    "limits.max_event_clients",
    "limits.max_event_clients_per_user",
    "limits.event_buffer_bytes",
    "timezone",          /* read by the commands, not by the daemon */
    "triage.tail_bytes", /* the [triage] keys: read at each failure */
    "triage.timeout_secs",
    NULL,
};

static bool reload_key_is_live(const char *key)
{
    for (size_t i = 0; live_keys[i]; i++)
        if (!strcmp(live_keys[i], key))
            return true;
    return false;
}

/* The settings as a start would make them now: defaults, the file, the environment,
 * then the daemon's own flags. */
static int reload_read(const struct gflowd *d, struct gflow_config *c, char **err)
{
    config_init(c);
    if (config_load_file(c, d->config_path, d->config_required, err) < 0 ||
        config_load_env(c, environ, err) < 0)
        return -1;
    for (size_t i = 0; i < d->n_flags; i++)
        if (config_set(c, d->flag_keys[i], d->flag_values[i], err) < 0)
            return -1;
    return 0;
}

static bool same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Applies one changed live key to the daemon. 0, or -1 with *err. */
static int reload_apply(struct gflowd *d, const char *key, const char *value, json_t *kept,
                        char **err)
{
    if (!strcmp(key, "daemon.gpus")) {
        int r = gpu_reload_config(d->gpus, value, err);
        if (r < 0)
            return -1;
        if (r == 0)
            json_object_set_new(kept, key,
                                json_string("the GPUs chosen by --gpus or 'gctl set-gpus' "
                                            "stay; 'gctl set-gpus all' goes back to the config"));
    }
    if (value)
        config_set(&d->cfg, key, value, err); /* checked already by reload_read */
    else if (!strcmp(key, "daemon.admin_group") || !strcmp(key, "daemon.host")) {
        char **field = !strcmp(key, "daemon.host") ? &d->cfg.host : &d->cfg.admin_group;
        free(*field);
        *field = NULL;
    }
    if (!strcmp(key, "daemon.log_level"))
        log_parse_level(d->cfg.log_level, &log_threshold);
    if (!strcmp(key, "daemon.stray")) {
        gpu_set_stray_mode(d->gpus, d->cfg.parsed.stray);
        jobs_mark_dirty(d->jobs); /* the GPUs strays kept may be free now, or not */
    }
    if (!strcmp(key, "daemon.host_proc"))
        gpu_set_host_proc(d->cfg.host_proc);
    if (!strcmp(key, "daemon.admin_group"))
        daemon_resolve_admin_group(d);
    if (!strncmp(key, "scheduler.fairshare_", strlen("scheduler.fairshare_")) ||
        !strncmp(key, "daemon.fair_share.", strlen("daemon.fair_share.")))
        priority_configure(d);
    return 0;
}

/* [quota] (not in the key table): its limits are applied whole when they changed; a
 * changed quota.period needs a restart (the ended jobs' GPU time is read for the period
 * at start-up). Whether the limits changed. */
static bool reload_quota(struct gflowd *d, struct gflow_config *c, json_t *restart)
{
    if (c->quota.period != d->cfg.quota.period) {
        json_array_append_new(restart, json_string("quota.period"));
        log_warn("reload: quota.period changed to %s; it takes effect at the next restart",
                 quota_period_name(c->quota.period));
        c->quota.period = d->cfg.quota.period;
    }
    json_t *a = quota_set_to_json(&d->cfg.quota.limits), *b = quota_set_to_json(&c->quota.limits);
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (same)
        return false;
    struct quota_config old = d->cfg.quota;
    d->cfg.quota = c->quota;
    c->quota = old; /* freed with c */
    quotas_set_config(jobs_quotas(d->jobs), &d->cfg.quota);
    log_info("reload: [quota] applied");
    return true;
}

/* [notifications] (not in the key table): applied whole when it changed; rows already
 * recorded go to a webhook only while its URL is still configured. */
static bool reload_notifications(struct gflowd *d, struct gflow_config *c)
{
    if (notify_config_equal(&d->cfg.notify, &c->notify))
        return false;
    struct notify_config old = d->cfg.notify;
    d->cfg.notify = c->notify;
    c->notify = old; /* freed with c */
    notifier_reconfigured(d->notifier);
    log_info("reload: [notifications] applied (%zu webhook%s)", d->cfg.notify.n_webhooks,
             d->cfg.notify.n_webhooks == 1 ? "" : "s");
    return true;
}

/* [[triage.classes]] (not in the key table): applied whole when they changed; they
 * classify the failures from then on, not the ones already classified. */
static bool reload_triage(struct gflowd *d, struct gflow_config *c)
{
    if (triage_config_equal(&d->cfg.triage, &c->triage))
        return false;
    struct triage_config old = d->cfg.triage;
    d->cfg.triage = c->triage;
    c->triage = old; /* freed with c */
    log_info("reload: [[triage.classes]] applied (%zu class%s)", d->cfg.triage.n_classes,
             d->cfg.triage.n_classes == 1 ? "" : "es");
    return true;
}

json_t *daemon_reload(struct gflowd *d, char **err)
{
    struct gflow_config c;
    if (reload_read(d, &c, err) < 0) {
        config_free(&c);
        log_warn("reload refused, nothing changed: %s", *err);
        return NULL;
    }
    json_t *applied = json_array(), *restart = json_array(), *kept = json_object();
    for (size_t i = 0; i < c.n_warnings; i++)
        log_warn("config: %s", c.warnings[i]);
    for (size_t i = 0; config_key_name(i); i++) {
        const char *key = config_key_name(i);
        char *old = config_get_text(&d->cfg, key), *now = config_get_text(&c, key);
        if (!same_text(old, now)) {
            if (!reload_key_is_live(key)) {
                json_array_append_new(restart, json_string(key));
                log_warn("reload: %s changed to %s; it takes effect at the next restart", key,
                         now ? now : "(unset)");
            } else if (reload_apply(d, key, now, kept, err) < 0) {
                log_warn("reload: %s: %s", key, *err);
                free(*err);
                *err = NULL;
                json_array_append_new(restart, json_string(key));
            } else {
                json_array_append_new(applied, json_string(key));
                log_info("reload: %s is now %s", key, now ? now : "(unset)");
            }
        }
        free(old);
        free(now);
    }
    if (reload_quota(d, &c, restart))
        json_array_append_new(applied, json_string("quota"));
    if (reload_notifications(d, &c))
        json_array_append_new(applied, json_string("notifications"));
    if (reload_triage(d, &c))
        json_array_append_new(applied, json_string("triage.classes"));
    config_free(&c);
    jobs_mark_dirty(d->jobs);
    log_info("configuration reloaded from %s: %zu setting%s applied, %zu need a restart",
             d->config_path ? d->config_path : "(no file)", json_array_size(applied),
             json_array_size(applied) == 1 ? "" : "s", json_array_size(restart));
    return json_pack("{s:o, s:o, s:o, s:o}", "config",
                     d->config_path ? json_string(d->config_path) : json_null(), "applied", applied,
                     "restart_needed", restart, "kept", kept);
}

void daemon_resolve_admin_group(struct gflowd *d)
{
    bool pending = d->admin_group_pending;
    d->admin_group_pending = false;
    if (!d->cfg.admin_group) {
        d->has_admin_gid = false;
        return;
    }
    gid_t gid = 0;
    enum userdb_answer a;
    if (d->userdb) { /* on the loop: off it, with a deadline */
        a = userdb_group_named(d->userdb, d->cfg.admin_group, USERDB_REQUEST_WAIT_SECS, &gid);
    } else { /* at the start, before anything is served */
        errno = 0;
        struct group *g = getgrnam(d->cfg.admin_group);
        a = g ? USERDB_FOUND : errno ? USERDB_UNKNOWN : USERDB_ABSENT;
        gid = g ? g->gr_gid : 0;
    }
    if (a == USERDB_UNKNOWN) {
        /* Kept as it was (a reload that changed the name: none yet) until it answers. */
        if (!pending)
            log_warn("daemon.admin_group '%s': the group database has not answered yet; "
                     "admins are root and the daemon's user until it does",
                     d->cfg.admin_group);
        d->admin_group_pending = true;
        return;
    }
    d->has_admin_gid = a == USERDB_FOUND;
    d->admin_gid = gid;
    if (a == USERDB_ABSENT)
        log_warn("daemon.admin_group '%s' does not exist; only root is admin", d->cfg.admin_group);
}
