/* SPDX-License-Identifier: Apache-2.0 */
/* Host test of backends/hip/kernels/matrix_layouts.h, the register layouts
 * the HIP matrix-core GEMM kernels use (and their NVIDIA emulation). Each
 * instruction's layout is written here a second time, independently, in the
 * form AMD's documents give it: which lane and register element hold matrix
 * element (row, k), (k, col) or (row, col) (the inverse of the header's
 * functions). Checked per instruction:
 *  - every (lane, element) maps inside the tile, and the map is a bijection
 *    onto it (gfx11 WMMA A and B: every element twice, lanes 16-31 repeating
 *    lanes 0-15);
 *  - the header agrees with the documented layout;
 *  - runs of RUN consecutive k per lane (the kernels' vector LDS reads) and
 *    neighbouring lanes holding neighbouring columns of the same rows (the
 *    epilogue's lane swap);
 *  - one instruction simulated: random A, B, C placed in registers by the
 *    header, D formed by the documented semantics (the hardware reads each
 *    element from where the document says it is), read back by the header
 *    and compared with the plain product.
 * Sources: AMD CDNA3 ISA (MI300) / CDNA2 ISA (MI200) dense MFMA sections and
 * AMD's Matrix Instruction Calculator; RDNA3 ISA WMMA section and GPUOpen
 * "How to accelerate AI applications on RDNA 3 using WMMA"; GPUOpen "Using
 * the Matrix Cores of AMD RDNA 4 architecture GPUs". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matrix_layouts.h"

typedef int (*index_fn)(int lane, int r);
/* Documented place of an element: lane (copy 0 or 1 for replicated
 * operands) and register element. */
typedef void (*place_fn)(int row, int col, int copy, int *lane, int *r);

typedef struct layout {
  const char *name;
  int m, n, k, wave, ab, c, run, copies; /* copies: 2 where lanes 16-31 repeat 0-15 */
  index_fn a_row, a_k, b_col, b_k, c_row, c_col;
  place_fn doc_a, doc_b, doc_c; /* doc_a(row, k), doc_b(k, col), doc_c(row, col) */
} layout;

/* ---- the documented layouts ---- */

/* v_mfma_f32_32x32x8: A and B in two k blocks of 4 (lanes 0-31, 32-63);
 * D in 4 groups of 8 rows, each group 2 blocks of 4 rows over the lane
 * halves, 4 registers a block. */
static void doc_mfma32_a(int i, int k, int copy, int *lane, int *r) {
  (void)copy;
  *lane = i + 32 * (k / 4);
  *r = k % 4;
}
static void doc_mfma32_b(int k, int j, int copy, int *lane, int *r) {
  doc_mfma32_a(j, k, copy, lane, r);
}
static void doc_mfma32_c(int i, int j, int copy, int *lane, int *r) {
  (void)copy;
  *lane = j + 32 * ((i % 8) / 4);
  *r = 4 * (i / 8) + i % 4;
}
/* v_mfma_f32_16x16x16: k blocks of 4 over four 16-lane groups; D rows in
 * blocks of 4 over the groups. */
static void doc_mfma16_a(int i, int k, int copy, int *lane, int *r) {
  (void)copy;
  *lane = i + 16 * (k / 4);
  *r = k % 4;
}
static void doc_mfma16_b(int k, int j, int copy, int *lane, int *r) {
  doc_mfma16_a(j, k, copy, lane, r);
}
static void doc_mfma16_c(int i, int j, int copy, int *lane, int *r) {
  (void)copy;
  *lane = j + 16 * (i / 4);
  *r = i % 4;
}
/* v_mfma_f32_16x16x4_f32: one f32 a lane, k = lane group. */
static void doc_mfma16f32_a(int i, int k, int copy, int *lane, int *r) {
  (void)copy;
  *lane = i + 16 * k;
  *r = 0;
}
static void doc_mfma16f32_b(int k, int j, int copy, int *lane, int *r) {
  doc_mfma16f32_a(j, k, copy, lane, r);
}
/* gfx11 WMMA: a row of A (column of B) per lane, replicated in both lane
 * halves; D: even rows in lanes 0-15, odd rows in lanes 16-31. */
static void doc_wmma11_a(int i, int k, int copy, int *lane, int *r) {
  *lane = i + 16 * copy;
  *r = k;
}
static void doc_wmma11_b(int k, int j, int copy, int *lane, int *r) {
  doc_wmma11_a(j, k, copy, lane, r);
}
static void doc_wmma11_c(int i, int j, int copy, int *lane, int *r) {
  (void)copy;
  *lane = j + 16 * (i % 2);
  *r = i / 2;
}
/* gfx12 WMMA: k 0-7 in lanes 0-15, k 8-15 in lanes 16-31; D rows 0-7 in
 * lanes 0-15, rows 8-15 in lanes 16-31. */
