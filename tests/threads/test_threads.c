/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One device used from many threads, as the header allows: worker threads
 * each run ops on a queue of their own and check every result against a
 * double-precision computation, while churn threads create and destroy
 * buffers, queues and events, and destroy buffers the workers handed over
 * with work still queued on them (a buffer destroyed on one thread while its
 * queue runs on another). A second case uses destroyed buffers on purpose:
 * every call must refuse them with TSR_ERROR_INVALID_VALUE.
 *
 *   test_threads DEVICE concurrency [workers churners iterations]
 *   test_threads DEVICE destroy_while_recording [ops]
 *   test_threads DEVICE use_after_destroy
 *
 * Exit 0: passed; 1: a failure (printed); 77: DEVICE is not present.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

static atomic_int failures;
static atomic_long checked_values;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    if (atomic_fetch_add(&failures, 1) < 20) {                                                     \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

/* Calls that must succeed; on failure the thread's last error is printed. */
static bool ok_call(tsr_status status, const char *expression, int line) {
  if (status == TSR_OK)
    return true;
  if (atomic_fetch_add(&failures, 1) < 20)
    fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, line, expression, tsr_last_error());
  return false;
}
#define OK(expr) ok_call((expr), #expr, __LINE__)

/* ---- deterministic inputs ---- */

static uint32_t next_random(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

static void fill_random(float *data, size_t n, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++)
    data[i] = (float)((double)next_random(&state) / (double)(1u << 24) * 4.0 - 2.0);
}

/* ---- buffers handed from workers to churn threads ---- */

enum { HANDOFF_CAPACITY = 256 };

typedef struct handoff {
  pthread_mutex_t lock;
  tsr_buffer *buffers[HANDOFF_CAPACITY];
  int count;
} handoff;

static bool handoff_push(handoff *h, tsr_buffer *buffer) {
  pthread_mutex_lock(&h->lock);
  bool pushed = h->count < HANDOFF_CAPACITY;
  if (pushed)
    h->buffers[h->count++] = buffer;
  pthread_mutex_unlock(&h->lock);
  return pushed;
}

static tsr_buffer *handoff_pop(handoff *h) {
  pthread_mutex_lock(&h->lock);
  tsr_buffer *buffer = h->count > 0 ? h->buffers[--h->count] : NULL;
  pthread_mutex_unlock(&h->lock);
  return buffer;
}

typedef struct shared {
  tsr_device *device;
  int iterations;
  handoff handoff;
  atomic_int workers_running;
} shared;

typedef struct worker_arg {
  shared *shared;
  int index;
} worker_arg;

/* ---- worker: ops on its own queue, every result checked ---- */

static void check_softmax(const float *x, const float *y, int rows, int cols, int worker) {
  for (int r = 0; r < rows; r++) {
    double max = -INFINITY, sum = 0;
    for (int c = 0; c < cols; c++)
      max = fmax(max, x[r * cols + c]);
    for (int c = 0; c < cols; c++)
      sum += exp(x[r * cols + c] - max);
    for (int c = 0; c < cols; c++) {
      double want = exp(x[r * cols + c] - max) / sum;
      if (!(fabs(y[r * cols + c] - want) <= 1e-5 * want + 1e-7)) {
        FAIL("worker %d: softmax %dx%d [%d,%d] = %.9g, want %.9g", worker, rows, cols, r, c,
             y[r * cols + c], want);
        return;
      }
    }
  }
  atomic_fetch_add(&checked_values, (long)rows * cols);
}

static void check_gemm(const float *a, const float *b, const float *d, int m, int n, int k,
                       int worker) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double want = 0, magnitude = 0;
      for (int p = 0; p < k; p++) {
        want += (double)a[i * k + p] * b[p * n + j];
        magnitude += fabs((double)a[i * k + p] * b[p * n + j]);
      }
      if (!(fabs(d[i * n + j] - want) <= 1e-5 * magnitude + 1e-6)) {
        FAIL("worker %d: gemm %dx%dx%d [%d,%d] = %.9g, want %.9g", worker, m, n, k, i, j,
             d[i * n + j], want);
        return;
      }
    }
  atomic_fetch_add(&checked_values, (long)m * n);
}

