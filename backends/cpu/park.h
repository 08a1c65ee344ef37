/* SPDX-License-Identifier: Apache-2.0 */
/* Waiting without a wake-up tax: poll a condition for a bounded time, then
 * park on a futex word. Used by the thread pool (pool.c), the queue workers
 * and tsr_queue_finish (queue.c).
 *
 * Why polling yields: on a machine with few CPUs the application's thread,
 * a queue's worker and the pool's workers outnumber the cores, so a thread
 * that polls must not keep a runnable one off its CPU. Every few pause
 * instructions the poller calls sched_yield, which costs about a
 * microsecond when nothing else is runnable and hands the CPU over when
 * something is. Not installed. */
#ifndef TESSERA_CPU_PARK_H
#define TESSERA_CPU_PARK_H

#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* The default of TESSERA_CPU_POLL_US: how long an idle thread polls before
 * it parks. It covers the gap between one synchronous call and the next
 * (an interpreter's loop, a decode step's host work); an idle device burns
 * this much CPU time per thread once and then nothing. */
enum { CPU_POLL_DEFAULT_US = 500, CPU_POLL_MAX_US = 1000000 };

/* A thread that waits while another runs the work (the application in
 * tsr_queue_finish or an event wait behind the queue's worker, or that
 * worker between commands) polls at most this long, and the application's
 * thread only where the pool leaves a CPU free (cpu_waiter_poll_ns): the
 * pool's threads fill the cores, and a waiter polling beside them takes a
 * share of a core from one of them (sched_yield does not make the scheduler
 * pass it over for long). Measured: a bench row whose waiter polled 50 us
 * at each of its events left the pool worker a third of the chunks. Past
 * the poll, the waiter parks and the work's end wakes it. */
enum { CPU_WAITER_POLL_MAX_NS = 50000 };

/* The poll of a thread waiting for others' work: the device's window, at
 * most CPU_WAITER_POLL_MAX_NS, and none when `spare_cpu` is false. */
static inline int64_t cpu_waiter_poll_ns(int64_t poll_ns, bool spare_cpu) {
  if (!spare_cpu)
    return 0;
  return poll_ns < CPU_WAITER_POLL_MAX_NS ? poll_ns : CPU_WAITER_POLL_MAX_NS;
}

/* Names the calling thread for top, perf and debuggers (Linux; a no-op
 * elsewhere). */
static inline void cpu_name_thread(const char *name) {
#if defined(__linux__)
  prctl(PR_SET_NAME, name, 0, 0, 0);
#else
  (void)name;
#endif
}

static inline int64_t cpu_clock_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static inline void cpu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

typedef bool (*cpu_ready_fn)(const void *argument);

/* Polls ready(argument) until it holds (true) or budget_ns has passed
 * (false). A budget of 0 checks once. */
static inline bool cpu_poll(cpu_ready_fn ready, const void *argument, int64_t budget_ns) {
  if (ready(argument))
    return true;
  if (budget_ns <= 0)
    return false;
  int64_t deadline = cpu_clock_ns() + budget_ns;
  for (unsigned i = 1;; i++) {
    cpu_pause();
    if (ready(argument))
      return true;
    if ((i & 15) == 0) {
      sched_yield();
      if (cpu_clock_ns() > deadline)
        return ready(argument);
    }
  }
}

/* Sleeps while *word == expected (it may return early: callers re-check).
 * One syscall; no lock. Elsewhere than Linux it naps 50 us instead. */
static inline void cpu_park(atomic_uint *word, unsigned expected) {
#if defined(__linux__)
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
  if (atomic_load_explicit(word, memory_order_acquire) == expected) {
    struct timespec nap = {0, 50000};
    nanosleep(&nap, NULL);
  }
#endif
}

/* Wakes every thread parked on word: one syscall, whatever their number. */
static inline void cpu_unpark_all(atomic_uint *word) {
#if defined(__linux__)
  syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
  (void)word;
#endif
}

#endif /* TESSERA_CPU_PARK_H */