static void doc_wmma12_a(int i, int k, int copy, int *lane, int *r) {
  (void)copy;
  *lane = i + 16 * (k / 8);
  *r = k % 8;
}
static void doc_wmma12_b(int k, int j, int copy, int *lane, int *r) {
  doc_wmma12_a(j, k, copy, lane, r);
}
static void doc_wmma12_c(int i, int j, int copy, int *lane, int *r) {
  (void)copy;
  *lane = j + 16 * (i / 8);
  *r = i % 8;
}

#define LAYOUT(label, P, pre, copies, da, db, dc)                                                  \
  {                                                                                                \
    label, P##_M, P##_N, P##_K, P##_WAVE, P##_AB_REGS, P##_C_REGS, P##_RUN, copies, pre##_a_row,   \
        pre##_a_k, pre##_b_col, pre##_b_k, pre##_c_row, pre##_c_col, da, db, dc                    \
  }

static const layout layouts[] = {
    LAYOUT("v_mfma_f32_32x32x8 bf16/f16", TSR_MFMA32, tsr_mfma32, 1, doc_mfma32_a, doc_mfma32_b,
           doc_mfma32_c),
    LAYOUT("v_mfma_f32_16x16x16 bf16/f16", TSR_MFMA16, tsr_mfma16, 1, doc_mfma16_a, doc_mfma16_b,
           doc_mfma16_c),
    LAYOUT("v_mfma_f32_16x16x4 f32", TSR_MFMA16F32, tsr_mfma16f32, 1, doc_mfma16f32_a,
           doc_mfma16f32_b, doc_mfma16_c),
    LAYOUT("gfx11 v_wmma_f32_16x16x16", TSR_WMMA11, tsr_wmma11, 2, doc_wmma11_a, doc_wmma11_b,
           doc_wmma11_c),
    LAYOUT("gfx12 v_wmma_f32_16x16x16", TSR_WMMA12, tsr_wmma12, 1, doc_wmma12_a, doc_wmma12_b,
           doc_wmma12_c),
};

static int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      if (failures < 40) {                                                                         \
        printf("FAIL %s: ", l->name);                                                              \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
      }                                                                                            \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

enum { MAX_LANES = 64, MAX_REGS = 16, MAX_DIM = 32 };

/* One operand (A: rows x k; B: cols x k, given as (col, k)): bijection,
 * replication, agreement with the document, runs. */
static void check_operand(const layout *l, const char *what, index_fn outer, index_fn kf,
                          int outer_n, place_fn doc, int is_b) {
  int hits[MAX_DIM][MAX_DIM];
  memset(hits, 0, sizeof hits);
  for (int lane = 0; lane < l->wave; lane++) {
    for (int r = 0; r < l->ab; r++) {
      const int o = outer(lane, r), k = kf(lane, r);
      CHECK(o >= 0 && o < outer_n && k >= 0 && k < l->k, "%s lane %d element %d -> (%d, %d)", what,
            lane, r, o, k);
      if (o < 0 || o >= outer_n || k < 0 || k >= l->k)
        continue;
      hits[o][k]++;
      /* The document places (o, k) at this lane (some copy) and element. */
      int found = 0;
      for (int copy = 0; copy < l->copies; copy++) {
        int dl, dr;
        if (is_b)
          doc(k, o, copy, &dl, &dr);
        else
          doc(o, k, copy, &dl, &dr);
        found |= dl == lane && dr == r;
      }
      CHECK(found, "%s lane %d element %d holds (%d, %d), not where the document puts it", what,
            lane, r, o, k);
      if (l->copies == 2 && lane < 16)
        CHECK(outer(lane + 16, r) == o && kf(lane + 16, r) == k,
              "%s lanes %d and %d differ at element %d", what, lane, lane + 16, r);
      const int r0 = r - r % l->run;
      CHECK(kf(lane, r0) % l->run == 0 && kf(lane, r0) + r % l->run == k && outer(lane, r0) == o,
            "%s lane %d element %d breaks the k runs of %d", what, lane, r, l->run);
    }
  }
  for (int o = 0; o < outer_n; o++)
    for (int k = 0; k < l->k; k++)
      CHECK(hits[o][k] == l->copies, "%s element (%d, %d) held %d times, expected %d", what, o, k,
            hits[o][k], l->copies);
}