static tsr_buffer *make_buffer(tsr_device *device, size_t bytes) {
  tsr_buffer *buffer = NULL;
  return OK(tsr_buffer_create(device, bytes, &buffer)) ? buffer : NULL;
}

/* One iteration: softmax and a GEMM with awkward shapes, a decoy GEMM whose
 * output buffer is handed to a churn thread before the queue finishes. */
static void worker_iteration(shared *s, tsr_queue *queue, int worker, int it) {
  const int rows = 3 + (worker * 7 + it) % 13, cols = 17 + (it * 5 + worker) % 50;
  const int n = 1 + (worker + it) % 9;
  const size_t x_bytes = (size_t)rows * cols * sizeof(float);
  float *x = malloc(x_bytes), *y = malloc(x_bytes);
  float *b = malloc((size_t)cols * n * sizeof(float)), *d = malloc((size_t)rows * n * 4);
  tsr_buffer *bx = make_buffer(s->device, x_bytes), *by = make_buffer(s->device, x_bytes);
  tsr_buffer *bb = make_buffer(s->device, (size_t)cols * n * 4);
  tsr_buffer *bd = make_buffer(s->device, (size_t)rows * n * 4);
  tsr_buffer *decoy = make_buffer(s->device, (size_t)rows * n * 4);
  if (!x || !y || !b || !d || !bx || !by || !bb || !bd || !decoy) {
    FAIL("worker %d: setup of iteration %d", worker, it);
    goto done;
  }
  fill_random(x, (size_t)rows * cols, (uint32_t)(worker * 100003 + it));
  fill_random(b, (size_t)cols * n, (uint32_t)(worker * 7919 + it + 1));
  if (!OK(tsr_buffer_write(queue, bx, 0, x, x_bytes)) ||
      !OK(tsr_buffer_write(queue, bb, 0, b, (size_t)cols * n * 4)))
    goto done;

  tsr_softmax_desc sm = TSR_SOFTMAX_DESC_INIT;
  sm.x = tsr_tensor_make(bx, 0, TSR_DTYPE_F32, 2, (int64_t[]){rows, cols});
  sm.y = tsr_tensor_make(by, 0, TSR_DTYPE_F32, 2, (int64_t[]){rows, cols});
  tsr_gemm_desc g = TSR_GEMM_DESC_INIT;
  g.a = tsr_tensor_make(bx, 0, TSR_DTYPE_F32, 2, (int64_t[]){rows, cols});
  g.b = tsr_tensor_make(bb, 0, TSR_DTYPE_F32, 2, (int64_t[]){cols, n});
  g.d = tsr_tensor_make(bd, 0, TSR_DTYPE_F32, 2, (int64_t[]){rows, n});
  tsr_gemm_desc decoy_gemm = g;
  decoy_gemm.d = tsr_tensor_make(decoy, 0, TSR_DTYPE_F32, 2, (int64_t[]){rows, n});
  /* Several commands back to back keep the queue recording while other
   * threads destroy buffers. */
  for (int repeat = 0; repeat < 6; repeat++)
    if (!OK(tsr_softmax(queue, &sm)))
      goto done;
  if (!OK(tsr_gemm(queue, &g)) || !OK(tsr_gemm(queue, &decoy_gemm)))
    goto done;
  /* Still queued (or running): another thread destroys it. */
  if (handoff_push(&s->handoff, decoy))
    decoy = NULL;
  if (it % 4 == 1) {
    tsr_event *event = NULL;
    if (OK(tsr_event_record(queue, &event))) {
      OK(tsr_event_wait(event));
      tsr_event_destroy(event);
    }
  }
  if (!OK(tsr_buffer_read(queue, by, 0, y, x_bytes)) ||
      !OK(tsr_buffer_read(queue, bd, 0, d, (size_t)rows * n * 4)) || !OK(tsr_queue_finish(queue)))
    goto done;
  check_softmax(x, y, rows, cols, worker);
  check_gemm(x, b, d, rows, n, cols, worker);
done:
  tsr_buffer_destroy(bx);
  tsr_buffer_destroy(by);
  tsr_buffer_destroy(bb);
  tsr_buffer_destroy(bd);
  tsr_buffer_destroy(decoy);
  free(x);
  free(y);
  free(b);
  free(d);
}

