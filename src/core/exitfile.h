/* exitfile: the one definition of what gflow-shim and gflowd tell each other, included
 * by both sides (src/shim and the daemon's runner), so that neither can drift:
 *
 *  - the exit record: one JSON object the shim writes when the job is over
 *    (docs/design.md §4), as struct exit_record, with its encoder and decoder. The
 *    daemon's shims write it into the lock file itself, at offset EXITFILE_RECORD_AT
 *    (after the room of the lock's lines), so that a job needs one file of its own
 *    besides its log: before it starts the shim, the daemon allocates the blocks of
 *    the lock file's first EXITFILE_LOCK_MAX + EXITFILE_RESERVE bytes (its size stays
 *    0), and a job whose filesystem fills up while it runs still gets its outcome
 *    recorded. The shim writes the record with one pwrite (cut to fit
 *    EXITFILE_RESERVE) and fdatasync; the daemon reads it once the shim has exited.
 *    A lock file that holds no complete record there has none (the shim died while
 *    writing it, or it is from a shim of a previous version). Given --exit-file (a
 *    shim run by hand, and the shims of versions before this one, whose files a
 *    restarted daemon still reads), the shim writes the record to that file instead:
 *    atomically (temp file, rename) and, when that fails for want of space, in place
 *    into the file (which such a daemon had reserved), cut to the record's length.
 *    A file that holds no complete record reads as no exit file;
 *  - the lock file: the daemon flock()s <run>/<id>.lock and passes it on --lock-fd; the
 *    shim writes "<pid> <starttime>\n" into it first thing; then, while it runs, a
 *    "cgroup: <dir>\n" line for the job's own cgroup (so that a daemon that finds the
 *    shim dead can still find and kill what is left of the job), and "forwarded: <sig>\n" once it has passed on a signal the daemon
 *    queued (a restarted daemon does not send the --signal warning twice); when it
 *    fails (it exits SHIM_EXIT_FAIL or SHIM_EXIT_USAGE) it rewrites the file as the
 *    first line and one with the one-line reason (when it writes its record into the
 *    lock file: padded with NULs to the old end of the lines, so that the reserved
 *    blocks stay allocated; the lines end at the first NUL), which the daemon reads
 *    once the lock is free when there is no exit record to read: "error: ..." when
 *    the job never started, "lost: ..." when it ran but its outcome could not be
 *    recorded (the exit record could not be written);
 *  - the marker every process of the job carries in its environment,
 *    GFLOW_SHIM_ID=<shim pid>:<shim starttime>: it names this run of the job on this
 *    machine, survives setsid and reparenting, and is how the daemon recognises the
 *    job's processes outside any cgroup once the shim is gone;
 *  - the shim's own exit statuses, the job exit codes the shim itself produces, and the
 *    flag of a forwarded signal (SIGUSR1 queued by the daemon);
 *  - the verdict: the final state and reason of a job, from its exit record (or from how
 *    the shim ended without one) and why the daemon asked the job to end.
 *
 * Pure: no system calls, no files; strings are returned malloc'd (caller frees). */
#ifndef GFLOW_EXITFILE_H
#define GFLOW_EXITFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* gflow-shim's process exit status. With FAIL and USAGE the exit file (if it could be
 * written) and the lock file's error line say why; USAGE also prints one line on
 * stderr. The shim exits OK once the exit file is written, whatever the job did. */
#define SHIM_EXIT_OK 0
#define SHIM_EXIT_FAIL 1  /* the shim failed (before or after the job ran) */
#define SHIM_EXIT_USAGE 2 /* bad command line */

/* Exit codes in the exit file that come from the shim rather than from the job. With
 * SETUP the exit file's error always says why. NOEXEC and NOTFOUND are also what bash
 * returns for a command it cannot execute or find; the shim then sets the error
 * ("not executable: NAME", "command not found: NAME") when the command's first word is
 * the culprit, and leaves it NULL when the status is the job's own. */
#define JOB_EXIT_SETUP 125    /* the job could not be set up (chdir, user, cgroup, conda) */
#define JOB_EXIT_NOEXEC 126   /* the program is not executable */
#define JOB_EXIT_NOTFOUND 127 /* the program was not found */

/* In the value of a SIGUSR1 the daemon queues to the shim (sigqueue, pidfd_send_signal
 * with SI_QUEUE): value & 0xff is the signal to pass on to the job; with this flag only
 * to its main process(es) (Slurm's "B:"), else to every process of the job. */
#define SHIM_FORWARD_MAIN_ONLY 0x100

/* A standby shim (gflow-shim --standby, src/shim/standby.c) takes at most this many
 * bytes of arguments in its one message; gflowd starts a shim for a longer command line. */
