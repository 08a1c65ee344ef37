/* SPDX-License-Identifier: Apache-2.0 */
/* The host CPU's arithmetic ceiling for `tessera bench`: the vector
 * instruction sets the CPU and the operating system support (CPUID feature
 * bits and the register state enabled in XCR0, never model tables), and the
 * measured throughput of independent fused multiply-adds on a given number
 * of threads with the widest of them. */
#ifndef TESSERA_TOOLS_CALIBRATE_H
#define TESSERA_TOOLS_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct host_cpu_features {
  bool fma;         /* FMA3 with AVX state enabled by the OS */
  bool avx2;        /* AVX2 with AVX state enabled by the OS */
  bool avx512f;     /* AVX-512F with opmask and ZMM state enabled by the OS */
  bool avx512_bf16; /* AVX512_BF16 (vdpbf16ps) on top of avx512f */
} host_cpu_features;

/* Detects the features once; all false on other architectures. */
void host_cpu_detect(host_cpu_features *features);

/* A measured arithmetic peak. */
typedef struct host_peak {
  double gflops;   /* NaN when not measured */
  const char *isa; /* the loop that ran: "avx512f", "avx2+fma", "scalar", "avx512_bf16" */
  int threads;
} host_peak;

/* f32 multiply-add throughput: every thread runs a loop of independent
 * FMAs (no loads, no dependencies beyond the latency the accumulators
 * hide) with the widest instruction set present; the rate is all threads'
 * operations (multiply-add = 2) over the wall time from a common start to
 * the last thread's end; the best of `repeats` measurements, each about
 * `seconds` long (other processes on the machine can only slow it). */
void measure_fma_peak(int threads, double seconds, int repeats, host_peak *peak);

/* The same for bf16 dot products with f32 accumulation (vdpbf16ps: two
 * products and their sum per lane, 4 operations); NaN when the CPU or OS
 * lacks AVX512_BF16. */
void measure_bf16_dot_peak(int threads, double seconds, int repeats, host_peak *peak);

/* Read-only memory bandwidth (GB/s) of one pass over `bytes` at `data` on
 * `threads` threads, each summing its contiguous share with the widest
 * vector loads present, as two sequential streams with a software prefetch
 * ahead (the pattern that read fastest on the development VM); NaN when the
 * threads cannot be started. Rows that only read (GEMV weights) are bounded
 * by it, which on some machines is well under the copy rate (a copy's
 * streaming stores do not hold the read buffers its loads need). */
double measure_read_bandwidth(const void *data, size_t bytes, int threads);

/* The one-way time (ns) of handing a cache line back and forth between
 * threads pinned to the first two CPUs this process may use, over
 * `round_trips` round trips; NaN with fewer than two CPUs. Cores that share
 * a cache take tens of nanoseconds; cores on different chiplets (or a VM's
 * vCPUs the host placed so) well over 100, and then data one core writes
 * and another reads on every call costs more than the work: the host's
 * placement, which a VM may change from one minute to the next. */
double measure_core_handoff_ns(int round_trips);

#endif /* TESSERA_TOOLS_CALIBRATE_H */
