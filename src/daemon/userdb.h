/* userdb: the user database (NSS: passwd and group, which may be LDAP or SSSD) looked up
 * off the event loop. A directory server that is slow or down must not stall the daemon
 * (every client waits on the loop) nor fail jobs, so every lookup of the loop's goes
 * through here: worker threads call NSS, the answers are cached, and the loop never waits
 * longer than the deadline it gives (0: not at all). What is not known yet is said so;
 * when answers come, the loop is woken through an eventfd and the `answered` callback
 * runs, so that whatever waited (a job: UserLookup) is tried again.
 *
 * The cache: an answer that found the user is used for names (a request's caller, a GPU
 * process's owner) however old, and looked up again in the background after
 * USERDB_REFRESH_SECS; a failed refresh keeps it (a name does not go stale in an outage).
 * Launching a job wants more (userdb_uid_fresh): an answer younger than
 * USERDB_FRESH_SECS, read while /etc/group was the same file, since the job gets the
 * user's supplementary groups from it and a stale entry must not grant a group the user
 * no longer has (docs/security.md). A lookup that finds nothing or fails is tried again
 * after a back-off (1 s doubling to USERDB_BACKOFF_MAX_SECS); while a job waits for it
 * the retries run on their own timer. docs/design.md, "User lookups". */
#ifndef GFLOWD_USERDB_H
#define GFLOWD_USERDB_H

#include <stdbool.h>
#include <sys/types.h>

#define USERDB_REFRESH_SECS 300.0
#define USERDB_FRESH_SECS 10.0
#define USERDB_BACKOFF_MAX_SECS 16.0
/* How long a request's identification may hold the loop for an answer not known yet. */
#define USERDB_REQUEST_WAIT_SECS 0.2

struct userdb;

/* A passwd entry, with the user's groups. */
struct userdb_user {
    uid_t uid;
    gid_t gid;
    char *name, *home, *shell;
    char *groups; /* "GID,GID,..." as getgrouplist gives them (the shim's --groups);
                     NULL: more than can be listed */
};

enum userdb_answer {
    USERDB_FOUND,
    USERDB_ABSENT,  /* NSS answered that there is no such entry */
    USERDB_UNKNOWN, /* no answer yet, or the lookup failed (an outage): *why says which */
};

typedef void (*userdb_answered_cb)(void *arg);

/* Starts the worker threads and watches their eventfd on the loop (loop_init first);
 * answered(arg) runs on the loop after answers came. NULL with *err. */
struct userdb *userdb_new(userdb_answered_cb answered, void *arg, char **err);
/* Stops the workers; one stuck in NSS is left behind (with what it uses). */
void userdb_free(struct userdb *u);

/* uid's entry for naming (any answer that found it; a lookup starts when there is none
 * or it is old), waiting up to wait seconds for one not known yet. out (may be NULL) is
 * filled when FOUND (userdb_user_clear it); *why (may be NULL) gets what is known of a
 * lookup that has not found it, to free. */
enum userdb_answer userdb_uid(struct userdb *u, uid_t uid, double wait, struct userdb_user *out,
                              char **why);
/* uid's entry for launching a job as that user: only a fresh answer (above). Else a
 * lookup starts (or its retry is due: it is retried until found), waited for up to wait
 * seconds, and USERDB_UNKNOWN comes back when it has not answered so, with *why; a user
 * NSS says does not exist counts as unknown too, as an outage of a directory often
 * looks the same. */
#define USERDB_LAUNCH_WAIT_SECS 0.05
enum userdb_answer userdb_uid_fresh(struct userdb *u, uid_t uid, double wait,
                                    struct userdb_user *out, char **why);
/* The uid of the user called name / the gid of the group called name. */
enum userdb_answer userdb_user_named(struct userdb *u, const char *name, double wait, uid_t *uid);
enum userdb_answer userdb_group_named(struct userdb *u, const char *name, double wait, gid_t *gid);

void userdb_user_clear(struct userdb_user *p);

#endif
