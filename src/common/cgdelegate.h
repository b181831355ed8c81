/* cgdelegate: gflowd's place in a delegated cgroup v2 subtree (systemd's Delegate=yes).
 *
 * A job's memory limit on cgroup v2 is memory.max on the job's own cgroup, which needs
 * the memory controller enabled in its parent's cgroup.subtree_control; the kernel
 * refuses that for a cgroup that holds processes (the "no internal processes" rule).
 * Under a unit, gflowd and its shims are in the service's cgroup itself. So when that
 * cgroup was given to gflowd (delegated), gflowd moves itself into a leaf below it
 * (<service>/gflowd; its shims are born there), enables +memory (+pids where available)
 * for the service cgroup's children, and the shims make the job cgroups beside the leaf
 * (GFLOW_SHIM_CGROUP_BASE). Every function takes the cgroup directory as an argument,
 * so the unit tests run them on a fake tree of plain files. */
#ifndef GFLOW_CGDELEGATE_H
#define GFLOW_CGDELEGATE_H

#include <stdbool.h>
#include <sys/types.h>

/* The leaf gflowd and its shims live in, below the service's cgroup. */
#define CGDELEGATE_LEAF "gflowd"
/* The shim's environment variable naming the cgroup its job cgroups go in. */
#define CGDELEGATE_ENV "GFLOW_SHIM_CGROUP_BASE"

struct cgdelegate {
    char *service_dir; /* the cgroup job cgroups go in; NULL: today's layout */
    char *leaf_dir;    /* the leaf gflowd is in */
    bool moved;        /* gflowd moved itself there (else systemd put it there:
                        * DelegateSubgroup=gflowd), so it gives the controllers back at exit */
    char *enabled;     /* the controllers it enabled: "memory" or "memory pids" */
};

/* The daemon's own cgroup directory in the unified hierarchy, from the texts of
 * /proc/self/mountinfo and /proc/self/cgroup: "<cgroup2 mount point><own path>".
 * *is_root: it is the hierarchy's (or the cgroup namespace's) root. NULL when there is
 * no cgroup2 mount or no "0::" line. */
char *cgdelegate_own_dir(const char *mountinfo, const char *proc_cgroup, bool *is_root);

/* Whether dir was given to this process to manage: root needs systemd's mark
 * (the trusted.delegate or user.delegate xattr = "1", which recent systemd sets), anyone else
 * needs dir, its cgroup.procs and cgroup.subtree_control writable (systemd chowns them
 * to a User= service with Delegate=yes). *why says why not. */
bool cgdelegate_is_delegated(const char *dir, uid_t euid, char **why);

/* Puts pid (gflowd, alone in dir, its own cgroup) into the leaf dir/gflowd and enables
 * the controllers for dir's children; or, when dir is such a leaf already (systemd's
 * DelegateSubgroup=gflowd), uses its parent. Only for a cgroup that was delegated to
 * euid (cgdelegate_is_delegated). Returns 1 with *out filled; 0 when it does not apply,
 * with *why (today's layout stays); -1 when it failed, with *why and all undone. */
int cgdelegate_setup(const char *dir, bool is_root, uid_t euid, pid_t pid, struct cgdelegate *out,
                     char **why);

/* At exit, for a leaf gflowd moved into itself: turns the controllers off again in the
 * service cgroup, so that systemd can put the next gflowd into it (it cannot while they
 * are on). Running jobs keep running; their shims set their limits again once the next
 * gflowd turns the controllers back on. 0, or -1 with *why. */
int cgdelegate_release(const struct cgdelegate *d, char **why);

void cgdelegate_free(struct cgdelegate *d);

/* Whether the space-separated list in dir/file (cgroup.controllers,
 * cgroup.subtree_control) holds word. */
bool cgdelegate_has_word(const char *dir, const char *file, const char *word);

/* Undoes the octal escapes of a path in /proc/self/mountinfo ("\040" for a space). */
void cgdelegate_unescape(char *s);

#endif
