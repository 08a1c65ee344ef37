#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* One timed run: events around the op on the queue, so the time is the
 * device's, not the host's submission time. */
static tsr_status timed_run(problem *p, tsr_queue *queue, const char *variant, double *ms) {
  tsr_event *start = NULL, *end = NULL;
  tsr_status status = tsr_event_record(queue, &start);
  if (status != TSR_OK) {
    cli_api_error("tsr_event_record", status);
    return status;
  }
  status = problem_run(p, queue, variant);
  if (status != TSR_OK) {
    cli_api_error(tsr_op_name(p->spec.op), status);
    tsr_event_destroy(start);
    return status;
  }
  status = tsr_event_record(queue, &end);
  if (status == TSR_OK)
    status = tsr_event_wait(end);
  if (status == TSR_OK)
    status = tsr_event_elapsed_ms(start, end, ms);
  if (status != TSR_OK)
    cli_api_error("timing events", status);
  tsr_event_destroy(start);
  tsr_event_destroy(end);
  return status;
}

double timing_warmup_seconds(int device_type) {
  return device_type == TSR_DEVICE_CPU ? 0.0 : 0.2;
}

double timing_now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

tsr_status time_problem(problem *sets, int set_count, tsr_queue *queue, const char *variant,
                        const timing_plan *plan, double *median_ms, int *runs) {
  double warm_start = timing_now_seconds();
  tsr_status status = TSR_OK;
  /* The counted warm-up, then rounds of set_count runs until warmup_seconds
   * have passed (each round waited for, so the clock measures the device). */
  for (int i = 0, round_end = plan->warmup;; i++) {
    if (i == round_end) {
      status = tsr_queue_finish(queue);
      if (status != TSR_OK) {
        cli_api_error("tsr_queue_finish", status);
        return status;
      }
      if (timing_now_seconds() - warm_start >= plan->warmup_seconds)
        break;
      round_end += set_count;
    }
    status = problem_run(&sets[i % set_count], queue, variant);
    if (status != TSR_OK) {
      cli_api_error(tsr_op_name(sets[0].spec.op), status);
      return status;
    }
  }
  double samples[TIMING_MAX_SAMPLES];
  int max_runs = plan->max_runs < TIMING_MAX_SAMPLES ? plan->max_runs : TIMING_MAX_SAMPLES;
  int count = 0;
  double total_ms = 0.0;
  while (count < max_runs && (count < plan->min_runs || total_ms < plan->budget * 1e3)) {
    double ms = 0.0;
    status = timed_run(&sets[count % set_count], queue, variant, &ms);
    if (status != TSR_OK)
      return status;
    samples[count++] = ms;
    total_ms += ms;
  }
  /* A deferred kernel error surfaces at finish: a timing of failed runs is
   * no timing. */
  status = tsr_queue_finish(queue);
  if (status != TSR_OK) {
    cli_api_error("tsr_queue_finish", status);
    return status;
  }
  *median_ms = median(samples, count);
  if (runs != NULL)
    *runs = count;
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
