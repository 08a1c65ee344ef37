/* SPDX-License-Identifier: Apache-2.0 */
#include "calibrate.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#if defined(__x86_64__) || defined(__i386__)
#define CALIBRATE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define CALIBRATE_X86 0
#endif

/* ------------------------------------------------------------------------ */
/* Feature detection                                                         */
/* ------------------------------------------------------------------------ */

#if CALIBRATE_X86
/* XCR0: which register state the OS saves on a context switch. Encoded as
 * bytes so no target attribute is needed for the xgetbv mnemonic. */
static uint64_t read_xcr0(void) {
  uint32_t low = 0, high = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(low), "=d"(high) : "c"(0));
  return ((uint64_t)high << 32) | low;
}
#endif

void host_cpu_detect(host_cpu_features *features) {
  memset(features, 0, sizeof *features);
#if CALIBRATE_X86
  unsigned max_leaf = __get_cpuid_max(0, NULL);
  if (max_leaf < 1)
    return;
  unsigned eax, ebx, ecx, edx;
  __cpuid_count(1, 0, eax, ebx, ecx, edx);
  bool osxsave = (ecx >> 27) & 1, avx = (ecx >> 28) & 1, fma = (ecx >> 12) & 1;
  if (!osxsave || !avx)
    return;
  uint64_t xcr0 = read_xcr0();
  bool ymm_state = (xcr0 & 0x6) == 0x6;   /* XMM and YMM upper halves */
  bool zmm_state = (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM upper halves, ZMM16-31 */
  if (!ymm_state)
    return;
  features->fma = fma;
  if (max_leaf < 7)
    return;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  unsigned leaf7_subleaves = eax;
  features->avx2 = (ebx >> 5) & 1;
  features->avx512f = zmm_state && ((ebx >> 16) & 1);
  if (features->avx512f && leaf7_subleaves >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    features->avx512_bf16 = (eax >> 5) & 1;
  }
#endif
}

/* ------------------------------------------------------------------------ */
/* Throughput loops                                                          */
/* ------------------------------------------------------------------------ */

/* Each loop keeps enough independent accumulators in registers to cover the
 * latency of the operation on every port that executes it (latency 4-5 x 2
 * ports on current cores), starts them from distinct values derived from
 * `seed` (so the compiler can neither fold nor merge them), and returns their
 * sum so the work cannot be dropped. The multiplier and addend keep every
 * value near 1: no overflow, no subnormals. */
typedef float (*throughput_loop)(int64_t iterations, float seed);

#define REPEAT_16(X)                                                                               \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define REPEAT_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* 12 independent multiply-adds per iteration in baseline code. */
static float loop_generic(int64_t iterations, float seed) {
#define DECLARE(i) float acc##i = seed + 0.001f * (float)(i);
#define STEP(i) acc##i = acc##i * mul + add;
#define SUM(i) total += acc##i;
  REPEAT_12(DECLARE)
  const float mul = 0.9999999f, add = 1e-7f;
  for (int64_t it = 0; it < iterations; it++) {
    REPEAT_12(STEP)
  }
  float total = 0.0f;
  REPEAT_12(SUM)
  return total;
#undef DECLARE
#undef STEP
#undef SUM
}
#define GENERIC_FLOPS_PER_ITERATION (12.0 * 2.0)

#if CALIBRATE_X86
__attribute__((target("avx2,fma"))) static float loop_avx2(int64_t iterations, float seed) {
#define DECLARE(i) __m256 acc##i = _mm256_set1_ps(seed + 0.001f * (float)(i));
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, mul, add);
#define SUM(i) total = _mm256_add_ps(total, acc##i);
  REPEAT_12(DECLARE)
  const __m256 mul = _mm256_set1_ps(0.9999999f), add = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; it++) {
    REPEAT_12(STEP)
  }
  __m256 total = _mm256_setzero_ps();
  REPEAT_12(SUM)
  float lanes[8];
  _mm256_storeu_ps(lanes, total);
  float sum = 0.0f;
  for (int i = 0; i < 8; i++)
    sum += lanes[i];
  return sum;
#undef DECLARE
#undef STEP
#undef SUM
}
#define AVX2_FLOPS_PER_ITERATION (12.0 * 8.0 * 2.0)

__attribute__((target("avx512f"))) static float loop_avx512(int64_t iterations, float seed) {
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps(seed + 0.001f * (float)(i));
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, mul, add);
#define SUM(i) total = _mm512_add_ps(total, acc##i);
  REPEAT_16(DECLARE)
  const __m512 mul = _mm512_set1_ps(0.9999999f), add = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; it++) {
    REPEAT_16(STEP)
  }
  __m512 total = _mm512_setzero_ps();
  REPEAT_16(SUM)
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  float sum = 0.0f;
  for (int i = 0; i < 16; i++)
    sum += lanes[i];
  return sum;
