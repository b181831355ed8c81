/* gpuacct: a running job's GPU use, summed up from the GPU reads the daemon makes while it
 * runs (the arithmetic only: the runner feeds it, run/gpuacct_run.c). Per job: its GPUs'
 * utilisation, time-weighted mean and peak; the most memory any one of its GPUs held;
 * the energy its GPUs used; and whether it sat on them (mean under GPUACCT_IDLE_PCT).
 *
 * Each reading counts for the time since the one before it (the first: since the job
 * started), and the last one until the job ends: a step function through the readings.
 * Energy comes from NVML's energy counter (mJ since the driver loaded) where the GPU has
 * one: the difference between readings, per GPU. Where it has none, or the counter went
 * back (a driver reload resets it) or jumped past what a GPU can draw, that stretch is
 * the power reading times its length instead; so are the stretches before the first
 * reading and after the last. */
#ifndef GFLOW_GPUACCT_H
#define GFLOW_GPUACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuinfo.h"

/* A job whose GPUs' mean utilisation stays under this (percent) sat on them. */
#define GPUACCT_IDLE_PCT 5
/* More than this per GPU is not a real counter step (W): counted from the power. */
#define GPUACCT_MAX_WATTS 5000.0

/* One GPU of the job, as read at time t. Unknowns are -1. */
struct gpuacct_reading {
    int gpu;           /* NVML index */
    double t;          /* wall seconds */
    int util;          /* percent */
    int64_t mem_mib;   /* memory the job holds on it */
    int power_w;       /* the GPU's power draw */
    int64_t energy_mj; /* NVML's energy counter */
    double share;      /* the job's part of the GPU's energy (1: alone on it; 0 means 1) */
};

struct gpuacct_gpu {
    int index; /* -1: slot unused */
    double last_t;
    int last_util, last_power;
    int64_t last_mj; /* -1: no counter reading yet */
    double share;
};

struct gpuacct {
    double start;   /* when the job started (wall) */
    double last_t;  /* the latest reading (0: none) */
    double util_ws; /* sum of util x seconds */
    double util_s;  /* seconds the utilisation covers */
    int util_peak;  /* -1: none */
    int64_t mem_peak_mib;
    double energy_j;
    bool energy_known;
    struct gpuacct_gpu gpus[GPUINFO_MAX_GPUS];
    size_t n_gpus;
};

/* What gflow keeps of a job (null in the API when unknown). */
struct gpuacct_figures {
    int util_mean;        /* percent, -1 unknown */
    int util_peak;        /* percent, -1 unknown */
    int64_t mem_peak_mib; /* -1 unknown */
    double energy_wh;     /* < 0 unknown */
    int idle;             /* 1 sat on its GPUs, 0 used them, -1 unknown */
};

void gpuacct_init(struct gpuacct *a, double start);
/* One GPU's reading. Readings of one GPU must come in time order; one older than the
 * GPU's last is ignored. */
void gpuacct_add(struct gpuacct *a, const struct gpuacct_reading *r);
/* The figures as of `until` (the job's end, or now for a running job): the last
 * readings are held until then. */
void gpuacct_figures(const struct gpuacct *a, double until, struct gpuacct_figures *out);
/* Starts from figures recorded before (a daemon restarted under the job): they count as
 * covering the first `secs` seconds from the start; readings count from there on. */
void gpuacct_seed(struct gpuacct *a, const struct gpuacct_figures *f, double secs);
/* The energy (J) of one stretch of `secs` between two readings of a GPU: the counter's
 * difference when both counters are known (>= 0), it did not go back and the step is
 * possible; else the mean of the known power readings times secs; -1 when neither. */
double gpuacct_stretch_joules(int64_t mj0, int64_t mj1, int power0, int power1, double secs);

/* Display forms (malloc'd): energy "0.42 Wh", "12.3 Wh", "412 Wh", "1234 Wh" (sep
 * between number and unit: " " or ""); memory "512 MiB", "61.2 GiB". */
char *gpuacct_energy_text(double wh, const char *sep);
char *gpuacct_mib_text(int64_t mib, const char *sep);

#endif
