/* Timing an op with queue events: warm-up, then runs rotating over several
 * input sets, median of the device-side times. Used by bench and tune. */
#ifndef TESSERA_TOOLS_TIMING_H
#define TESSERA_TOOLS_TIMING_H

#include "problem.h"

#define TIMING_MAX_SAMPLES 64

typedef struct timing_plan {
  int warmup;    /* untimed runs first */
  int min_runs;  /* timed runs at least */
  int max_runs;  /* timed runs at most (<= TIMING_MAX_SAMPLES) */
  double budget; /* stop after min_runs once this many seconds of samples */
} timing_plan;

/* Times problem_run over `sets` (the same problem built from different
 * seeds, used in turn). On success *median_ms holds the median event time.
 * On failure the error is printed as "<what>: ..." and returned. */
tsr_status time_problem(problem *sets, int set_count, tsr_queue *queue, const char *variant,
                        const timing_plan *plan, double *median_ms, int *runs);

#endif /* TESSERA_TOOLS_TIMING_H */
