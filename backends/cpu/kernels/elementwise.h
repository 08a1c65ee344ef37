/* SPDX-License-Identifier: Apache-2.0 */
/* What the elementwise files share (elementwise.c: the plain C kernels and
 * the ops; elementwise_avx2.c, elementwise_avx512.c: the vector kernels):
 * the table of array kernels of one vector level and the constants of their
 * formulas. */
#ifndef TESSERA_CPU_ELEMENTWISE_H
#define TESSERA_CPU_ELEMENTWISE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "cpu_internal.h"
#include "cpu_kernel_util.h"

/* How far ahead (in elements) streaming loops prefetch their inputs. */
enum { PREFETCH_AHEAD_ELEMENTS = 2048 };

static const float SQRT_2_OVER_PI = 0.7978845608028654f;
static const float INV_SQRT_2 = 0.7071067811865476f;

/* erfc(a) for a >= 0 in the vector kernels: t * H(t) * e^(-a^2) with
 * t = 1 / (1 + ERFC_P a) in (0, 1]. H is a degree-10 polynomial fitted here
 * (mpmath chebyfit of erfc(a) e^(a^2) / t over t in [0, 1]): relative error
 * 8e-9 in exact arithmetic, 1e-7 evaluated in f32 by Horner's rule. Highest
 * degree first. */
static const float ERFC_P = 0.4f;
static const float ERFC_A_MAX = 11.0f;
static const float ERFC_H[11] = {-2.986862883e-02f, 1.438410729e-01f,  -2.430417389e-01f,
                                 1.468032449e-01f,  -5.379316583e-02f, 8.712064475e-02f,
                                 1.180951223e-01f,  1.718905717e-01f,  2.076007277e-01f,
                                 2.256763130e-01f,  2.256758362e-01f};

/* ---- array kernels ---- */

/* `prefetch`: the inputs are in memory and are prefetched ahead. */
typedef struct elementwise_kernels {
  void (*swiglu)(float *y, const float *gate, const float *up, int64_t count, int stream,
                 int prefetch);
  void (*gelu)(float *y, const float *x, int64_t count, int approximate, int stream, int prefetch);
  /* cos and sin of position * inverse_frequency[i], i < half, computed in
   * double and rounded */
  void (*angles)(float *cosines, float *sines, double position, const double *inverse_frequency,
                 int64_t half);
  /* neox: pairs (i, i + half) of the first 2 * half channels turn; the
   * channels from 2 * half to dim are copied */
  void (*rope_neox)(float *y, const float *x, const float *cosines, const float *sines,
                    int64_t half, int64_t dim, int stream);
  /* gpt-j: pairs (2i, 2i + 1); cos2 and sin2 hold each pair's cosine twice
   * and its sine as (-s, s) */
  void (*rope_gptj)(float *y, const float *x, const float *cos2, const float *sin2, int64_t rotary,
                    int64_t dim, int stream);
  /* SwiGLU on unit-stride f16 or bf16 rows of one dtype, converted in
   * registers (no staging pass); NULL: the staged f32 path. Results equal
   * the staged path's bit for bit. */
  void (*swiglu16)(uint16_t *y, const uint16_t *gate, const uint16_t *up, int64_t count,
                   int32_t dtype, int stream, int prefetch);
} elementwise_kernels;

/* The reduction of angles to [-pi/4, pi/4] (vector kernels, in double):
 * angle - k pi/2 with pi/2 in two parts, the first through an FMA. */
static const double PI_OVER_2_HIGH = 1.5707963267948966;
static const double PI_OVER_2_LOW = 6.123233995736766e-17;
static const double TWO_OVER_PI = 0.6366197723675814;

/* What the vector map kernels read: one or two inputs, prefetched or not. */
typedef struct map_context {
  const float *a, *b;
  int prefetch;
} map_context;

/* Plain C kernels the vector ones finish with. */
static inline void angles_generic(float *cosines, float *sines, double position,
                                  const double *inverse_frequency, int64_t half) {
  for (int64_t i = 0; i < half; i++) {
    double angle = position * inverse_frequency[i];
    cosines[i] = (float)cos(angle);
    sines[i] = (float)sin(angle);
  }
}

static inline void rope_gptj_generic(float *y, const float *x, const float *cos2, const float *sin2,
                                     int64_t rotary, int64_t dim, int stream) {
  (void)stream;
  for (int64_t i = 0; i < rotary; i += 2) {
    float first = x[i], second = x[i + 1];
    y[i] = first * cos2[i] + second * sin2[i];
    y[i + 1] = second * cos2[i + 1] + first * sin2[i + 1];
  }
  for (int64_t i = rotary; i < dim; i++)
    y[i] = x[i];
}

/* The tables of each level (elementwise.c, elementwise_avx2.c,
 * elementwise_avx512.c) and select_kernels. */
CPU_KERNEL_TABLES(elementwise_kernels, elementwise)

#endif /* TESSERA_CPU_ELEMENTWISE_H */
