/* triage_run: names a failed job's failure (core/triage.h) from its log's tail, without
 * the loop ever touching the log.
 *
 * When a job fails by its exit code, a signal or the OOM killer (a jobs observer sees
 * it), a child reads the end of its log: gflowd itself as `gflowd __log-tail UID GID
 * BYTES DIR ID`, which drops to the job's user before it opens anything (a root daemon
 * never reads, as root, what a user's link or file points at), opens DIR/ID.log without
 * following a link, refuses anything but a regular file of that user, and writes the
 * last BYTES bytes (triage.tail_bytes) to its stdout. The loop collects that through a
 * pipe (subproc.h) and kills a child slower than triage.timeout_secs: a log on a hung
 * NFS or FUSE mount costs a child, never a scheduling pass. Then the class and the
 * matched line are written to the job's row (failure_class, failure_line), which the
 * API shows as the job's reason. At most TRIAGE_RUN_MAX children run at once; the other
 * failures wait their turn in order. */
#ifndef GFLOWD_TRIAGE_RUN_H
#define GFLOWD_TRIAGE_RUN_H

struct gflowd;
struct triage_runner;

/* Children reading logs at once. */
#define TRIAGE_RUN_MAX 8

/* Registers with d->jobs for failures. */
struct triage_runner *triage_runner_start(struct gflowd *d);
/* Stops (gflowd is stopping): the children in flight are left to finish on their own and
 * their failures, like the ones waiting, stay unclassified. */
void triage_runner_stop(struct triage_runner *t);

/* The child: `gflowd __log-tail UID GID BYTES DIR ID`. Writes "ok START\n" and the log's
 * bytes from START on, or "error: why\n"; exits 0, or 1 on an error. */
int triage_child_main(int argc, char **argv);

#endif
