/* auth: the caller's identity and what it may do (see auth.h). */
#include "auth.h"

#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "daemon.h"
#include "util.h"

static bool in_admin_group(const struct gflowd *d, const char *user, gid_t gid)
{
    if (!d->has_admin_gid)
        return false;
    if (gid == d->admin_gid)
        return true;
    int n = 64;
    gid_t *groups = xmalloc((size_t)n * sizeof(gid_t));
    if (getgrouplist(user, gid, groups, &n) < 0) {
        groups = xrealloc(groups, (size_t)n * sizeof(gid_t));
        if (getgrouplist(user, gid, groups, &n) < 0)
            n = 0;
    }
    bool found = false;
    for (int i = 0; i < n && !found; i++)
        found = groups[i] == d->admin_gid;
    free(groups);
    return found;
}

int auth_identify(const struct gflowd *d, int fd, struct caller *who)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -1;
    who->uid = cred.uid;
    who->gid = cred.gid;
    struct passwd *pw = getpwuid(cred.uid);
    who->user = pw ? xstrdup(pw->pw_name) : xasprintf("%u", (unsigned)cred.uid);
    if (pw)
        who->gid = pw->pw_gid;
    who->is_admin =
        cred.uid == 0 || cred.uid == d->uid || (pw && in_admin_group(d, pw->pw_name, pw->pw_gid));
    return 0;
}

void auth_caller_free(struct caller *who)
{
    free(who->user);
    who->user = NULL;
}

bool auth_may_use(const struct gflowd *d, const struct caller *who)
{
    return d->system || who->uid == d->uid;
}

bool auth_may_act_on(const struct caller *who, uint32_t owner_uid)
{
    return who->is_admin || who->uid == owner_uid;
}
