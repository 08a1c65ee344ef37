/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's thread pool: persistent workers. The thread that calls
 * cpu_pool_parallel_for works on the job too, so a pool of N threads starts
 * N - 1 workers. Each thread takes chunks from its own range of the job
 * first (an atomic cursor a range), then from the others' ranges, which
 * evens out uneven chunks and late joiners.
 *
 * The caller never waits for a thread to wake up. Waking a parked thread
 * costs tens of microseconds, and in a virtual machine whose idle vCPU the
 * host has descheduled, hundreds. So a job is open to whichever workers are
 * awake: a worker joins it (a CAS on `ticket`) before it takes a chunk, the
 * caller takes chunks like any worker, and when none is left it closes the
 * job and waits only for the workers that joined, which are running. A
 * worker that wakes after that finds the job closed and goes back to
 * polling. So splitting costs the caller a few atomics and, when workers
 * are parked, one futex wake: a split job is never much slower than the
 * caller alone (the cost model: a chunk is never smaller than its call
 * site's grain, sized so one chunk's work is several microseconds).
 *
 * Idle workers poll for the device's poll window (TESSERA_CPU_POLL_US),
 * yielding their CPU to anything runnable, and then park on a futex; a job
 * posted while some are parked wakes them all with one syscall. A caller
 * that finds a worker on its own CPU moves it off (steer_workers). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "park.h"

/* Chunks per thread when the grain allows it: a few more chunks than threads
 * let a thread that finishes early (or joins late) take work from a slow one. */
enum { CHUNKS_PER_THREAD = 4 };

/* Each thread's own range of a job's chunks, which it takes first (then it
 * takes chunks from the others' ranges): the same thread touches the same
 * data on every call, so data stays in its core's caches, instead of moving
 * between cores that may share no cache (docs/PERFORMANCE.md). One line
 * each: threads claim from their own cursor without contention. */
typedef struct chunk_range {
  _Alignas(64) atomic_llong next; /* next chunk index to hand out */
  int64_t end;                    /* one past the range's last chunk */
} chunk_range;

/* `ticket`: the job's state. CLOSED while no job is open (the caller may
 * write the next one); below it, the number of workers that joined. */
enum { TICKET_CLOSED = 1u << 30, TICKET_JOINED_MASK = TICKET_CLOSED - 1 };

typedef struct pool_worker {
  struct cpu_pool *pool;
  int index; /* 1..threads-1; the caller is 0 */
  pthread_t thread;
  /* The CPU it last ran on, as it saw it (-1: not known), on its own line:
   * written by the worker when it changes, read by callers posting jobs. */
  _Alignas(64) atomic_int cpu;
  int avoided_cpu; /* the CPU its affinity leaves out (-1: none); the caller's, under caller_lock */
} pool_worker;

struct cpu_pool {
  int threads; /* workers started + the caller */
  int64_t poll_ns;
  pool_worker *workers;
  pthread_mutex_t caller_lock; /* one parallel_for at a time */
  atomic_uint posted;          /* bumped per job and at stop; workers park on it */
  atomic_int parked_workers;
  atomic_uint ticket; /* TICKET_CLOSED | joined; the caller parks on it */
  atomic_bool caller_parked;
  atomic_bool stopping;
  /* The current job: written while the ticket is CLOSED with nobody joined,
   * read by workers only after they joined. */
  cpu_range_fn fn;
  void *context;
  int64_t n;
  int64_t chunk;
  chunk_range *ranges; /* threads entries */
#if defined(__linux__)
  cpu_set_t allowed; /* the CPUs the workers were started with */
  bool steer;        /* another CPU exists to move a worker to (steer_workers) */
#endif
};

/* Set while a thread runs chunks, so that a nested parallel_for runs inline
 * instead of waiting for the pool it is part of. */
static _Thread_local int pool_current_worker CPU_TLS_INITIAL_EXEC = -1;

/* Runs the chunks of this thread's range, then those left in the others'. */
static void run_chunks(cpu_pool *pool, int worker) {
  int outer = pool_current_worker;
  pool_current_worker = worker;
  for (int i = 0; i < pool->threads; i++) {
    chunk_range *range = &pool->ranges[(worker + i) % pool->threads];
    for (;;) {
      int64_t index = atomic_fetch_add_explicit(&range->next, 1, memory_order_relaxed);
      if (index >= range->end)
        break;
      int64_t begin = index * pool->chunk;
      int64_t end = begin + pool->chunk < pool->n ? begin + pool->chunk : pool->n;
      pool->fn(pool->context, begin, end, worker);
    }
  }
  pool_current_worker = outer;
}

