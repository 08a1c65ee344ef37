/* SPDX-License-Identifier: Apache-2.0 */
/* Timing an op with queue events: warm-up, then runs rotating over several
 * input sets, median of the device-side times. Used by bench and tune. */
#ifndef TESSERA_TOOLS_TIMING_H
#define TESSERA_TOOLS_TIMING_H

#include <stdbool.h>

#include "problem.h"

#define TIMING_MAX_SAMPLES 64

typedef struct timing_plan {
  int warmup;    /* untimed runs first */
  int min_runs;  /* timed runs at least */
  int max_runs;  /* timed runs at most (<= TIMING_MAX_SAMPLES) */
  double budget; /* stop after min_runs once this many seconds of samples */
  /* after the warm-up runs, more untimed runs until this many seconds have
   * passed: a GPU idle while inputs were built runs at a fraction of its
   * clock for the first tens of milliseconds of work (Vulkan on the H100:
   * 675-780 MHz against 1980 MHz loaded, timings 2.5x long) */
  double warmup_seconds;
} timing_plan;

/* How samples are taken, for any timed thing: `run(context, i)` queues a run
 * of input set i % set_count; `record(context, slot)` records event `slot`
 * (0 .. 2 * TIMING_BATCH - 1) after everything queued so far; `elapsed`
 * waits for event `to` and gives the time between two events. Each returns
 * false after reporting why. */
enum { TIMING_BATCH = 8 };
typedef struct timing_ops {
  void *context;
  bool (*run)(void *context, int i);
  bool (*record)(void *context, int slot);
  bool (*elapsed)(void *context, int from, int to, double *ms);
} timing_ops;

/* The plan's timed runs (after its warm-up, which the caller does): at least
 * min_runs, then until budget seconds of samples or max_runs. Fills
 * samples[0 .. *count). */
bool timing_sample(const timing_plan *plan, int set_count, const timing_ops *ops, double *samples,
                   int *count);

/* Seconds of back-to-back warm-up a device of this type gets (GPUs: 0.2). */
double timing_warmup_seconds(int device_type);
/* The warm-up of a plan, for any timed thing: plan->warmup runs, then
 * rounds of set_count runs until plan->warmup_seconds have passed since
 * the first round ended (its one-time costs, such as pipeline builds, warm
 * nothing), each round waited for (`finish`), so that the clock measures
 * the device.
 * `run(context, i)` runs input set i % set_count. False as soon as `run` or
 * `finish` fails (they report why). */
bool timing_warm_up(const timing_plan *plan, int set_count, bool (*run)(void *context, int i),
                    bool (*finish)(void *context), void *context);

/* What the timed runs gave: the median is the figure reported, min and max
 * show how far the samples spread (a disturbed machine widens it). */
typedef struct timing_stats {
  double median_ms, min_ms, max_ms;
  int runs;
} timing_stats;

/* The statistics of `count` samples (sorts them in place). */
void timing_stats_of(double *samples, int count, timing_stats *stats);

/* Times problem_run over `sets` (the same problem built from different
 * seeds, used in turn). On success *stats holds the median, least and
 * greatest event time and the number of runs. On failure the error is
 * printed as "<what>: ..." and returned. */
tsr_status time_problem(problem *sets, int set_count, tsr_queue *queue, const char *variant,
                        const timing_plan *plan, timing_stats *stats);

/* The latency of one synchronous call on an idle device: `idle_ms` of no
 * work (past every poll window), then problem_run + tsr_queue_finish on the
 * host clock; up to TIMING_IDLE_CALLS samples, fewer once budget_seconds
 * are spent (one at least). Prints and returns the error of a failed call. */
enum { TIMING_IDLE_CALLS = 5 };
tsr_status time_idle_call(problem *sets, int set_count, tsr_queue *queue, double idle_ms,
                          double budget_seconds, timing_stats *stats);

/* How busy the rest of the machine was while something was timed: the CPU
 * time every process used (from /proc/stat, including time the hypervisor
 * gave to other guests) minus this process's and its waited-for children's,
 * over the wall time. On a machine shared by several people it tells
 * whether a timing was disturbed. */
typedef struct load_mark {
  double wall;         /* seconds */
  double machine_busy; /* CPU seconds, all processes; NaN without /proc/stat */
  double own;          /* CPU seconds, this process and its waited-for children */
  double self;         /* CPU seconds, this process alone */
} load_mark;

void load_mark_now(load_mark *mark);
/* Cores' worth of CPU other processes used on average since `mark`; NaN
 * when unknown. Resolution is the kernel's tick (10 ms per core), so short
 * windows read coarse. */
double load_others_since(const load_mark *mark);
/* Cores' worth of CPU this process alone (not its children) used since
 * `mark`: while a child is timed, anything above ~0 is this process's own
 * threads competing with it. NaN when unknown. */
double load_self_since(const load_mark *mark);

#endif /* TESSERA_TOOLS_TIMING_H */
