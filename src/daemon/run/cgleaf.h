/* cgleaf: at start, gflowd moves into a leaf of a delegated cgroup v2 (systemd's
 * Delegate=yes) so that its shims can give jobs memory.max; at exit it gives the
 * controllers back (src/common/cgdelegate.h has the why). */
#ifndef GFLOW_CGLEAF_H
#define GFLOW_CGLEAF_H

struct gflowd;

/* Before the first shim (the memory probe included) starts: moves gflowd when its
 * cgroup is delegated and tells the shims where job cgroups go (GFLOW_SHIM_CGROUP_BASE
 * in gflowd's environment, which they inherit). Otherwise, or when that fails, one log
 * line says why and everything stays as it was. */
void cgleaf_enter(struct gflowd *d);
/* At exit: turns the controllers off again if gflowd had moved itself. */
void cgleaf_leave(struct gflowd *d);

#endif
