/* SPDX-License-Identifier: Apache-2.0 */
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

bool timing_sample(const timing_plan *plan, int set_count, const timing_ops *ops, double *samples,
                   int *count) {
  int max_runs = plan->max_runs < TIMING_MAX_SAMPLES ? plan->max_runs : TIMING_MAX_SAMPLES;
  double total_ms = 0.0;
  *count = 0;
  while (*count < max_runs && (*count < plan->min_runs || total_ms < plan->budget * 1e3)) {
    /* Runs go back to back in batches, each timed by its own pair of
     * events, after an untimed lead-in run, so that a run's start event
     * waits behind device work instead of firing while the host is still
     * launching: a sample is the device's time per call in a stream of
     * calls, not the host's launch latency. Every device is timed so
     * (CPU queue workers run a stream of calls without waking up), and
     * cuBLASLt the same way; what one call costs an application that waits
     * for it is time_idle_call's. */
    int batch = max_runs - *count;
    if (batch > TIMING_BATCH)
      batch = TIMING_BATCH;
    /* The lead-in uses the set before the first timed run's, so that
     * consecutive runs still rotate. */
    if (!ops->run(ops->context, *count + set_count - 1))
      return false;
    for (int b = 0; b < batch; b++)
      if (!ops->record(ops->context, 2 * b) || !ops->run(ops->context, *count + b) ||
          !ops->record(ops->context, 2 * b + 1))
        return false;
    for (int b = 0; b < batch; b++) {
      double ms = 0.0;
      if (!ops->elapsed(ops->context, 2 * b, 2 * b + 1, &ms))
        return false;
      samples[(*count)++] = ms;
      total_ms += ms;
    }
  }
  return true;
}

double timing_warmup_seconds(int device_type) {
  return device_type == TSR_DEVICE_CPU ? 0.0 : 0.2;
}

bool timing_warm_up(const timing_plan *plan, int set_count, bool (*run)(void *context, int i),
                    bool (*finish)(void *context), void *context) {
  /* The seconds count from the end of the first round, which carries the
   * first call's one-time costs (variant choice, pipeline or program builds,
   * scratch). The device idles through them; counted in, they can use up
   * the whole warm-up, and the timed runs then meet a device still cold
   * from seconds of input filling (suspected for Vulkan's split-KV decode on
   * the H200, whose first call builds three pipelines: bench 1.83 ms a
   * call, tune 0.354 after other variants had run). */
  double start = 0.0;
  for (int i = 0, round_end = plan->warmup;; i++) {
    if (i == round_end) {
      if (!finish(context))
        return false;
      double now = now_seconds();
      if (i == plan->warmup)
        start = now;
      if (now - start >= plan->warmup_seconds)
        return true;
      round_end += set_count;
    }
    if (!run(context, i))
      return false;
  }
}

/* time_problem's warm-up and timed runs (timing_warm_up, timing_ops):
 * tessera's runs, and its events in slots. */
typedef struct problem_runner {
  problem *sets;
  int set_count;
  tsr_queue *queue;
  const char *variant;
  tsr_event *events[2 * TIMING_BATCH];
  tsr_status status;
} problem_runner;

static bool runner_run(void *context, int i) {
  problem_runner *r = context;
  r->status = problem_run(&r->sets[i % r->set_count], r->queue, r->variant);
  if (r->status != TSR_OK)
    cli_api_error(tsr_op_name(r->sets[0].spec.op), r->status);
  return r->status == TSR_OK;
}

static bool runner_finish(void *context) {
  problem_runner *r = context;
  r->status = tsr_queue_finish(r->queue);
  if (r->status != TSR_OK)
    cli_api_error("tsr_queue_finish", r->status);
  return r->status == TSR_OK;
}

static bool runner_record(void *context, int slot) {
  problem_runner *s = context;
  tsr_event_destroy(s->events[slot]);
  s->events[slot] = NULL;
  s->status = tsr_event_record(s->queue, &s->events[slot]);
  if (s->status != TSR_OK)
    cli_api_error("tsr_event_record", s->status);
  return s->status == TSR_OK;
}

static bool runner_elapsed(void *context, int from, int to, double *ms) {
  problem_runner *s = context;
  s->status = tsr_event_wait(s->events[to]);
  if (s->status == TSR_OK)
    s->status = tsr_event_elapsed_ms(s->events[from], s->events[to], ms);
  if (s->status != TSR_OK)
    cli_api_error("timing events", s->status);
  return s->status == TSR_OK;
}

