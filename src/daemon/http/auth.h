/* auth: who is asking and what they may do. The caller's identity is the kernel's
 * (SO_PEERCRED on the Unix socket), never something a request says. A per-user daemon
 * serves only its own user; a system daemon (root) serves everyone. Owners act on their
 * own jobs, admins (root, the daemon's own user, members of daemon.admin_group) on all,
 * and only admins change runtime settings (gctl). docs/security.md, "Who is trusted for what". */
#ifndef GFLOWD_AUTH_H
#define GFLOWD_AUTH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct gflowd;

/* Who is asking, from the kernel's peer credentials. */
struct caller {
    uid_t uid;
    gid_t gid;     /* the user's primary group */
    char *user;    /* login name, or the uid as text */
    bool is_admin; /* root, the daemon's own user, or daemon.admin_group */
    /* Its user could not be looked up yet (userdb.h: NSS slow or down): why. Such a
     * caller is answered 503 (auth_known), as its name and groups are not known. */
    char *lookup_error;
};

/* Identifies the peer of the connected Unix socket fd. 0, or -1 if the kernel cannot
 * say (then nothing may be done). */
int auth_identify(const struct gflowd *d, int fd, struct caller *who);
void auth_caller_free(struct caller *who);
/* Whether who's user is known (looked up again, without waiting, when it was not). */
bool auth_known(const struct gflowd *d, struct caller *who);

/* Whether who may use this daemon at all (a per-user daemon: only its own user). */
bool auth_may_use(const struct gflowd *d, const struct caller *who);
/* Whether who may act on (cancel, hold, release, update, read) a job of owner_uid. */
bool auth_may_act_on(const struct caller *who, uint32_t owner_uid);

#endif
