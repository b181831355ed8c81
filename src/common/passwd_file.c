/* passwd_file: /etc/passwd without NSS (see passwd_file.h). */
#include "passwd_file.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The first entry of /etc/passwd for which match(pw, arg), copied by take, or NULL. */
static char *find(bool (*match)(const struct passwd *pw, const void *arg), const void *arg,
                  char *(*take)(const struct passwd *pw))
{
    FILE *f = fopen("/etc/passwd", "re");
    if (!f)
        return NULL;
    char *found = NULL;
    for (struct passwd *pw; !found && (pw = fgetpwent(f));)
        if (match(pw, arg))
            found = take(pw);
    fclose(f);
    return found;
}

static bool uid_is(const struct passwd *pw, const void *arg)
{
    return pw->pw_uid == *(const uid_t *)arg;
}

static bool name_is(const struct passwd *pw, const void *arg)
{
    return strcmp(pw->pw_name, arg) == 0;
}

static char *home_of(const struct passwd *pw)
{
    return xstrdup(pw->pw_dir && *pw->pw_dir ? pw->pw_dir : "/");
}

static char *name_of(const struct passwd *pw)
{
    return xstrdup(pw->pw_name);
}

char *passwd_file_home(uid_t uid)
{
    return find(uid_is, &uid, home_of);
}

bool passwd_file_has_user(const char *name)
{
    char *found = find(name_is, name, name_of);
    free(found);
    return found != NULL;
}