/* Tells callers where the worker runs (steer_workers). */
static void publish_cpu(pool_worker *self) {
#if defined(__linux__)
  int cpu = sched_getcpu(); /* rseq or vDSO: no system call */
  if (atomic_load_explicit(&self->cpu, memory_order_relaxed) != cpu)
    atomic_store_explicit(&self->cpu, cpu, memory_order_relaxed);
#else
  (void)self;
#endif
}

typedef struct post_watch {
  const cpu_pool *pool;
  pool_worker *self;
  unsigned seen;
} post_watch;

static bool job_posted(const void *argument) {
  const post_watch *watch = argument;
  publish_cpu(watch->self);
  return atomic_load_explicit(&watch->pool->posted, memory_order_acquire) != watch->seen;
}

/* Returns the first `posted` value other than `seen`: polls, then parks.
 * parked_workers and posted are both sequentially consistent, so either
 * the poster sees this worker parked or this worker sees the new value. */
static unsigned wait_for_post(pool_worker *self, unsigned seen) {
  cpu_pool *pool = self->pool;
  post_watch watch = {pool, self, seen};
  if (!cpu_poll(job_posted, &watch, pool->poll_ns)) {
    atomic_fetch_add(&pool->parked_workers, 1);
    while (atomic_load(&pool->posted) == seen)
      cpu_park(&pool->posted, seen);
    atomic_fetch_sub(&pool->parked_workers, 1);
  }
  return atomic_load_explicit(&pool->posted, memory_order_acquire);
}

/* Joins the open job, if one is open. The acquire pairs with the release
 * that opened it, so the job's fields are visible once this succeeds. */
static bool join_job(cpu_pool *pool) {
  unsigned ticket = atomic_load_explicit(&pool->ticket, memory_order_relaxed);
  while (!(ticket & TICKET_CLOSED)) {
    if (atomic_compare_exchange_weak_explicit(&pool->ticket, &ticket, ticket + 1,
                                              memory_order_acquire, memory_order_relaxed))
      return true;
  }
  return false;
}

static void leave_job(cpu_pool *pool) {
  unsigned before = atomic_fetch_sub(&pool->ticket, 1);
  if ((before & TICKET_JOINED_MASK) == 1 && atomic_load(&pool->caller_parked))
    cpu_unpark_all(&pool->ticket);
}

static void *worker_main(void *argument) {
  pool_worker *self = argument;
  cpu_pool *pool = self->pool;
  unsigned seen = 0;
  cpu_name_thread("tsr-cpu-pool");
  for (;;) {
    seen = wait_for_post(self, seen);
    if (atomic_load_explicit(&pool->stopping, memory_order_acquire))
      break;
    if (join_job(pool)) {
      run_chunks(pool, self->index);
      leave_job(pool);
    }
  }
  cpu_gemm_release_thread_workspace(); /* scratch the kernels kept for this thread */
  return NULL;
}

cpu_pool *cpu_pool_create(int threads, int64_t poll_ns) {
  if (threads < 1)
    threads = 1;
  cpu_pool *pool = calloc(1, sizeof *pool);
  if (!pool)
    return NULL;
  /* aligned as pool_worker asks (its `cpu` word on its own line) */
  pool->workers = aligned_alloc(_Alignof(pool_worker), (size_t)threads * sizeof *pool->workers);
  if (pool->workers)
    memset(pool->workers, 0, (size_t)threads * sizeof *pool->workers);
  pool->ranges = aligned_alloc(_Alignof(chunk_range), (size_t)threads * sizeof *pool->ranges);
  if (!pool->workers || !pool->ranges) {
    free(pool->workers);
    free(pool->ranges);
    free(pool);
    return NULL;
  }
  for (int i = 0; i < threads; i++) {
    atomic_init(&pool->ranges[i].next, 0);
    pool->ranges[i].end = 0;
  }
  pool->poll_ns = poll_ns > 0 ? poll_ns : 0;
  pthread_mutex_init(&pool->caller_lock, NULL);
  atomic_init(&pool->posted, 0);
  atomic_init(&pool->parked_workers, 0);
  atomic_init(&pool->ticket, TICKET_CLOSED);
  atomic_init(&pool->caller_parked, false);
  atomic_init(&pool->stopping, false);
  pool->threads = 1;
#if defined(__linux__)
  pool->steer = pthread_getaffinity_np(pthread_self(), sizeof pool->allowed, &pool->allowed) == 0 &&
                CPU_COUNT(&pool->allowed) >= 2;
#endif
  /* A worker that cannot be started only makes the pool smaller. */
  for (int i = 1; i < threads; i++) {
    pool_worker *worker = &pool->workers[pool->threads - 1];
    worker->pool = pool;
    worker->index = pool->threads;
    atomic_init(&worker->cpu, -1);
    worker->avoided_cpu = -1;
    if (pthread_create(&worker->thread, NULL, worker_main, worker) != 0)
      break;
    pool->threads++;
  }
  return pool;
}

