/* configinit: gflowd init, which writes a configuration file listing every key with its
 * default, commented out, so that a setting is changed by uncommenting its line. gflow's
 * flags (--gpus, --host, --port, --timezone, --gpu-allocation-strategy,
 * --gpu-poll-interval-secs) write their keys uncommented; on a terminal, without --yes,
 * it asks for them as gflow's wizard does (--advanced: webhooks and e-mail too) and
 * shows the file before writing it. */
#ifndef GFLOWD_CONFIGINIT_H
#define GFLOWD_CONFIGINIT_H

#include <stdbool.h>

struct configinit_opts {
    const char *path; /* the file to write */
    bool force;       /* replace an existing file */
    bool yes;         /* write without asking (also when stdin or stdout is no terminal) */
    bool advanced;    /* ask for notifications too */
    /* Values given on the command line; NULL: not given (left at its default). */
    const char *gpus, *host, *port, *timezone, *strategy, *poll_secs;
};

/* What the file sets besides the defaults (values in text form; NULL: default), and
 * what --advanced asked for. */
struct configinit_values {
    const char *gpus, *host, *port, *timezone, *strategy, *poll_secs;
    const char *webhooks; /* URLs, joined by ','; NULL: none */
    const char *smtp_url, *mail_from, *mail_to, *subject_prefix; /* [[notifications.emails]] */
};

/* The commented file's text, with v's settings uncommented (v may be NULL). Malloc'd. */
char *configinit_text(const struct configinit_values *v);

/* gflowd init: checks the values, asks on a terminal, writes the file (its folder made
 * if needed; an existing file is replaced only with force). Prints what it did; returns
 * the exit status (1 on a bad value, with one line saying which and how to fix it). */
int configinit_run(const struct configinit_opts *o);

#endif
