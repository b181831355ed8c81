/* libnss_gflowtest.so.2: a passwd source for the e2e tests of user lookups that are slow or
 * fail (tests/e2e/test_gpu_truth2_nss.py), standing in for LDAP/SSSD. Built, never
 * installed: the test copies it into the library path and adds "gflowtest" to the passwd
 * line of /etc/nsswitch.conf for its duration.
 *
 * It answers from GFLOW_NSSTEST_DIR/passwd (lines as in /etc/passwd). Only the users listed
 * there are its business: for them, the file "slow" (a number of seconds) makes each lookup
 * sleep first and the file "down" makes it answer NSS_STATUS_UNAVAIL (a server that does not
 * answer); any other uid or name is NOTFOUND at once, so that the lookups of other programs
 * running meanwhile are not slowed or failed. */
#include <errno.h>
#include <nss.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GFLOW_NSSTEST_DIR "/run/gflow-nsstest"

/* What glibc's NSS calls (by these names, for the source "gflowtest"). */
enum nss_status _nss_gflowtest_getpwuid_r(uid_t uid, struct passwd *out, char *buf, size_t buflen,
                                          int *errnop);
enum nss_status _nss_gflowtest_getpwnam_r(const char *name, struct passwd *out, char *buf,
                                          size_t buflen, int *errnop);

/* Sleeps as long as the "slow" file says; whether "down" exists. */
static bool control(void)
{
    FILE *f = fopen(GFLOW_NSSTEST_DIR "/slow", "r");
    if (f) {
        double secs = 0;
        if (fscanf(f, "%lf", &secs) == 1 && secs > 0)
            usleep((useconds_t)(secs * 1e6));
        fclose(f);
    }
    return access(GFLOW_NSSTEST_DIR "/down", F_OK) == 0;
}

/* Copies s into the caller's buffer. */
static char *put(const char *s, char **buf, size_t *left)
{
    size_t n = strlen(s) + 1;
    if (n > *left)
        return NULL;
    char *at = *buf;
    memcpy(at, s, n);
    *buf += n;
    *left -= n;
    return at;
}

/* Looks up by uid (name NULL) or by name. */
static enum nss_status lookup(const char *name, uid_t uid, struct passwd *out, char *buf,
                              size_t buflen, int *errnop)
{
    FILE *f = fopen(GFLOW_NSSTEST_DIR "/passwd", "r");
    if (!f) {
        *errnop = ENOENT;
        return NSS_STATUS_NOTFOUND;
    }
    struct passwd *pw;
    while ((pw = fgetpwent(f)))
        if (name ? strcmp(pw->pw_name, name) == 0 : pw->pw_uid == uid)
            break;
    if (!pw) {
        fclose(f);
        *errnop = ENOENT;
        return NSS_STATUS_NOTFOUND;
    }
    if (control()) {
        fclose(f);
        *errnop = ECONNREFUSED; /* as a client whose server does not answer */
        return NSS_STATUS_UNAVAIL;
    }
    *out = *pw;
    bool ok = (out->pw_name = put(pw->pw_name, &buf, &buflen)) &&
              (out->pw_passwd = put(pw->pw_passwd, &buf, &buflen)) &&
              (out->pw_gecos = put(pw->pw_gecos, &buf, &buflen)) &&
              (out->pw_dir = put(pw->pw_dir, &buf, &buflen)) &&
              (out->pw_shell = put(pw->pw_shell, &buf, &buflen));
    fclose(f);
    if (!ok) {
        *errnop = ERANGE;
        return NSS_STATUS_TRYAGAIN;
    }
    return NSS_STATUS_SUCCESS;
}

enum nss_status _nss_gflowtest_getpwuid_r(uid_t uid, struct passwd *out, char *buf, size_t buflen,
                                          int *errnop)
{
    return lookup(NULL, uid, out, buf, buflen, errnop);
}

enum nss_status _nss_gflowtest_getpwnam_r(const char *name, struct passwd *out, char *buf,
                                          size_t buflen, int *errnop)
{
    return lookup(name, 0, out, buf, buflen, errnop);
}