void cpu_pool_destroy(cpu_pool *pool) {
  if (!pool)
    return;
  atomic_store(&pool->stopping, true);
  atomic_fetch_add(&pool->posted, 1);
  cpu_unpark_all(&pool->posted);
  for (int i = 0; i + 1 < pool->threads; i++)
    pthread_join(pool->workers[i].thread, NULL);
  pthread_mutex_destroy(&pool->caller_lock);
  free(pool->workers);
  free(pool->ranges);
  free(pool);
}

int cpu_pool_threads(const cpu_pool *pool) {
  return pool ? pool->threads : 1;
}

static bool helpers_left(const void *argument) {
  const cpu_pool *pool = argument;
  return (atomic_load_explicit(&pool->ticket, memory_order_acquire) & TICKET_JOINED_MASK) == 0;
}

/* Closes the job to latecomers and waits for the workers that joined it:
 * they are running, so this polls first; a long chunk (a GEMM share) parks
 * the caller on the ticket until the last of them leaves. */
static void close_job(cpu_pool *pool) {
  atomic_fetch_or(&pool->ticket, TICKET_CLOSED);
  if (cpu_poll(helpers_left, pool, pool->poll_ns))
    return;
  atomic_store(&pool->caller_parked, true);
  for (;;) {
    unsigned ticket = atomic_load(&pool->ticket);
    if ((ticket & TICKET_JOINED_MASK) == 0)
      break;
    cpu_park(&pool->ticket, ticket);
  }
  atomic_store(&pool->caller_parked, false);
}

/* Moves a worker off the caller's CPU. A polling worker that shares a CPU
 * with the caller yields it to the caller, and the scheduler may leave it
 * queued there for a whole time slice (milliseconds) while another CPU idles:
 * Linux moves a waiting thread to an idle CPU only when that CPU expects to
 * stay idle for longer than a migration costs, and one the application's
 * thread wakes on every few hundred microseconds never does. Traced on the
 * 2-vCPU machine: the pool worker queued 3 ms behind the queue's worker
 * while the other CPU idled, the row at the one-thread time. So a caller
 * that finds a worker on its own CPU gives that worker an affinity without
 * it (one system call, only when they meet); the worker stays out of its
 * way until a caller on another CPU meets it again. */
static void steer_workers(cpu_pool *pool) {
#if defined(__linux__)
  if (!pool->steer)
    return;
  int here = sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &pool->allowed))
    return;
  for (int i = 0; i + 1 < pool->threads; i++) {
    pool_worker *worker = &pool->workers[i];
    if (atomic_load_explicit(&worker->cpu, memory_order_relaxed) != here ||
        worker->avoided_cpu == here)
      continue;
    cpu_set_t elsewhere = pool->allowed;
    CPU_CLR(here, &elsewhere);
    /* a refusal (a cpuset changed since) is not retried on every post */
    (void)pthread_setaffinity_np(worker->thread, sizeof elsewhere, &elsewhere);
    worker->avoided_cpu = here;
  }
#else
  (void)pool;
#endif
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
  /* Split only into two grains or more: a job whose second chunk is a
   * sliver pays the hand-over (a futex wake when workers are parked) for
   * nothing. */
  if (!pool || pool->threads == 1 || n < 2 * grain) {
    fn(context, 0, n, 0);
    return;
  }
  int64_t chunk = (n + (int64_t)pool->threads * CHUNKS_PER_THREAD - 1) /
                  ((int64_t)pool->threads * CHUNKS_PER_THREAD);
  if (chunk < grain)
    chunk = grain;

  pthread_mutex_lock(&pool->caller_lock);
  steer_workers(pool);
  pool->fn = fn;
  pool->context = context;
  pool->n = n;
  pool->chunk = chunk;
  /* thread t's range: chunks [t * count / threads, (t + 1) * count / threads) */
  const int64_t count = (n + chunk - 1) / chunk;
  for (int t = 0; t < pool->threads; t++) {
    atomic_store_explicit(&pool->ranges[t].next, t * count / pool->threads, memory_order_relaxed);
    pool->ranges[t].end = (t + 1) * count / pool->threads;
  }
  atomic_store_explicit(&pool->ticket, 0, memory_order_release); /* open */
  atomic_fetch_add(&pool->posted, 1);
  if (atomic_load(&pool->parked_workers) > 0)
    cpu_unpark_all(&pool->posted);

  run_chunks(pool, 0);
  close_job(pool);
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