#undef DECLARE
#undef STEP
#undef SUM
}
#define AVX512_FLOPS_PER_ITERATION (16.0 * 16.0 * 2.0)

/* vdpbf16ps: per f32 lane, acc += a0*b0 + a1*b1 (4 operations). The
 * operands are small, so 16 accumulators grow by ~1e-6 per step. */
__attribute__((target("avx512f,avx512bf16"))) static float loop_avx512_bf16(int64_t iterations,
                                                                            float seed) {
#define DECLARE(i) __m512 acc##i = _mm512_set1_ps(seed + 0.001f * (float)(i));
#define STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
#define SUM(i) total = _mm512_add_ps(total, acc##i);
  REPEAT_16(DECLARE)
  const __m512 small = _mm512_set1_ps(1e-3f * seed);
  const __m512bh a = _mm512_cvtne2ps_pbh(small, small), b = a;
  for (int64_t it = 0; it < iterations; it++) {
    REPEAT_16(STEP)
  }
  __m512 total = _mm512_setzero_ps();
  REPEAT_16(SUM)
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  float sum = 0.0f;
  for (int i = 0; i < 16; i++)
    sum += lanes[i];
  return sum;
#undef DECLARE
#undef STEP
#undef SUM
}
#define AVX512_BF16_FLOPS_PER_ITERATION (16.0 * 16.0 * 4.0)
#endif

/* ------------------------------------------------------------------------ */
/* Reading memory                                                            */
/* ------------------------------------------------------------------------ */

/* Sums `bytes` (a multiple of 128) at `p` as two streams, the halves, 64
 * bytes of each per step, prefetching 2 KiB ahead into L1; the sum keeps
 * the loads alive. */
typedef float (*read_loop)(const unsigned char *p, size_t bytes);

enum { READ_PREFETCH_BYTES = 2048 };

static float read_generic(const unsigned char *p, size_t bytes) {
  const size_t half = bytes / 2;
  uint64_t sum[2][8] = {{0}};
  for (size_t at = 0; at < half; at += 64)
    for (int s = 0; s < 2; s++) {
      const unsigned char *line = p + (size_t)s * half + at;
      for (int w = 0; w < 8; w++) {
        uint64_t word;
        memcpy(&word, line + 8 * w, 8);
        sum[s][w] += word;
      }
    }
  uint64_t total = 0;
  for (int s = 0; s < 2; s++)
    for (int w = 0; w < 8; w++)
      total += sum[s][w];
  return (float)(total & 0xffff);
}

