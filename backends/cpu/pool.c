/* The CPU plugin's thread pool: persistent workers that sleep on a condition
 * variable between jobs. The thread that calls cpu_pool_parallel_for works on
 * the job too, so a pool of N threads starts N - 1 workers. Chunks are handed
 * out dynamically through an atomic counter, which evens out uneven chunks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "configs.h"
#include "cpu_internal.h"

/* Chunks per thread when the grain allows it: a few more chunks than threads
 * let a thread that finishes early take work from a slow one. */
enum { CHUNKS_PER_THREAD = 4 };

typedef struct pool_worker {
  struct cpu_pool *pool;
  int index; /* 1..threads-1; the caller is 0 */
  pthread_t thread;
} pool_worker;

struct cpu_pool {
  int threads; /* workers started + the caller */
  pool_worker *workers;
  pthread_mutex_t caller_lock; /* one parallel_for at a time */
  pthread_mutex_t lock;        /* guards everything below */
  pthread_cond_t job_posted;
  pthread_cond_t job_finished;
  uint64_t generation; /* bumped for each job */
  int helpers_wanted;  /* workers 1..helpers_wanted take part in the job */
  int helpers_running;
  bool stopping;
  /* The current job (written before the generation bump, read after). */
  cpu_range_fn fn;
  void *context;
  int64_t n;
  int64_t chunk;
  atomic_llong next_begin;
};

/* Set while a thread runs chunks, so that a nested parallel_for runs inline
 * instead of waiting for the pool it is part of. */
static _Thread_local int pool_current_worker = -1;

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

static void *worker_main(void *argument) {
  pool_worker *self = argument;
  cpu_pool *pool = self->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (!pool->stopping && pool->generation == seen)
      pthread_cond_wait(&pool->job_posted, &pool->lock);
    if (pool->stopping)
      break;
    seen = pool->generation;
    if (self->index > pool->helpers_wanted)
      continue;
    pthread_mutex_unlock(&pool->lock);
    run_chunks(pool, self->index);
    pthread_mutex_lock(&pool->lock);
    if (--pool->helpers_running == 0)
      pthread_cond_signal(&pool->job_finished);
  }
  pthread_mutex_unlock(&pool->lock);
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
  pool->stopping = true;
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
  int64_t chunks = (n + chunk - 1) / chunk;
  int helpers = pool->threads - 1;
  if (chunks - 1 < helpers)
    helpers = (int)(chunks - 1);

  pthread_mutex_lock(&pool->caller_lock);
  pthread_mutex_lock(&pool->lock);
  pool->fn = fn;
  pool->context = context;
  pool->n = n;
  pool->chunk = chunk;
  atomic_store(&pool->next_begin, 0);
  pool->helpers_wanted = helpers;
  pool->helpers_running = helpers;
  pool->generation++;
  pthread_cond_broadcast(&pool->job_posted);
  pthread_mutex_unlock(&pool->lock);

  run_chunks(pool, 0);

  pthread_mutex_lock(&pool->lock);
  while (pool->helpers_running > 0)
    pthread_cond_wait(&pool->job_finished, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
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
