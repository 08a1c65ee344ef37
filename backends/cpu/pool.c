/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's thread pool: persistent workers. The thread that calls
 * cpu_pool_parallel_for works on the job too, so a pool of N threads starts
 * N - 1 workers. Chunks are handed out dynamically through an atomic
 * counter, which evens out uneven chunks.
 *
 * Waking a sleeping thread costs tens of microseconds (more in a virtual
 * machine, where the idle vCPU has to be scheduled again), which is a few
 * percent of a millisecond-sized kernel and is paid at every fork and join.
 * So a worker that finishes a job, and a caller waiting for its helpers,
 * first spin for a short while (POOL_SPIN_NS) watching an atomic, and only
 * then sleep on a condition variable. Back-to-back kernels and the several
 * parallel steps inside one kernel then hand work over without sleeping. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "configs.h"
#include "cpu_internal.h"

/* Chunks per thread when the grain allows it: a few more chunks than threads
 * let a thread that finishes early take work from a slow one. */
enum { CHUNKS_PER_THREAD = 4 };

/* How long an idle thread spins before it sleeps. */
enum { POOL_SPIN_NS = 200000 };

typedef struct pool_worker {
  struct cpu_pool *pool;
  int index; /* 1..threads-1; the caller is 0 */
  pthread_t thread;
} pool_worker;

struct cpu_pool {
  int threads; /* workers started + the caller */
  pool_worker *workers;
  pthread_mutex_t caller_lock; /* one parallel_for at a time */
  pthread_mutex_t lock;        /* guards the sleep/wake handshakes */
  pthread_cond_t job_posted;
  pthread_cond_t job_finished;
  int sleepers;             /* workers waiting on job_posted (under lock) */
  bool caller_sleeping;     /* the caller waits on job_finished (under lock) */
  atomic_ullong generation; /* bumped (release) after the job below is written */
  atomic_int helpers_running;
  atomic_bool stopping;
  /* The current job. Every worker takes part in every job (one with no
   * chunk left only checks in), so no worker can still be reading a job
   * while the caller writes the next one. */
  cpu_range_fn fn;
  void *context;
  int64_t n;
  int64_t chunk;
  atomic_llong next_begin;
};

/* Set while a thread runs chunks, so that a nested parallel_for runs inline
 * instead of waiting for the pool it is part of. */
static _Thread_local int pool_current_worker = -1;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void run_chunks(cpu_pool *pool, int worker) {
  int outer = pool_current_worker;
  pool_current_worker = worker;
  for (;;) {
    int64_t begin = atomic_fetch_add(&pool->next_begin, pool->chunk);
    if (begin >= pool->n)
      break;
    int64_t end = begin + pool->chunk < pool->n ? begin + pool->chunk : pool->n;
    pool->fn(pool->context, begin, end, worker);
  }
  pool_current_worker = outer;
}

/* Returns the first generation after `seen` (or any when stopping): spins,
 * then sleeps. */
static uint64_t wait_for_job(cpu_pool *pool, uint64_t seen) {
  int64_t deadline = now_ns() + POOL_SPIN_NS;
  for (int i = 0;; i++) {
    uint64_t generation = atomic_load_explicit(&pool->generation, memory_order_acquire);
    if (generation != seen || atomic_load_explicit(&pool->stopping, memory_order_acquire))
      return generation;
    spin_pause();
    if ((i & 63) == 63 && now_ns() > deadline)
      break;
  }
  pthread_mutex_lock(&pool->lock);
  pool->sleepers++;
  while (atomic_load_explicit(&pool->generation, memory_order_acquire) == seen &&
         !atomic_load_explicit(&pool->stopping, memory_order_acquire))
    pthread_cond_wait(&pool->job_posted, &pool->lock);
  pool->sleepers--;
  pthread_mutex_unlock(&pool->lock);
  return atomic_load_explicit(&pool->generation, memory_order_acquire);
}

static void *worker_main(void *argument) {
  pool_worker *self = argument;
  cpu_pool *pool = self->pool;
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_job(pool, seen);
    if (atomic_load_explicit(&pool->stopping, memory_order_acquire))
      break;
    run_chunks(pool, self->index);
    if (atomic_fetch_sub_explicit(&pool->helpers_running, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&pool->lock);
      if (pool->caller_sleeping)
        pthread_cond_signal(&pool->job_finished);
      pthread_mutex_unlock(&pool->lock);
    }
  }
  cpu_gemm_release_thread_workspace(); /* scratch the kernels kept for this thread */
  return NULL;
}