void timing_stats_of(double *samples, int count, timing_stats *stats) {
  stats->median_ms = median(samples, count); /* sorts */
  stats->min_ms = count > 0 ? samples[0] : NAN;
  stats->max_ms = count > 0 ? samples[count - 1] : NAN;
  stats->runs = count;
}

tsr_status time_problem(problem *sets, int set_count, tsr_queue *queue, const char *variant,
                        const timing_plan *plan, timing_stats *stats) {
  problem_runner runner = {sets, set_count, queue, variant, {NULL}, TSR_OK};
  if (!timing_warm_up(plan, set_count, runner_run, runner_finish, &runner))
    return runner.status;
  timing_ops ops = {&runner, runner_run, runner_record, runner_elapsed};
  double samples[TIMING_MAX_SAMPLES];
  int count = 0;
  bool sampled = timing_sample(plan, set_count, &ops, samples, &count);
  for (int i = 0; i < 2 * TIMING_BATCH; i++)
    tsr_event_destroy(runner.events[i]);
  if (!sampled)
    return runner.status;
  /* A deferred kernel error surfaces at finish: a timing of failed runs is
   * no timing. */
  if (!runner_finish(&runner))
    return runner.status;
  timing_stats_of(samples, count, stats);
  return TSR_OK;
}

tsr_status time_idle_call(problem *sets, int set_count, tsr_queue *queue, double idle_ms,
                          double budget_seconds, timing_stats *stats) {
  double samples[TIMING_IDLE_CALLS];
  int count = 0;
  double spent = 0.0;
  while (count < TIMING_IDLE_CALLS && (count == 0 || spent < budget_seconds)) {
    struct timespec idle = {(time_t)(idle_ms / 1e3), (long)(fmod(idle_ms, 1e3) * 1e6)};
    nanosleep(&idle, NULL);
    double start = now_seconds();
    tsr_status status = problem_run(&sets[count % set_count], queue, NULL);
    if (status == TSR_OK)
      status = tsr_queue_finish(queue);
    double seconds = now_seconds() - start;
    if (status != TSR_OK) {
      cli_api_error(tsr_op_name(sets[0].spec.op), status);
      return status;
    }
    samples[count++] = seconds * 1e3;
    spent += seconds + idle_ms * 1e-3;
  }
  timing_stats_of(samples, count, stats);
  return TSR_OK;
}

/* Busy CPU seconds of the whole machine: the first line of /proc/stat,
 * "cpu user nice system idle iowait irq softirq steal ...", in ticks. */
static double machine_busy_seconds(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (f == NULL)
    return NAN;
  unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
                     steal = 0;
  int fields = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system,
                      &idle, &iowait, &irq, &softirq, &steal);
  fclose(f);
  long ticks = sysconf(_SC_CLK_TCK);
  if (fields < 4 || ticks <= 0)
    return NAN;
  return (double)(user + nice + system + irq + softirq + steal) / (double)ticks;
}

static double seconds_of(const struct timeval *t) {
  return (double)t->tv_sec + (double)t->tv_usec * 1e-6;
}

static double cpu_seconds(int who) {
  struct rusage usage;
  if (getrusage(who, &usage) != 0)
    return NAN;
  return seconds_of(&usage.ru_utime) + seconds_of(&usage.ru_stime);
}

void load_mark_now(load_mark *mark) {
  mark->wall = now_seconds();
  mark->machine_busy = machine_busy_seconds();
  mark->self = cpu_seconds(RUSAGE_SELF);
  mark->own = mark->self + cpu_seconds(RUSAGE_CHILDREN);
}

double load_self_since(const load_mark *mark) {
  double wall = now_seconds() - mark->wall;
  double used = cpu_seconds(RUSAGE_SELF) - mark->self;
  return wall > 0.0 && !isnan(used) ? used / wall : NAN;
}

double load_others_since(const load_mark *mark) {
  load_mark now;
  load_mark_now(&now);
  double wall = now.wall - mark->wall;
  if (!(wall > 0.0))
    return NAN;
  if (isnan(now.machine_busy) || isnan(mark->machine_busy) || isnan(now.own) || isnan(mark->own))
    return NAN;
  double others = (now.machine_busy - mark->machine_busy) - (now.own - mark->own);
  /* Tick rounding can make it slightly negative. */
  return others > 0.0 ? others / wall : 0.0;
}