static void *worker_main(void *argument) {
  worker_arg *arg = argument;
  shared *s = arg->shared;
  tsr_queue *queue = NULL;
  if (OK(tsr_queue_create(s->device, &queue))) {
    for (int it = 0; it < s->iterations && atomic_load(&failures) == 0; it++)
      worker_iteration(s, queue, arg->index, it);
    tsr_queue_destroy(queue);
  }
  atomic_fetch_sub(&s->workers_running, 1);
  return NULL;
}

/* ---- churn: objects created and destroyed beside the workers ---- */

static void churn_once(shared *s, int churner, int round) {
  tsr_buffer *handed = handoff_pop(&s->handoff);
  tsr_buffer_destroy(handed);
  /* Never given work: destroying them must not wait for anyone. */
  for (int i = 0; i < 4; i++) {
    tsr_buffer *idle = make_buffer(s->device, 64 + (size_t)((round + i) % 37) * 4096);
    tsr_buffer_destroy(idle);
  }
  if (round % 3 == 0) {
    tsr_queue *queue = NULL;
    if (!OK(tsr_queue_create(s->device, &queue)))
      return;
    const int count = 257 + round % 100;
    tsr_buffer *buffer = make_buffer(s->device, (size_t)count * 4);
    float *data = malloc((size_t)count * 4), *back = malloc((size_t)count * 4);
    tsr_event *event = NULL;
    if (buffer && data && back) {
      fill_random(data, (size_t)count, (uint32_t)(churner * 31 + round));
      if (OK(tsr_buffer_write(queue, buffer, 0, data, (size_t)count * 4)) &&
          OK(tsr_event_record(queue, &event)) && OK(tsr_event_wait(event)) &&
          OK(tsr_buffer_read(queue, buffer, 0, back, (size_t)count * 4))) {
        if (memcmp(data, back, (size_t)count * 4) != 0)
          FAIL("churn %d: a buffer read back differs from what was written", churner);
        else
          atomic_fetch_add(&checked_values, count);
      }
    }
    tsr_event_destroy(event);
    /* The queue goes first, leaving a buffer it was given work on. */
    tsr_queue_destroy(queue);
    tsr_buffer_destroy(buffer);
    free(data);
    free(back);
  }
}

static void *churn_main(void *argument) {
  worker_arg *arg = argument;
  shared *s = arg->shared;
  int round = 0;
  while (atomic_load(&s->workers_running) > 0 && atomic_load(&failures) == 0)
    churn_once(s, arg->index, round++);
  for (tsr_buffer *b; (b = handoff_pop(&s->handoff)) != NULL;)
    tsr_buffer_destroy(b);
  return NULL;
}