cpu_pool *cpu_pool_create(int threads) {
  if (threads < 1)
    threads = 1;
  cpu_pool *pool = calloc(1, sizeof *pool);
  if (!pool)
    return NULL;
  pool->workers = calloc((size_t)threads, sizeof *pool->workers);
  if (!pool->workers) {
    free(pool);
    return NULL;
  }
  pthread_mutex_init(&pool->caller_lock, NULL);
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->job_posted, NULL);
  pthread_cond_init(&pool->job_finished, NULL);
  atomic_init(&pool->generation, 0);
  atomic_init(&pool->helpers_running, 0);
  atomic_init(&pool->stopping, false);
  atomic_init(&pool->next_begin, 0);
  pool->threads = 1;
  /* A worker that cannot be started only makes the pool smaller. */
  for (int i = 1; i < threads; i++) {
    pool_worker *worker = &pool->workers[pool->threads - 1];
    worker->pool = pool;
    worker->index = pool->threads;
    if (pthread_create(&worker->thread, NULL, worker_main, worker) != 0)
      break;
    pool->threads++;
  }
  return pool;
}

void cpu_pool_destroy(cpu_pool *pool) {
  if (!pool)
    return;
  pthread_mutex_lock(&pool->lock);
  atomic_store_explicit(&pool->stopping, true, memory_order_release);
  pthread_cond_broadcast(&pool->job_posted);
  pthread_mutex_unlock(&pool->lock);
  for (int i = 0; i + 1 < pool->threads; i++)
    pthread_join(pool->workers[i].thread, NULL);
  pthread_cond_destroy(&pool->job_finished);
  pthread_cond_destroy(&pool->job_posted);
  pthread_mutex_destroy(&pool->lock);
  pthread_mutex_destroy(&pool->caller_lock);
  free(pool->workers);
  free(pool);
}

int cpu_pool_threads(const cpu_pool *pool) {
  return pool ? pool->threads : 1;
}

/* Waits until every helper of the current job is done: spins, then sleeps. */
static void wait_for_helpers(cpu_pool *pool) {
  int64_t deadline = now_ns() + POOL_SPIN_NS;
  for (int i = 0;; i++) {
    if (atomic_load_explicit(&pool->helpers_running, memory_order_acquire) == 0)
      return;
    spin_pause();
    if ((i & 63) == 63 && now_ns() > deadline)
      break;
  }
  pthread_mutex_lock(&pool->lock);
  pool->caller_sleeping = true;
  while (atomic_load_explicit(&pool->helpers_running, memory_order_acquire) > 0)
    pthread_cond_wait(&pool->job_finished, &pool->lock);
  pool->caller_sleeping = false;
  pthread_mutex_unlock(&pool->lock);
}

void cpu_pool_parallel_for(cpu_pool *pool, int64_t n, int64_t grain, cpu_range_fn fn,
                           void *context) {
  if (n <= 0)
    return;
  if (grain < 1)
    grain = 1;
  if (pool_current_worker >= 0) { /* nested: this thread already owns a worker slot */
    fn(context, 0, n, pool_current_worker);
    return;
  }
  if (!pool || pool->threads == 1 || n <= grain) {
    fn(context, 0, n, 0);
    return;
  }
  int64_t chunk = (n + (int64_t)pool->threads * CHUNKS_PER_THREAD - 1) /
                  ((int64_t)pool->threads * CHUNKS_PER_THREAD);
  if (chunk < grain)
    chunk = grain;
  int helpers = pool->threads - 1;

  pthread_mutex_lock(&pool->caller_lock);
  pool->fn = fn;
  pool->context = context;
  pool->n = n;
  pool->chunk = chunk;
  atomic_store_explicit(&pool->next_begin, 0, memory_order_relaxed);
  atomic_store_explicit(&pool->helpers_running, helpers, memory_order_relaxed);
  pthread_mutex_lock(&pool->lock);
  atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
  if (pool->sleepers > 0)
    pthread_cond_broadcast(&pool->job_posted);
  pthread_mutex_unlock(&pool->lock);

  run_chunks(pool, 0);
  wait_for_helpers(pool);
  pthread_mutex_unlock(&pool->caller_lock);
}

/* cpu_pool_run_threads through parallel_for: one item per share. */
typedef struct thread_shares {
  cpu_range_fn fn;
  void *context;
  int threads;
} thread_shares;

static void run_shares(void *context, int64_t begin, int64_t end, int worker) {
  const thread_shares *shares = context;
  for (int64_t t = begin; t < end; t++)
    shares->fn(shares->context, t, shares->threads, worker);
}

void cpu_pool_run_threads(cpu_pool *pool, int threads, cpu_range_fn fn, void *context) {
  int available = cpu_pool_threads(pool);
  if (threads > available)
    threads = available;
  if (threads < 1)
    threads = 1;
  thread_shares shares = {fn, context, threads};
  /* n = threads with grain 1 gives chunks of one share each. */
  cpu_pool_parallel_for(pool, threads, 1, run_shares, &shares);
}
