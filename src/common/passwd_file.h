/* passwd_file: /etc/passwd read directly (fgetpwent), never through NSS. The client
 * programs are linked statically, and glibc's NSS there needs, at run time, the shared
 * libraries of the very glibc it was built with (the linker warns "Using 'getpwuid' in
 * statically linked applications"): a different one may crash it (LDAP/SSSD modules
 * do). So they make no NSS call (the build fails if one comes back: meson.build), and a
 * user who is only in a directory is named by what the daemon says, or asked for HOME. */
#ifndef GFLOW_PASSWD_FILE_H
#define GFLOW_PASSWD_FILE_H

#include <stdbool.h>
#include <sys/types.h>

/* uid's home directory as /etc/passwd lists it, to free; NULL when it is not listed. */
char *passwd_file_home(uid_t uid);
/* Whether /etc/passwd lists a user called name. */
bool passwd_file_has_user(const char *name);

#endif
