/* reservation: GPU reservations (gctl reserve) as the scheduling pass sees them, and the
 * pure rules around them: which GPUs a job may not use because of them, when a GPU is
 * next free of them for a job (backfill's plan), a reservation's status, and which GPUs
 * a new reservation gets. No I/O; the daemon keeps the records
 * (src/daemon/policy/reservation_table.c).
 *
 * The rule (enforced in aggregate, over every job): from its start to its end a
 * reservation's GPUs run only its holder's jobs. Before the window a job of another
 * user is not started on them if it would still run at the start: now + its planned
 * runtime (its time limit, or the planning default for a job without one) > start. The
 * holder's jobs may use the reserved GPUs and any other. */
#ifndef GFLOW_RESERVATION_H
#define GFLOW_RESERVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gpu_set;

/* A reservation as the daemon keeps and stores it (every one ever made, history too). */
struct resv {
    int64_t id;
    char *user;
    int gpu_count; /* --gpus N; 0 for --gpu-spec */
    uint64_t gpus; /* NVML indices */
    double start, end, created;
    double cancelled; /* when; 0: not cancelled */
};

/* One reservation for the pass: not cancelled, not over. */
struct scheduler_reservation {
    int64_t id;       /* for messages; the pass does not read it */
    const char *user; /* the holder */
    double start, end;
    uint64_t gpus; /* NVML indices */
};

/* The reservations of a pass, read once (reservation_index_build), so that a job's
 * blocked and held GPUs cost one look per reserved GPU however many reservations there
 * are (20,000 made by an admin must not slow every pass). Per GPU: the earliest start
 * of a window on it and that window's holder, and the earliest start of a window of
 * any other holder there; a job of user u is blocked on GPU i when the earliest window
 * there that is not u's begins before the job would end. */
struct reservation_index {
    uint64_t gpus;               /* NVML indices with a window */
    double first[64];            /* earliest start on GPU i */
    const char *first_user[64];  /* its holder */
    double other[64];            /* earliest start on GPU i of a holder other than
                                  * first_user[i]; INFINITY: none */
    const char *active_user[64]; /* the holder of the window active now on GPU i, or NULL */
};

/* Reads r[0..n) (not cancelled, not over at now; windows on one GPU do not overlap, as
 * reservation_pick_gpus makes them). */
void reservation_index_build(struct reservation_index *x, const struct scheduler_reservation *r,
                             size_t n, double now);

/* The GPUs (NVML indices) a job of `user`, planned to run `runtime` seconds from now,
 * may not start on: those of other users' reservations whose window it would reach. A
 * NULL user holds none. */
uint64_t reservation_blocked(const struct reservation_index *x, const char *user, double now,
                             double runtime);

/* The GPUs (NVML indices) of user's reservations that are active now. */
uint64_t reservation_held(const struct reservation_index *x, const char *user);

/* The earliest time >= t at which a job of `user` running `runtime` seconds fits on
 * GPU `index` without overlapping another user's reservation window there. r[0..n) is
 * sorted by start (as the daemon hands them to the pass): one walk, which stops at the
 * first window that begins after the job would end. */
double reservation_free_from(const struct scheduler_reservation *r, size_t n, int index,
                             const char *user, double t, double runtime);

enum reservation_status {
    RESERVATION_PENDING,
    RESERVATION_ACTIVE,
    RESERVATION_COMPLETED,
    RESERVATION_CANCELLED,
};

/* "pending", "active", "completed", "cancelled" (gflow's, in lower case). */
const char *reservation_status_name(enum reservation_status s);
/* -1 if name is none of them (any case). */
int reservation_status_parse(const char *name);
/* From the times: cancelled (cancelled_at > 0) wins, then pending before start, active
 * until end, completed after. */
enum reservation_status reservation_status_at(double start, double end, double cancelled_at,
                                              double now);

/* The GPUs of a new reservation from start to end, given the reservations it may
 * overlap (others[0..n): their windows and GPUs; cancelled or ended ones left out by the
 * caller) and the machine's GPU indices (`present`): with want_mask (--gpu-spec) those
 * GPUs, each present and reserved by none of the overlapping ones; else `count` GPUs
 * (--gpus N) among the free ones, the highest indices first (so that the low ones,
 * which gpualloc fills first, stay with the jobs). 0; -1 with *err (one line, malloc'd)
 * for a request this machine cannot meet; -2 with *err when other reservations hold the
 * GPUs in that window. */
int reservation_pick_gpus(const struct scheduler_reservation *others, size_t n, double start,
                          double end, uint64_t present, uint64_t want_mask, int count,
                          uint64_t *out, char **err);

#endif
