/* trace: the job traces gflow-replay replays: a CSV file read by its header's column
 * names, or a seeded synthetic lab trace, with arrivals compressible by a load factor.
 * A trace is plain records (no struct job): each replay makes its own jobs from it. */
#ifndef GFLOW_REPLAY_TRACE_H
#define GFLOW_REPLAY_TRACE_H

#include <stdint.h>
#include <stdio.h>

struct replay_rec {
    double submit;     /* seconds from the trace's start */
    double runtime;    /* seconds the job runs if nothing stops it */
    double time_limit; /* seconds; 0: none */
    int gpus;
    int user, project; /* indices into the trace's names; -1: not given */
};

struct replay_trace {
    struct replay_rec *recs; /* in submission order (replay_trace_sort) */
    size_t n, cap;
    char **names; /* user and project names, each once */
    size_t n_names, cap_names;
};

void replay_trace_init(struct replay_trace *t);
void replay_trace_free(struct replay_trace *t);
/* Appends the jobs of a CSV trace read from f (`source` names it in messages). The first
 * line is the header; columns are found by name: submit_s, gpus and runtime_s are needed,
 * time_limit_s, user and project are optional (an empty field: not given), others are
 * ignored. No quoting. 0, or -1 with *err ("FILE:LINE: what is wrong; how to fix",
 * malloc'd). */
int replay_trace_read(struct replay_trace *t, FILE *f, const char *source, char **err);
/* replay_trace_read of the file at path; -1 with *err when it cannot be opened too. */
int replay_trace_load(struct replay_trace *t, const char *path, char **err);
/* Appends n jobs of a seeded synthetic lab trace (docs/replay.md): 5 users, mostly
 * 1-GPU jobs with some 2, 4 and 8, lognormal run times, one user submitting in bursts;
 * arrivals scaled so that the offered load on 8 GPUs is REPLAY_SYNTH_LOAD. Sorts t. */
#define REPLAY_SYNTH_LOAD 0.7
void replay_trace_synthetic(struct replay_trace *t, size_t n, uint64_t seed);
/* Divides every submission time by load (> 0): load 2 = arrivals twice as dense. */
void replay_trace_compress(struct replay_trace *t, double load);
/* What-ifs on the users' estimates: the time limits as the trace gives them, each job's
 * own run time (perfect estimates), or none at all. */
enum replay_limits { REPLAY_LIMITS_TRACE, REPLAY_LIMITS_EXACT, REPLAY_LIMITS_NONE };
void replay_trace_set_limits(struct replay_trace *t, enum replay_limits limits);
/* Sorts the jobs by submission time, keeping the file's order among equal times. */
void replay_trace_sort(struct replay_trace *t);

#endif
