/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU device's synchronous calls cost their work, not thread wake-ups:
 * - a small op (softmax and rmsnorm f32, 64 x 1024) called and finished in a
 *   loop takes, with the default thread count, no more than a generous
 *   multiple of the same call on a one-thread device (TESSERA_CPU_THREADS=1),
 *   back to back and after 5 ms idle (past the poll window, every thread
 *   parked). Both devices are timed in turn in one process, so drift hits
 *   both. The bounds are wide on purpose: a pool that waits for its parked
 *   workers to wake (hundreds of microseconds in a virtual machine) fails
 *   them, noise does not. The figures themselves belong to `tessera bench`
 *   (its idle-call column);
 * - every call's result is right (softmax rows against a double reference);
 * - events on a parked queue are reached, in order, by the thread that waits;
 * - an idle context with a CPU queue uses almost no CPU once the poll window
 *   has passed (under 5% of a core over a second);
 * - TESSERA_CPU_POLL_US=0 (park at once) gives the same results.
 * Exit 0 on success. `cpu_test_wakeup --table` prints the figures instead:
 * softmax and rmsnorm on 32, 64 and 1024 rows of 1024, back to back and
 * after 5 ms idle, one thread against the default, and an idle device's CPU
 * use over 10 s (docs/PERFORMANCE.md quotes it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tessera/tessera.h>

enum { MAX_ROWS = 1024, COLS = 1024, MAX_CALLS = 101 };

/* The rows of the op the rigs run: 64 in the test, each size in the table. */
static int rows = 64;

static int failures;

#define EXPECT(condition, ...)                                                                     \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #condition);                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void die(const char *what, tsr_status status) {
  fprintf(stderr, "test_wakeup: %s: %s: %s\n", what, tsr_status_name(status), tsr_last_error());
  exit(1);
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void sleep_us(long microseconds) {
  struct timespec t = {microseconds / 1000000, (microseconds % 1000000) * 1000};
  nanosleep(&t, NULL);
}

static double cpu_seconds(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
         (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *values, int count) {
  qsort(values, (size_t)count, sizeof *values, compare_doubles);
  return values[count / 2];
}

/* One CPU device with a queue and the buffers of both ops. */
typedef struct rig {
  const char *name;
  tsr_context *context;
  tsr_device *device;
  tsr_queue *queue;
  tsr_buffer *x, *y, *weight;
} rig;

static float input[MAX_ROWS * COLS], weights[COLS];

/* Opens a context whose CPU plugin reads `threads` and `poll_us` (NULL: the
 * defaults) from the environment at init. */
static void rig_open(rig *r, const char *name, const char *threads, const char *poll_us) {
  r->name = name;
  if (threads)
    setenv("TESSERA_CPU_THREADS", threads, 1);
  else
    unsetenv("TESSERA_CPU_THREADS");
  if (poll_us)
    setenv("TESSERA_CPU_POLL_US", poll_us, 1);
  else
    unsetenv("TESSERA_CPU_POLL_US");
  tsr_status status = tsr_context_create(NULL, &r->context);
  if (status == TSR_OK)
    status = tsr_device_open(r->context, "cpu", &r->device);
  if (status == TSR_OK)
    status = tsr_queue_create(r->device, &r->queue);
  if (status == TSR_OK)
    status = tsr_buffer_create(r->device, sizeof input, &r->x);
  if (status == TSR_OK)
    status = tsr_buffer_create(r->device, sizeof input, &r->y);
  if (status == TSR_OK)
    status = tsr_buffer_create(r->device, sizeof weights, &r->weight);
  if (status == TSR_OK)
    status = tsr_buffer_write(r->queue, r->x, 0, input, sizeof input);
  if (status == TSR_OK)
    status = tsr_buffer_write(r->queue, r->weight, 0, weights, sizeof weights);
  if (status == TSR_OK)
    status = tsr_queue_finish(r->queue);
  if (status != TSR_OK)
    die(name, status);
}

static void rig_close(rig *r) {
  tsr_buffer_destroy(r->x);
  tsr_buffer_destroy(r->y);
  tsr_buffer_destroy(r->weight);
  tsr_queue_destroy(r->queue);
  tsr_context_destroy(r->context);
}

/* Queues softmax (op 0) or rmsnorm (op 1) of x into y. */
static void rig_queue_op(rig *r, int op) {
  int64_t shape[2] = {rows, COLS}, weight_shape[1] = {COLS};
  tsr_tensor x = tsr_tensor_make(r->x, 0, TSR_DTYPE_F32, 2, shape);
  tsr_tensor y = tsr_tensor_make(r->y, 0, TSR_DTYPE_F32, 2, shape);
  tsr_status status;
  if (op == 0) {
    tsr_softmax_desc desc = TSR_SOFTMAX_DESC_INIT;
    desc.x = x;
    desc.y = y;
    status = tsr_softmax(r->queue, &desc);
  } else {
    tsr_rmsnorm_desc desc = TSR_RMSNORM_DESC_INIT;
    desc.x = x;
    desc.y = y;
    desc.weight = tsr_tensor_make(r->weight, 0, TSR_DTYPE_F32, 1, weight_shape);
    status = tsr_rmsnorm(r->queue, &desc);
  }
  if (status != TSR_OK)
    die(op == 0 ? "tsr_softmax" : "tsr_rmsnorm", status);
}

/* Microseconds of one call + tsr_queue_finish. */
static double timed_call(rig *r, int op) {
  double start = now_us();
  rig_queue_op(r, op);
  tsr_status status = tsr_queue_finish(r->queue);
  double elapsed = now_us() - start;
  if (status != TSR_OK)
    die("tsr_queue_finish", status);
  return elapsed;
}

/* y of the last softmax against a double reference. */
static void expect_softmax_right(rig *r) {
  static float y[MAX_ROWS * COLS];
  tsr_status status = tsr_buffer_read(r->queue, r->y, 0, y, (size_t)rows * COLS * sizeof *y);
  if (status != TSR_OK)
    die("tsr_buffer_read", status);
  int wrong = 0;
  for (int i = 0; i < rows; i++) {
    const float *row = input + (size_t)i * COLS;
    double peak = row[0], sum = 0.0;
    for (int j = 1; j < COLS; j++)
      peak = row[j] > peak ? row[j] : peak;
    for (int j = 0; j < COLS; j++)
      sum += exp((double)row[j] - peak);
    for (int j = 0; j < COLS; j++) {
      double want = exp((double)row[j] - peak) / sum;
      wrong += !(fabs((double)y[(size_t)i * COLS + j] - want) <= 1e-6 + 1e-5 * want);
    }
  }
  EXPECT(wrong == 0, "%s: %d softmax values differ from the reference", r->name, wrong);
}

/* Median microseconds of `count` synchronous calls on each rig, in turn,
 * each after `idle_us` of no work. */
static void time_both(rig *one, rig *pooled, int op, int count, long idle_us, double *one_us,
                      double *pooled_us) {
  double a[MAX_CALLS], b[MAX_CALLS];
  timed_call(one, op); /* first touches */
  timed_call(pooled, op);
  for (int i = 0; i < count; i++) {
    for (int which = 0; which < 2; which++) {
      if (idle_us > 0)
        sleep_us(idle_us);
      double t = timed_call(which ? pooled : one, op);
      (which ? b : a)[i] = t;
    }
  }
  *one_us = median(a, count);
  *pooled_us = median(b, count);
}

static void check_latency(rig *one, rig *pooled) {
  static const char *names[2] = {"softmax", "rmsnorm"};
  for (int op = 0; op < 2; op++) {
    double t1, tn;
    time_both(one, pooled, op, 61, 0, &t1, &tn);
    printf("%s f32 %dx%d, back to back: %.1f us with one thread, %.1f us with the default\n",
           names[op], rows, COLS, t1, tn);
    EXPECT(tn <= 3.0 * t1 + 50.0, "%s back to back: %.1f us against %.1f us with one thread",
           names[op], tn, t1);
    time_both(one, pooled, op, 9, 5000, &t1, &tn);
    printf("%s f32 %dx%d, after 5 ms idle: %.1f us with one thread, %.1f us with the default\n",
           names[op], rows, COLS, t1, tn);
    EXPECT(tn <= 3.0 * t1 + 300.0, "%s after 5 ms idle: %.1f us against %.1f us with one thread",
           names[op], tn, t1);
  }
  rig_queue_op(pooled, 0);
  if (tsr_queue_finish(pooled->queue) != TSR_OK)
    die("tsr_queue_finish", TSR_ERROR_BACKEND);
  expect_softmax_right(pooled);
}

/* Events on a queue whose worker has parked: the waiting thread reaches
 * them; the times are ordered and the op between them ran. */
static void check_events(rig *r) {
  sleep_us(20000);
  tsr_event *start = NULL, *end = NULL;
  tsr_status status = tsr_event_record(r->queue, &start);
  if (status == TSR_OK) {
    rig_queue_op(r, 0);
    status = tsr_event_record(r->queue, &end);
  }
  if (status != TSR_OK)
    die("tsr_event_record", status);
  double ms = -1.0;
  status = tsr_event_wait(end);
  if (status == TSR_OK)
    status = tsr_event_elapsed_ms(start, end, &ms);
  EXPECT(status == TSR_OK && ms >= 0.0 && ms < 1000.0, "%s: event elapsed %g ms (%s)", r->name, ms,
         tsr_status_name(status));
  tsr_event_destroy(start);
  tsr_event_destroy(end);
  expect_softmax_right(r);
}

/* An idle context polls for its window and then parks: over `seconds` it
 * takes a few milliseconds of CPU at most. */
static void check_idle_cost(rig *r, int seconds) {
  timed_call(r, 0);
  sleep_us(50000); /* past the poll window */
  double before = cpu_seconds();
  sleep_us(1000000L * seconds);
  double used = cpu_seconds() - before;
  printf("%s: %.1f ms of CPU over %d s idle (%.3f%% of a core)\n", r->name, used * 1e3, seconds,
         used * 100.0 / seconds);
  EXPECT(used < 0.05 * seconds, "%s: an idle device used %.3f s of CPU in %d s", r->name, used,
         seconds);
}

/* The figures: medians of 101 calls back to back and 21 after 5 ms idle. */
static void print_table(rig *one, rig *pooled) {
  static const char *names[2] = {"softmax", "rmsnorm"};
  static const int sizes[3] = {32, 64, 1024};
  printf("%-8s %5s | %10s %10s %6s | %10s %10s %6s\n", "op f32", "rows", "1 thread", "default",
         "ratio", "idle: 1 th", "default", "ratio");
  for (int op = 0; op < 2; op++) {
    for (int i = 0; i < 3; i++) {
      rows = sizes[i];
      double w1, wn, i1, in;
      time_both(one, pooled, op, 101, 0, &w1, &wn);
      time_both(one, pooled, op, 21, 5000, &i1, &in);
      printf("%-8s %5d | %8.1f us %8.1f us %6.2f | %8.1f us %8.1f us %6.2f\n", names[op], rows, w1,
             wn, wn / w1, i1, in, in / i1);
    }
  }
  check_idle_cost(pooled, 10);
}

int main(int argc, char **argv) {
  for (int i = 0; i < MAX_ROWS * COLS; i++)
    input[i] = (float)((i * 37) % 101) / 25.0f - 2.0f;
  for (int i = 0; i < COLS; i++)
    weights[i] = 1.0f + (float)(i % 7) / 8.0f;

  rig one, pooled;
  rig_open(&one, "one thread", "1", NULL);
  rig_open(&pooled, "default threads", NULL, NULL);
  if (argc > 1 && strcmp(argv[1], "--table") == 0) {
    print_table(&one, &pooled);
    rig_close(&pooled);
    rig_close(&one);
    return failures ? 1 : 0;
  }
  check_latency(&one, &pooled);
  check_events(&pooled);
  check_events(&one);
  check_idle_cost(&pooled, 1);
  rig_close(&pooled);
  rig_close(&one);

  rig parked;
  rig_open(&parked, "TESSERA_CPU_POLL_US=0", NULL, "0");
  for (int i = 0; i < 5; i++)
    timed_call(&parked, 0);
  expect_softmax_right(&parked);
  check_events(&parked);
  rig_close(&parked);

  if (failures)
    fprintf(stderr, "test_wakeup: %d failure(s)\n", failures);
  else
    printf("test_wakeup: ok\n");
  return failures ? 1 : 0;
}