static void check_c(const layout *l) {
  int hits[MAX_DIM][MAX_DIM];
  memset(hits, 0, sizeof hits);
  for (int lane = 0; lane < l->wave; lane++) {
    for (int r = 0; r < l->c; r++) {
      const int i = l->c_row(lane, r), j = l->c_col(lane, r);
      CHECK(i >= 0 && i < l->m && j >= 0 && j < l->n, "D lane %d element %d -> (%d, %d)", lane, r,
            i, j);
      if (i < 0 || i >= l->m || j < 0 || j >= l->n)
        continue;
      hits[i][j]++;
      int dl, dr;
      l->doc_c(i, j, 0, &dl, &dr);
      CHECK(dl == lane && dr == r, "D lane %d element %d holds (%d, %d), document: lane %d el %d",
            lane, r, i, j, dl, dr);
      CHECK(l->c_row(lane ^ 1, r) == i && l->c_col(lane ^ 1, r) == (j ^ 1),
            "D lanes %d and %d are not neighbouring columns of one row", lane, lane ^ 1);
    }
  }
  for (int i = 0; i < l->m; i++)
    for (int j = 0; j < l->n; j++)
      CHECK(hits[i][j] == 1, "D element (%d, %d) held %d times", i, j, hits[i][j]);
}

static double uniform(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (double)(*state >> 8) / (double)(1u << 24) - 0.5;
}

/* One instruction: registers filled by the header, D by the document. */
static void simulate(const layout *l, unsigned seed) {
  static double a[MAX_DIM][MAX_DIM], b[MAX_DIM][MAX_DIM], c[MAX_DIM][MAX_DIM];
  static double areg[MAX_LANES][MAX_REGS], breg[MAX_LANES][MAX_REGS];
  static double creg[MAX_LANES][MAX_REGS], dreg[MAX_LANES][MAX_REGS];
  for (int i = 0; i < l->m; i++)
    for (int k = 0; k < l->k; k++)
      a[i][k] = uniform(&seed);
  for (int k = 0; k < l->k; k++)
    for (int j = 0; j < l->n; j++)
      b[k][j] = uniform(&seed);
  for (int i = 0; i < l->m; i++)
    for (int j = 0; j < l->n; j++)
      c[i][j] = uniform(&seed);
  for (int lane = 0; lane < l->wave; lane++) {
    for (int r = 0; r < l->ab; r++) {
      areg[lane][r] = a[l->a_row(lane, r) % MAX_DIM][l->a_k(lane, r) % MAX_DIM];
      breg[lane][r] = b[l->b_k(lane, r) % MAX_DIM][l->b_col(lane, r) % MAX_DIM];
    }
    for (int r = 0; r < l->c; r++)
      creg[lane][r] = c[l->c_row(lane, r) % MAX_DIM][l->c_col(lane, r) % MAX_DIM];
  }
  memset(dreg, 0, sizeof dreg);
  for (int i = 0; i < l->m; i++) {
    for (int j = 0; j < l->n; j++) {
      int dl, dr;
      l->doc_c(i, j, 0, &dl, &dr);
      double sum = creg[dl][dr];
      for (int k = 0; k < l->k; k++) {
        int al, ar, bl, br;
        l->doc_a(i, k, 0, &al, &ar);
        l->doc_b(k, j, 0, &bl, &br);
        sum += areg[al][ar] * breg[bl][br];
      }
      dreg[dl][dr] = sum;
    }
  }
  int bad = 0;
  for (int lane = 0; lane < l->wave; lane++) {
    for (int r = 0; r < l->c; r++) {
      const int i = l->c_row(lane, r) % MAX_DIM, j = l->c_col(lane, r) % MAX_DIM;
      double want = c[i][j];
      for (int k = 0; k < l->k; k++)
        want += a[i][k] * b[k][j];
      if (fabs(dreg[lane][r] - want) > 1e-12 && bad++ < 3)
        CHECK(0, "simulated D at lane %d element %d (%d, %d): %g, product %g", lane, r, i, j,
              dreg[lane][r], want);
    }
  }
}

int main(void) {
  for (size_t n = 0; n < sizeof layouts / sizeof layouts[0]; n++) {
    const layout *l = &layouts[n];
    const int before = failures;
    if (l->wave * l->ab != l->m * l->k * l->copies || l->wave * l->ab != l->n * l->k * l->copies ||
        l->wave * l->c != l->m * l->n)
      CHECK(0, "register counts do not cover the tiles");
    check_operand(l, "A", l->a_row, l->a_k, l->m, l->doc_a, 0);
    check_operand(l, "B", l->b_col, l->b_k, l->n, l->doc_b, 1);
    check_c(l);
    for (unsigned seed = 1; seed <= 3; seed++)
      simulate(l, seed * 2654435761u);
    printf("%s %s\n", failures == before ? "ok  " : "FAIL", l->name);
  }
  if (failures)
    printf("%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
