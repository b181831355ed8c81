/* auth: the caller's identity and what it may do (see auth.h). */
#include "auth.h"

#include <stdlib.h>
#include <sys/socket.h>

#include "daemon.h"
#include "userdb.h"
#include "util.h"

/* Whether the user (primary group gid, supplementary groups "G,G,...") is in
 * daemon.admin_group. */
static bool in_admin_group(const struct gflowd *d, gid_t gid, const char *groups)
{
    if (!d->has_admin_gid)
        return false;
    if (gid == d->admin_gid)
        return true;
    for (const char *p = groups; p && *p;) {
        char *end;
        unsigned long g = strtoul(p, &end, 10);
        if (end == p)
            break;
        if ((gid_t)g == d->admin_gid)
            return true;
        p = *end == ',' ? end + 1 : end;
    }
    return false;
}

/* Fills who's name, group and rights from the user database, waiting up to wait seconds
 * for an answer (userdb.h). The daemon's own user (root's too, for a system daemon) is
 * known from the start. */
static void auth_lookup(const struct gflowd *d, struct caller *who, double wait)
{
    free(who->user);
    free(who->lookup_error);
    who->lookup_error = NULL;
    if (who->uid == d->uid) {
        who->user = xstrdup(d->user);
        who->is_admin = true;
        return;
    }
    struct userdb_user u = {0};
    char *why = NULL;
    enum userdb_answer a = userdb_uid(d->userdb, who->uid, wait, &u, &why);
    if (a == USERDB_FOUND) {
        who->user = xstrdup(u.name);
        who->gid = u.gid;
    } else { /* no entry: named by the uid, as ever */
        who->user = xasprintf("%u", (unsigned)who->uid);
    }
    if (a == USERDB_UNKNOWN)
        who->lookup_error = why;
    else
        free(why);
    who->is_admin = who->uid == 0 || (a == USERDB_FOUND && in_admin_group(d, u.gid, u.groups));
    userdb_user_clear(&u);
}

int auth_identify(const struct gflowd *d, int fd, struct caller *who)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -1;
    who->uid = cred.uid;
    who->gid = cred.gid;
    auth_lookup(d, who, USERDB_REQUEST_WAIT_SECS);
    return 0;
}

bool auth_known(const struct gflowd *d, struct caller *who)
{
    if (who->lookup_error) /* an answer may have come since the connection began */
        auth_lookup(d, who, 0);
    return !who->lookup_error;
}

void auth_caller_free(struct caller *who)
{
    free(who->user);
    who->user = NULL;
    free(who->lookup_error);
    who->lookup_error = NULL;
}

bool auth_may_use(const struct gflowd *d, const struct caller *who)
{
    return d->system || who->uid == d->uid;
}

bool auth_may_act_on(const struct caller *who, uint32_t owner_uid)
{
    return who->is_admin || who->uid == owner_uid;
}