#if CALIBRATE_X86
__attribute__((target("avx2"))) static float read_avx2(const unsigned char *p, size_t bytes) {
  const size_t half = bytes / 2;
  __m256i sum[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  for (size_t at = 0; at < half; at += 64)
    for (int s = 0; s < 2; s++) {
      const unsigned char *line = p + (size_t)s * half + at;
      _mm_prefetch((const char *)line + READ_PREFETCH_BYTES, _MM_HINT_T0);
      sum[2 * s] = _mm256_add_epi64(sum[2 * s], _mm256_loadu_si256((const __m256i *)line));
      sum[2 * s + 1] =
          _mm256_add_epi64(sum[2 * s + 1], _mm256_loadu_si256((const __m256i *)(line + 32)));
    }
  __m256i total =
      _mm256_add_epi64(_mm256_add_epi64(sum[0], sum[1]), _mm256_add_epi64(sum[2], sum[3]));
  return (float)(_mm256_extract_epi64(total, 0) & 0xffff);
}

__attribute__((target("avx512f"))) static float read_avx512(const unsigned char *p, size_t bytes) {
  const size_t half = bytes / 2;
  __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (size_t at = 0; at < half; at += 64)
    for (int s = 0; s < 2; s++) {
      const unsigned char *line = p + (size_t)s * half + at;
      _mm_prefetch((const char *)line + READ_PREFETCH_BYTES, _MM_HINT_T0);
      sum[s] = _mm512_add_epi64(sum[s], _mm512_loadu_si512(line));
    }
  /* Unsigned lanes: _mm512_reduce_add_epi64 adds as signed (UBSan). */
  uint64_t lanes[8], total = 0;
  _mm512_storeu_si512(lanes, _mm512_add_epi64(sum[0], sum[1]));
  for (int i = 0; i < 8; i++)
    total += lanes[i];
  return (float)(total & 0xffff);
}
#endif

/* ------------------------------------------------------------------------ */
/* Running a loop on several threads                                         */
/* ------------------------------------------------------------------------ */

/* Keeps the loops' results alive. */
static volatile float calibration_sink;

/* The threads wait for one signal, so they start together; `abandon` tells
 * them to return without running when not all of them could be created. */
typedef struct start_signal {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  bool go, abandon;
} start_signal;

typedef struct loop_thread {
  throughput_loop loop; /* NULL: read `bytes` at `data` with `read` instead */
  int64_t iterations;
  float seed;
  read_loop read;
  const unsigned char *data;
  size_t bytes;
  start_signal *start;
  double began, ended;
  float result;
} loop_thread;

static void *loop_thread_main(void *arg) {
  loop_thread *t = arg;
  pthread_mutex_lock(&t->start->lock);
  while (!t->start->go)
    pthread_cond_wait(&t->start->changed, &t->start->lock);
  bool abandon = t->start->abandon;
  pthread_mutex_unlock(&t->start->lock);
  if (abandon)
    return NULL;
  t->began = now_seconds();
  t->result = t->loop ? t->loop(t->iterations, t->seed) : t->read(t->data, t->bytes);
  t->ended = now_seconds();
  return NULL;
}

/* Wall seconds for `threads` threads each running `iterations` of `loop`
 * (or, without one, `read` over its share of `bytes` at `data`: contiguous
 * shares, multiples of 128 bytes), from the earliest start to the latest
 * end; NaN when threads cannot be started. */
static double run_on_threads(throughput_loop loop, int64_t iterations, read_loop read,
                             const unsigned char *data, size_t bytes, int threads) {
  loop_thread *state = calloc((size_t)threads, sizeof *state);
  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  if (state == NULL || ids == NULL) {
    free(state);
    free(ids);
    return NAN;
  }
  start_signal start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};
  int started = 0;
  for (; started < threads; started++) {
    size_t share = bytes / (size_t)threads / 128 * 128;
    state[started] = (loop_thread){loop,
                                   iterations,
                                   1.0f + 0.01f * (float)started,
                                   read,
                                   data ? data + (size_t)started * share : NULL,
                                   share,
                                   &start,
                                   0,
                                   0,
                                   0};
    if (pthread_create(&ids[started], NULL, loop_thread_main, &state[started]) != 0)
      break;
  }
  pthread_mutex_lock(&start.lock);
  start.go = true;
  start.abandon = started < threads;
  pthread_cond_broadcast(&start.changed);
  pthread_mutex_unlock(&start.lock);
  double first = INFINITY, last = -INFINITY;
  float sum = 0.0f;
  for (int i = 0; i < started; i++) {
    pthread_join(ids[i], NULL);
    first = state[i].began < first ? state[i].began : first;
    last = state[i].ended > last ? state[i].ended : last;
    sum += state[i].result;
  }
  calibration_sink = sum;
  pthread_cond_destroy(&start.changed);
  pthread_mutex_destroy(&start.lock);
  free(state);
  free(ids);
  return started == threads ? last - first : NAN;
}

static void measure_peak(throughput_loop loop, double flops_per_iteration, const char *isa,
                         int threads, double seconds, int repeats, host_peak *peak) {
  peak->gflops = NAN;
  peak->isa = isa;
  peak->threads = threads < 1 ? 1 : threads;
  threads = peak->threads;
  if (repeats < 1)
    repeats = 1;
  if (repeats > 32)
    repeats = 32;
  /* Size the loop on one thread (this also wakes the core from idle). */
  int64_t iterations = 1 << 14;
  double probe = 0.0;
  for (;;) {
    double start = now_seconds();
    calibration_sink = loop(iterations, 1.0f);
    probe = now_seconds() - start;
    if (probe >= 0.02 || iterations >= ((int64_t)1 << 40))
      break;
    iterations *= 2;
  }
  iterations = (int64_t)((double)iterations * seconds / (probe > 0.0 ? probe : 1e-3));
  if (iterations < 1024)
    iterations = 1024;
  double rates[32];
  int count = 0;
  for (int r = 0; r < repeats; r++) {
    double elapsed = run_on_threads(loop, iterations, NULL, NULL, 0, threads);
    if (isfinite(elapsed) && elapsed > 0.0)
      rates[count++] = flops_per_iteration * (double)iterations * threads / elapsed / 1e9;
  }
  /* The best run: other processes can only slow a loop that touches no
   * memory, so the fastest repeat is the closest to what the cores do. */
  for (int i = 0; i < count; i++)
    if (isnan(peak->gflops) || rates[i] > peak->gflops)
      peak->gflops = rates[i];
}

