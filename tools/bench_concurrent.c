/* SPDX-License-Identifier: Apache-2.0 */
/* tessera bench --concurrent: every row again on all selected devices at
 * once, one thread per device, each with its own queue and inputs, started
 * together. A device's rate beside its solo rate shows what sharing the
 * machine costs (the host, PCIe, a lock in a driver or in tessera): on a
 * server with several GPUs each should keep its solo rate. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "timing.h"

typedef struct device_run {
  tsr_device *device;
  const tsr_device_info *info;
  const problem_spec *spec;
  const bench_options *options;
  pthread_barrier_t *start;
  double ms; /* median; NaN when it failed */
  char error[256];
} device_run;

/* One device's share: build its inputs, wait for the others, time. */
static void *device_main(void *argument) {
  device_run *run = argument;
  run->ms = NAN;
  tsr_queue *queue = NULL;
  problem sets[2];
  memset(sets, 0, sizeof sets);
  int built = 0;
  tsr_status status = tsr_queue_create(run->device, &queue);
  problem_build_options build = {0, false, NULL};
  for (; status == TSR_OK && built < 2; built++) {
    status =
        problem_build(&sets[built], run->spec, run->device, queue, bench_input_seed(built), &build);
    if (status != TSR_OK)
      snprintf(run->error, sizeof run->error, "%s", sets[built].error);
  }
  if (status != TSR_OK && run->error[0] == '\0')
    snprintf(run->error, sizeof run->error, "%s", tsr_last_error());
  /* Every thread reaches the barrier, built or not, so none waits forever. */
  pthread_barrier_wait(run->start);
  if (status == TSR_OK) {
    timing_plan plan = bench_plan_for(run->spec, run->options->short_run, run->info->type);
    timing_stats stats;
    status = time_problem(sets, 2, queue, NULL, &plan, &stats);
    if (status == TSR_OK)
      run->ms = stats.median_ms;
    else
      snprintf(run->error, sizeof run->error, "%s", tsr_last_error());
  }
  for (int i = 0; i < built; i++)
    problem_destroy(&sets[i]);
  tsr_queue_destroy(queue);
  return NULL;
}

static double rate_of(const problem_spec *spec, double ms) {
  double flops = problem_flops(spec);
  return flops > 0.0 ? flops / (ms * 1e-3) / 1e12 : problem_bytes(spec) / (ms * 1e-3) / 1e9;
}

int bench_concurrent(const device_selection *selection, const problem_spec *specs, int spec_count,
                     const bench_row *rows, const bool *present, const bench_options *o) {
  int failures = 0;
  uint32_t n = selection->count;
  printf("\nall devices at once (--concurrent: one thread and queue per device, started "
         "together)\n");
  printf("  %-13s %-5s %-22s %-10s %12s %12s %6s\n", "op", "dtype", "shape", "device", "solo",
         "together", "ratio");
  for (int i = 0; i < spec_count; i++) {
    device_run runs[MAX_SELECTED_DEVICES];
    pthread_t threads[MAX_SELECTED_DEVICES];
    bool started[MAX_SELECTED_DEVICES];
    uint32_t count = 0;
    for (uint32_t d = 0; d < n; d++) {
      size_t cell = (size_t)d * (size_t)spec_count + (size_t)i;
      if (!present[cell] || rows[cell].failed)
        continue;
      runs[count] = (device_run){.device = selection->devices[d],
                                 .info = &selection->infos[d],
                                 .spec = &specs[i],
                                 .options = o};
      count++;
    }
    if (count < 2)
      continue;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, count);
    for (uint32_t r = 0; r < count; r++) {
      runs[r].start = &start;
      started[r] = pthread_create(&threads[r], NULL, device_main, &runs[r]) == 0;
      if (!started[r]) {
        /* Too few threads for the barrier: stand in for this one's share. */
        snprintf(runs[r].error, sizeof runs[r].error, "no thread could be started");
        runs[r].ms = NAN;
        pthread_barrier_wait(&start);
      }
    }
    for (uint32_t r = 0; r < count; r++)
      if (started[r])
        pthread_join(threads[r], NULL);
    pthread_barrier_destroy(&start);
    char shape[96];
    problem_format_shape(&specs[i], shape, sizeof shape);
    const char *unit = problem_flops(&specs[i]) > 0.0 ? "TFLOP/s" : "GB/s";
    for (uint32_t r = 0; r < count; r++) {
      uint32_t d = 0;
      while (selection->devices[d] != runs[r].device)
        d++;
      const bench_row *solo = &rows[(size_t)d * (size_t)spec_count + (size_t)i];
      if (!isfinite(runs[r].ms)) {
        printf("  %-13s %-5s %-22s %-10s failed: %s\n", tsr_op_name(specs[i].op),
               tsr_dtype_name(specs[i].dtype), shape, runs[r].info->selector, runs[r].error);
        failures++;
        continue;
      }
      double alone = rate_of(&specs[i], solo->ms), together = rate_of(&specs[i], runs[r].ms);
      printf("  %-13s %-5s %-22s %-10s %8.3g %-3s %8.3g %-3s %6.2f\n", tsr_op_name(specs[i].op),
             tsr_dtype_name(specs[i].dtype), shape, runs[r].info->selector, alone,
             unit[0] == 'T' ? "TF" : "GB", together, unit[0] == 'T' ? "TF" : "GB",
             together / alone);
    }
  }
  printf("  (rates in TFLOP/s (TF) or GB/s (GB); ratio: together / solo, 1.00 = no cost)\n");
  return failures;
}
