#include "timing.h"

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

tsr_status time_problem(problem *sets, int set_count, tsr_queue *queue, const char *variant,
                        const timing_plan *plan, double *median_ms, int *runs) {
  for (int i = 0; i < plan->warmup; i++) {
    tsr_status status = problem_run(&sets[i % set_count], queue, variant);
    if (status != TSR_OK) {
      cli_api_error(tsr_op_name(sets[0].spec.op), status);
      return status;
    }
  }
  tsr_status status = tsr_queue_finish(queue);
  if (status != TSR_OK) {
    cli_api_error("tsr_queue_finish", status);
    return status;
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