void measure_fma_peak(int threads, double seconds, int repeats, host_peak *peak) {
  host_cpu_features features;
  host_cpu_detect(&features);
#if CALIBRATE_X86
  if (features.avx512f) {
    measure_peak(loop_avx512, AVX512_FLOPS_PER_ITERATION, "avx512f", threads, seconds, repeats,
                 peak);
    return;
  }
  if (features.avx2 && features.fma) {
    measure_peak(loop_avx2, AVX2_FLOPS_PER_ITERATION, "avx2+fma", threads, seconds, repeats, peak);
    return;
  }
#endif
  measure_peak(loop_generic, GENERIC_FLOPS_PER_ITERATION, "generic", threads, seconds, repeats,
               peak);
}

void measure_bf16_dot_peak(int threads, double seconds, int repeats, host_peak *peak) {
  host_cpu_features features;
  host_cpu_detect(&features);
  peak->gflops = NAN;
  peak->isa = "avx512_bf16";
  peak->threads = threads < 1 ? 1 : threads;
#if CALIBRATE_X86
  if (features.avx512_bf16)
    measure_peak(loop_avx512_bf16, AVX512_BF16_FLOPS_PER_ITERATION, "avx512_bf16", threads, seconds,
                 repeats, peak);
#else
  (void)seconds;
  (void)repeats;
#endif
}

double measure_read_bandwidth(const void *data, size_t bytes, int threads) {
  if (threads < 1)
    threads = 1;
  size_t share = bytes / (size_t)threads / 128 * 128;
  if (data == NULL || share == 0)
    return NAN;
  read_loop read = read_generic;
#if CALIBRATE_X86
  host_cpu_features features;
  host_cpu_detect(&features);
  if (features.avx512f)
    read = read_avx512;
  else if (features.avx2)
    read = read_avx2;
#endif
  double elapsed = run_on_threads(NULL, 0, read, data, bytes, threads);
  return isfinite(elapsed) && elapsed > 0.0 ? (double)share * threads / elapsed / 1e9 : NAN;
}

/* ------------------------------------------------------------------------ */
/* Core-to-core hand-off                                                     */
/* ------------------------------------------------------------------------ */

typedef struct handoff_state {
  _Alignas(64) atomic_int turn; /* odd: the partner's move; even: the caller's */
  int round_trips;
  int cpu;
  bool pinned;
} handoff_state;

static bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

static void *handoff_partner(void *argument) {
  handoff_state *state = argument;
  state->pinned = pin_to(state->cpu);
  for (int i = 0; i < state->round_trips; i++) {
    while (atomic_load_explicit(&state->turn, memory_order_acquire) != 2 * i + 1)
      ;
    atomic_store_explicit(&state->turn, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

/* A thread on each CPU runs its side; the caller's thread is pinned only for
 * the measurement and gets its mask back. */
double measure_core_handoff_ns(int round_trips) {
#if defined(__linux__)
  cpu_set_t allowed;
  if (round_trips < 1 || sched_getaffinity(0, sizeof allowed, &allowed) != 0 ||
      CPU_COUNT(&allowed) < 2)
    return NAN;
  int cpus[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
    if (CPU_ISSET(c, &allowed))
      cpus[found++] = c;
  cpu_set_t before;
  if (pthread_getaffinity_np(pthread_self(), sizeof before, &before) != 0 || !pin_to(cpus[0]))
    return NAN;
  /* Other threads of this process (a plugin's, still polling after their
   * last work) would share the two CPUs: let them park first. */
  struct timespec nap = {0, 2000000};
  nanosleep(&nap, NULL);
  handoff_state state = {.round_trips = round_trips, .cpu = cpus[1]};
  atomic_init(&state.turn, 0);
  pthread_t partner;
  double best = INFINITY;
  if (pthread_create(&partner, NULL, handoff_partner, &state) == 0) {
    /* the fastest of eight batches: a batch the host interrupted says
     * nothing about the caches */
    const int batches = 8, per_batch = round_trips / batches > 0 ? round_trips / batches : 1;
    int done = 0;
    for (int batch = 0; batch < batches && done < round_trips; batch++) {
      const int first = done, end = batch == batches - 1 ? round_trips : done + per_batch;
      double start = now_seconds();
      for (; done < end; done++) {
        atomic_store_explicit(&state.turn, 2 * done + 1, memory_order_release);
        while (atomic_load_explicit(&state.turn, memory_order_acquire) != 2 * done + 2)
          ;
      }
      double per_trip = (now_seconds() - start) / (end - first);
      best = per_trip < best ? per_trip : best;
    }
    pthread_join(partner, NULL);
  }
  pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  return state.pinned && isfinite(best) ? best / 2.0 * 1e9 : NAN;
#else
  (void)round_trips;
  return NAN;
#endif
}