static int run_concurrency(tsr_device *device, int workers, int churners, int iterations) {
  shared s = {.device = device, .iterations = iterations};
  pthread_mutex_init(&s.handoff.lock, NULL);
  atomic_init(&s.workers_running, workers);
  pthread_t *threads = calloc((size_t)(workers + churners), sizeof *threads);
  worker_arg *args = calloc((size_t)(workers + churners), sizeof *args);
  if (!threads || !args) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  int started = 0;
  for (int i = 0; i < workers + churners; i++) {
    args[i] = (worker_arg){&s, i < workers ? i : i - workers};
    if (pthread_create(&threads[i], NULL, i < workers ? worker_main : churn_main, &args[i]) != 0) {
      FAIL("pthread_create %d", i);
      if (i < workers)
        atomic_fetch_sub(&s.workers_running, workers - i);
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  for (tsr_buffer *b; (b = handoff_pop(&s.handoff)) != NULL;)
    tsr_buffer_destroy(b);
  pthread_mutex_destroy(&s.handoff.lock);
  free(threads);
  free(args);
  printf("concurrency: %d workers x %d iterations, %d churn threads: %ld values checked\n", workers,
         iterations, churners, atomic_load(&checked_values));
  if (atomic_load(&checked_values) == 0)
    FAIL("no result was checked");
  return 0;
}

/* ---- the smallest form: one thread records, another destroys ---- */

typedef struct recording {
  tsr_device *device;
  atomic_int done;
} recording;

static void *destroy_loop(void *argument) {
  recording *r = argument;
  for (int i = 0; !atomic_load(&r->done); i++) {
    tsr_buffer *buffer = make_buffer(r->device, 256 + (size_t)(i % 64) * 256);
    tsr_buffer_destroy(buffer);
  }
  return NULL;
}

/* A softmax loop on one queue, finished and checked every 64 ops, beside two
 * threads that only create and destroy buffers they never use. */
static int run_destroy_while_recording(tsr_device *device, int ops) {
  enum { ROWS = 4, COLS = 96 };
  recording r = {.device = device};
  tsr_queue *queue = NULL;
  tsr_buffer *bx = NULL, *by = NULL;
  if (!OK(tsr_queue_create(device, &queue)) || !(bx = make_buffer(device, ROWS * COLS * 4)) ||
      !(by = make_buffer(device, ROWS * COLS * 4)))
    return 1;
  float x[ROWS * COLS], y[ROWS * COLS];
  fill_random(x, ROWS * COLS, 7);
  tsr_softmax_desc sm = TSR_SOFTMAX_DESC_INIT;
  sm.x = tsr_tensor_make(bx, 0, TSR_DTYPE_F32, 2, (int64_t[]){ROWS, COLS});
  sm.y = tsr_tensor_make(by, 0, TSR_DTYPE_F32, 2, (int64_t[]){ROWS, COLS});
  pthread_t threads[2];
  if (!OK(tsr_buffer_write(queue, bx, 0, x, sizeof x)) ||
      pthread_create(&threads[0], NULL, destroy_loop, &r) != 0)
    return 1;
  int started = 1 + (pthread_create(&threads[1], NULL, destroy_loop, &r) == 0);
  for (int i = 0; i < ops && atomic_load(&failures) == 0; i++) {
    if (!OK(tsr_softmax(queue, &sm)))
      break;
    if (i % 64 == 63) {
      memset(y, 0, sizeof y);
      if (!OK(tsr_buffer_read(queue, by, 0, y, sizeof y)) || !OK(tsr_queue_finish(queue)))
        break;
      check_softmax(x, y, ROWS, COLS, 0);
    }
  }
  atomic_store(&r.done, 1);
  for (int i = 0; i < started; i++)
    pthread_join(threads[i], NULL);
  OK(tsr_queue_finish(queue));
  tsr_buffer_destroy(bx);
  tsr_buffer_destroy(by);
  tsr_queue_destroy(queue);
  printf("destroy_while_recording: %d softmax ops, %ld values checked\n", ops,
         atomic_load(&checked_values));
  return 0;
}

/* ---- destroyed buffers are refused ---- */

static void expect_destroyed(tsr_status status, const char *what) {
  const char *error = tsr_last_error();
  if (status != TSR_ERROR_INVALID_VALUE || !strstr(error, "was destroyed"))
    FAIL("%s with a destroyed buffer: status %d (%s), want TSR_ERROR_INVALID_VALUE and "
         "'was destroyed'",
         what, (int)status, error);
}

static int run_use_after_destroy(tsr_device *device) {
  tsr_queue *queue = NULL;
  tsr_buffer *live = NULL, *dead = NULL;
  if (!OK(tsr_queue_create(device, &queue)) || !OK(tsr_buffer_create(device, 4096, &live)) ||
      !OK(tsr_buffer_create(device, 4096, &dead)))
    return 1;
  float ones[64];
  for (int i = 0; i < 64; i++)
    ones[i] = 1.0f;
  OK(tsr_buffer_write(queue, dead, 0, ones, sizeof ones));
  OK(tsr_buffer_write(queue, live, 0, ones, sizeof ones));
  tsr_buffer_destroy(dead);
  /* A second destroy is ignored (with a warning), not a double free. */
  tsr_buffer_destroy(dead);

  float host[64];
  size_t size = 0;
  tsr_device *owner = NULL;
  void *mapped = NULL;
  expect_destroyed(tsr_buffer_write(queue, dead, 0, host, sizeof host), "tsr_buffer_write");
  expect_destroyed(tsr_buffer_read(queue, dead, 0, host, sizeof host), "tsr_buffer_read");
  expect_destroyed(tsr_buffer_copy(queue, dead, 0, live, 0, 64), "tsr_buffer_copy (src)");
  expect_destroyed(tsr_buffer_copy(queue, live, 0, dead, 0, 64), "tsr_buffer_copy (dst)");
  expect_destroyed(tsr_buffer_size(dead, &size), "tsr_buffer_size");
  expect_destroyed(tsr_buffer_device(dead, &owner), "tsr_buffer_device");
  expect_destroyed(tsr_buffer_map(dead, &mapped), "tsr_buffer_map");

  tsr_softmax_desc sm = TSR_SOFTMAX_DESC_INIT;
  sm.x = tsr_tensor_make(dead, 0, TSR_DTYPE_F32, 2, (int64_t[]){4, 16});
  sm.y = tsr_tensor_make(live, 0, TSR_DTYPE_F32, 2, (int64_t[]){4, 16});
  expect_destroyed(tsr_softmax(queue, &sm), "tsr_softmax (x)");
  sm.x = sm.y;
  sm.y = tsr_tensor_make(dead, 0, TSR_DTYPE_F32, 2, (int64_t[]){4, 16});
  expect_destroyed(tsr_softmax(queue, &sm), "tsr_softmax (y)");
  tsr_gemm_desc g = TSR_GEMM_DESC_INIT;
  g.a = tsr_tensor_make(live, 0, TSR_DTYPE_F32, 2, (int64_t[]){8, 8});
  g.b = tsr_tensor_make(live, 256, TSR_DTYPE_F32, 2, (int64_t[]){8, 8});
  g.d = tsr_tensor_make(live, 512, TSR_DTYPE_F32, 2, (int64_t[]){8, 8});
  g.bias = tsr_tensor_make(dead, 0, TSR_DTYPE_F32, 1, (int64_t[]){8});
  expect_destroyed(tsr_gemm(queue, &g), "tsr_gemm (bias)");

  /* The live buffer is untouched by the refused calls. */
  float back[64];
  if (OK(tsr_buffer_read(queue, live, 0, back, sizeof back)) &&
      memcmp(back, ones, sizeof back) != 0)
    FAIL("a refused call changed the live buffer");
  OK(tsr_queue_finish(queue));
  tsr_buffer_destroy(live);
  tsr_queue_destroy(queue);
  printf("use_after_destroy: every call refused the destroyed buffer\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: %s DEVICE concurrency|destroy_while_recording|use_after_destroy [...]\n",
            argv[0]);
    return 2;
  }
  int workers = argc > 3 ? atoi(argv[3]) : 16;
  int churners = argc > 4 ? atoi(argv[4]) : 4;
  int iterations = argc > 5 ? atoi(argv[5]) : 24;
  tsr_context *context = NULL;
  if (tsr_context_create(NULL, &context) != TSR_OK) {
    fprintf(stderr, "tsr_context_create: %s\n", tsr_last_error());
    return 1;
  }
  tsr_device *device = NULL;
  if (tsr_device_open(context, argv[1], &device) != TSR_OK) {
    printf("SKIPPED: no device %s (%s)\n", argv[1], tsr_last_error());
    tsr_context_destroy(context);
    return 77;
  }
  int rc = 2;
  if (strcmp(argv[2], "concurrency") == 0)
    rc = run_concurrency(device, workers, churners, iterations);
  else if (strcmp(argv[2], "destroy_while_recording") == 0)
    rc = run_destroy_while_recording(device, argc > 3 ? atoi(argv[3]) : 20000);
  else if (strcmp(argv[2], "use_after_destroy") == 0)
    rc = run_use_after_destroy(device);
  else
    fprintf(stderr, "unknown case %s\n", argv[2]);
  tsr_context_destroy(context);
  int failed = atomic_load(&failures);
  if (failed)
    fprintf(stderr, "%s %s: %d failure(s)\n", argv[1], argv[2], failed);
  return rc != 0 ? rc : failed ? 1 : 0;
}