#define EXITFILE_STANDBY_MAX (64 * 1024)
/* The messages about a job on the socket of a standby or the supervisor besides the job
 * itself (src/shim/standby.c, supervisor.c): a letter and the job's id in decimal, for
 * SHIM_CTL_FORWARD then a space and a value as SIGUSR1's above. From gflowd: end the job
 * (as SIGTERM to a shim of one job would), or pass a signal on; from the shim: the job is
 * over (its record is in the lock file and its lock free). A supervisor says a lone 'H'
 * once it is set up, and to a gflowd that connected to it. */
#define SHIM_CTL_TERM 'T'
#define SHIM_CTL_FORWARD 'F'
#define SHIM_CTL_DONE 'D'
#define SHIM_CTL_HELLO 'H'
#define SHIM_CTL_MAX 48 /* room for a message and its NUL */
/* Writes the message into buf (SHIM_CTL_MAX bytes): its length. */
int exitfile_ctl_format(char *buf, char what, int64_t id, int value);
/* Reads a message (n bytes): 0 with *what, *id and *value (0 but for SHIM_CTL_FORWARD),
 * or -1 when it is none. */
int exitfile_ctl_parse(const char *msg, size_t n, char *what, int64_t *id, int *value);
/* gflowd starts a standby with a third argument of this many spaces: the room the shim
 * then writes its job's arguments over (what ps shows). */
#define EXITFILE_STANDBY_ROOM 4096

/* The exit file's content. A record owns its strings (exit_record_free frees them). */
struct exit_record {
    int64_t job_id;           /* -1: null */
    int exit_code;            /* -1: null (the job was killed by a signal) */
    int signal;               /* 0: null */
    bool oom;                 /* killed for exceeding --memory-limit */
    double started_at;        /* unix seconds */
    double finished_at;       /* unix seconds */
    int64_t max_rss_kb;       /* peak RSS of the job's main process(es), kB */
    int64_t log_lost_bytes;   /* the job's output its log could not take (no space) */
    char *error;              /* why the job could not be started; NULL: none (null) */
    char *memory_enforcement; /* "cgroup v2", "cgroup v1", "watchdog"; NULL: field left out */
    /* [hooks] (--prolog, --epilog): why the pre hook failed (the job was then never
     * started: exit_code and signal null), why the post hook failed; NULL: it did not
     * fail, or there was none (field left out). */
    char *prolog_error;
    char *epilog_error;
};

/* An empty record: every field null / zero. */
void exit_record_init(struct exit_record *rec);
/* Frees the record's strings and leaves it as exit_record_init does. */
void exit_record_free(struct exit_record *rec);
/* The exit file's text (caller frees): one compact JSON object and a newline,
 *   {"job_id":N,"exit_code":int|null,"signal":int|null,"oom":bool,"started_at":secs,
 *    "finished_at":secs,"max_rss_kb":int,"error":string|null[,"memory_enforcement":s]
 *    [,"log_lost_bytes":int (> 0 only)][,"prolog_error":s][,"epilog_error":s]}
 * Text that is not valid UTF-8 has its bad bytes replaced by U+FFFD, so that the file
 * always parses. */
char *exit_record_encode(const struct exit_record *rec);
/* exit_record_encode, with the error cut short as far as needed for the text to be at
 * most max bytes (a record written into the reserved exit file; max must leave room for
 * the other fields, a few hundred bytes). */
char *exit_record_encode_max(const struct exit_record *rec, size_t max);
/* Reads an exit file's text (len bytes, need not be NUL-terminated) into *rec
 * (initialised here). Missing or mistyped fields keep their null / zero value. 0, or -1
 * when the text is no JSON object (then *rec is empty). */
int exit_record_decode(const char *text, size_t len, struct exit_record *rec);

/* The lock file never holds more than this many bytes: read this much to see it all. */
#define EXITFILE_LOCK_MAX 8192
/* At most this many "cgroup:" lines are read (the shim writes one; room for more). */
#define EXITFILE_LOCK_MAX_CGROUPS 8
/* The room reserved for the exit record; a record written in place is cut to fit it
 * (exit_record_encode_max). */
#define EXITFILE_RESERVE 16384
/* Where the exit record starts in the lock file; its lines end before. */
#define EXITFILE_RECORD_AT EXITFILE_LOCK_MAX
/* What the lock file says. */
struct exit_lock {
    int64_t pid, start; /* the shim (0: not written yet) */
    /* The cgroups that hold the job's processes (absolute directories, malloc'd). */
    char *cgroups[EXITFILE_LOCK_MAX_CGROUPS];
    size_t n_cgroups;
    int forwarded; /* the first signal the shim passed on for the daemon (0: none) */
    char *error;   /* the shim's own failure, one line (NULL: none) */
    bool job_ran;  /* the failure came after the job ran: its outcome is unknown */
    /* The shim is a supervisor of several jobs (gflow-shim --supervisor): the socket
     * gflowd reaches it on (an absolute path, malloc'd); NULL: a shim of one job. */
    char *supervisor;
};
/* The lock file's content (caller frees): "<pid> <start>\n", "supervisor: <socket>\n"
 * for a supervisor's job, then a "cgroup: <dir>\n"
 * line for each cgroup, "forwarded: <sig>\n" when forwarded, and with an error
 * "error: <error>\n" (or "lost: <error>\n" when job_ran), the error on one line (line
 * breaks and other control characters become spaces) and cut to fit EXITFILE_LOCK_MAX. */
char *exitfile_lock_format(const struct exit_lock *lock);
/* The line a running shim appends for a cgroup of the job (caller frees), or NULL when
 * dir holds a control character (it could not be read back as one line). */
char *exitfile_lock_cgroup_line(const char *dir);
/* The line a running shim appends once it has passed on signal sig (caller frees). */
char *exitfile_lock_forwarded_line(int sig);
/* Reads the lock file's text (len bytes; the lines are what comes before the first NUL
 * and EXITFILE_RECORD_AT) into *lock (strings malloc'd). 0, or -1 when the first line
 * holds no pid (the shim has not written it yet: pid and start are 0; the other lines
 * are still read). */
int exitfile_lock_parse(const char *text, size_t len, struct exit_lock *lock);
/* Reads the exit record in the lock file's text (len bytes, the whole file; the record
 * ends at the first NUL) into *rec (initialised here). 0, or -1 when it holds no
 * complete record (then *rec is empty). */
int exitfile_lock_record(const char *text, size_t len, struct exit_record *rec);
void exitfile_lock_free(struct exit_lock *lock);

/* The job's marker: the name of the variable, and the entry "GFLOW_SHIM_ID=<pid>:<start>"
 * for the shim pid with that start time (caller frees). */
#define EXITFILE_MARKER_VAR "GFLOW_SHIM_ID"
char *exitfile_marker(int64_t shim_pid, int64_t shim_start);
/* The marker of a job of a supervisor, which serves several: "GFLOW_SHIM_ID=<pid>:<start>:<job>"
 * (caller frees). */
char *exitfile_job_marker(int64_t shim_pid, int64_t shim_start, int64_t job_id);

/* How a job ended, as the daemon records it: state, reason code and the reason's detail
 * text (malloc'd; LaunchFailed, ShimLost, PrologFailed and EpilogFailed only, else NULL). The reason's text form is
 * job_reason_text(reason, 0, detail). */
struct exit_verdict {
    enum job_state state;
    enum job_reason reason;
    char *detail;
};
/* Frees the detail. */
void exit_verdict_free(struct exit_verdict *v);
/* The verdict on a job whose shim wrote rec, in this order: a cancel request gives
 * CA CancelledByUser, a time-limit request TO TimeLimit, a preemption PD (queued again,
 * whatever the job's last words); then a prolog_error gives F PrologFailed: <it>; oom
 * gives F OutOfMemory, an error F LaunchFailed: <error>, a signal F Signal, exit code 0
 * CD, anything else F NonZeroExitCode; and an epilog_error then makes any of these but
 * LaunchFailed F EpilogFailed: <it> (the exit code stays the job's). */
struct exit_verdict exit_verdict_of(const struct exit_record *rec, enum job_end_request req);

/* How a shim process ended, as far as the daemon knows (a re-adopted shim is no child of
 * the daemon, so its status is UNKNOWN). From a wait status: WIFEXITED -> EXITED with
 * WEXITSTATUS, WIFSIGNALED -> SIGNALED with WTERMSIG. */
enum shim_end { SHIM_END_UNKNOWN, SHIM_END_EXITED, SHIM_END_SIGNALED };
/* The verdict on a job whose shim ended without an exit file. value is the exit status
 * (EXITED) or the signal (SIGNALED); lock is what its lock file says (may be NULL). A
 * cancel or time-limit request wins as in exit_verdict_of; else the lock's error gives
 * F LaunchFailed: <error> (the shim said why the job could not start), or F ShimLost:
 * <error> when the job ran (its outcome was lost); an exit with
 * SHIM_EXIT_FAIL or SHIM_EXIT_USAGE F LaunchFailed: gflow-shim exited with status N
 * before starting the job; see gflowd.log; any other exit F ShimLost: gflow-shim exited
 * with status N without an exit file; a signal F ShimLost: gflow-shim killed by SIGxxx;
 * UNKNOWN F ShimLost: gflow-shim ended without an exit file. */
struct exit_verdict exit_verdict_lost(enum shim_end how, int value, const struct exit_lock *lock,
                                      enum job_end_request req);
/* The daemon killed n processes left of a job whose shim was gone: a verdict with a
 * detail (ShimLost, LaunchFailed) gets "; its N processes were killed" ("its 1 process
 * was killed") appended. n == 0 and other verdicts are left as they are. */
void exit_verdict_add_killed(struct exit_verdict *v, size_t n);

#endif
