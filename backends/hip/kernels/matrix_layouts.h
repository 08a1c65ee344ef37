/* SPDX-License-Identifier: Apache-2.0 */
/* Register layouts of the AMD matrix instructions tessera's HIP GEMM uses,
 * as pure index functions: (lane, register element) -> (row, k) of A,
 * (k, col) of B, (row, col) of C / D. Plain C (no HIP or CUDA keyword), so
 * the host test tests/hip/test_matrix_layouts.c checks the same code the
 * kernels run; matrix_core.h defines TSR_MX_FN as a host + device function
 * before including this.
 *
 * RUN: a lane's elements come in runs of RUN consecutive k (runs start at
 * multiples of RUN), so k-major fragments load as vectors.
 *
 * "Register element" r is the index into the builtin's vector operand: A and
 * B of a 16-bit instruction are vectors of 16-bit values (4 for MFMA, 16 for
 * gfx11 WMMA, 8 for gfx12 WMMA), C / D vectors of f32.
 *
 * Sources checked: AMD "CDNA3 Instruction Set Architecture" (MI300) and
 * "AMD Instinct MI200 (CDNA2) ISA", section on dense matrix (MFMA)
 * instructions, with the tables of AMD's "Matrix Instruction Calculator"
 * (ROCm/amd_matrix_instruction_calculator); AMD "RDNA3 Instruction Set
 * Architecture" WMMA section and GPUOpen "How to accelerate AI applications
 * on RDNA 3 using WMMA"; GPUOpen "Using the Matrix Cores of AMD RDNA 4
 * architecture GPUs" (gfx12 WMMA). LLVM's BuiltinsAMDGPU.def for the
 * builtins' operand types. */
#ifndef TESSERA_HIP_MATRIX_LAYOUTS_H
#define TESSERA_HIP_MATRIX_LAYOUTS_H

#ifndef TSR_MX_FN
#define TSR_MX_FN static inline
#endif

/* ---- v_mfma_f32_32x32x8_{bf16_1k,f16} (gfx90a, gfx94x; wave64) ----
 * A 32x8: lane holds row lane % 32, k 4 (lane / 32) .. + 3.
 * B 8x32: lane holds col lane % 32, same k.
 * D 32x32 (16 f32): col lane % 32; element r in row
 *   8 (r / 4) + 4 (lane / 32) + r % 4. */
enum { TSR_MFMA32_M = 32, TSR_MFMA32_N = 32, TSR_MFMA32_K = 8 };
enum { TSR_MFMA32_WAVE = 64, TSR_MFMA32_AB_REGS = 4, TSR_MFMA32_C_REGS = 16, TSR_MFMA32_RUN = 4 };
TSR_MX_FN int tsr_mfma32_a_row(int lane, int r) {
  (void)r;
  return lane % 32;
}
TSR_MX_FN int tsr_mfma32_a_k(int lane, int r) {
  return 4 * (lane / 32) + r;
}
TSR_MX_FN int tsr_mfma32_b_col(int lane, int r) {
  (void)r;
  return lane % 32;
}
TSR_MX_FN int tsr_mfma32_b_k(int lane, int r) {
  return 4 * (lane / 32) + r;
}
TSR_MX_FN int tsr_mfma32_c_row(int lane, int r) {
  return 8 * (r / 4) + 4 * (lane / 32) + r % 4;
}
TSR_MX_FN int tsr_mfma32_c_col(int lane, int r) {
  (void)r;
  return lane % 32;
}

/* ---- v_mfma_f32_16x16x16_{bf16_1k,f16} (gfx90a, gfx94x; wave64) ----
 * A 16x16: lane holds row lane % 16, k 4 (lane / 16) .. + 3.
 * B 16x16: lane holds col lane % 16, same k.
 * D 16x16 (4 f32): col lane % 16; element r in row 4 (lane / 16) + r. */
enum { TSR_MFMA16_M = 16, TSR_MFMA16_N = 16, TSR_MFMA16_K = 16 };
enum { TSR_MFMA16_WAVE = 64, TSR_MFMA16_AB_REGS = 4, TSR_MFMA16_C_REGS = 4, TSR_MFMA16_RUN = 4 };
TSR_MX_FN int tsr_mfma16_a_row(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_mfma16_a_k(int lane, int r) {
  return 4 * (lane / 16) + r;
}
TSR_MX_FN int tsr_mfma16_b_col(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_mfma16_b_k(int lane, int r) {
  return 4 * (lane / 16) + r;
}
TSR_MX_FN int tsr_mfma16_c_row(int lane, int r) {
  return 4 * (lane / 16) + r;
}
TSR_MX_FN int tsr_mfma16_c_col(int lane, int r) {
  (void)r;
  return lane % 16;
}

/* ---- v_mfma_f32_16x16x4_f32 (gfx90a, gfx94x; wave64), true f32 ----
 * A 16x4: lane holds row lane % 16 at k lane / 16 (one f32).
 * B 4x16: lane holds col lane % 16 at k lane / 16.
 * D: as v_mfma_f32_16x16x16. */
enum { TSR_MFMA16F32_M = 16, TSR_MFMA16F32_N = 16, TSR_MFMA16F32_K = 4 };
enum {
  TSR_MFMA16F32_WAVE = 64,
  TSR_MFMA16F32_AB_REGS = 1,
  TSR_MFMA16F32_C_REGS = 4,
  TSR_MFMA16F32_RUN = 1
};
TSR_MX_FN int tsr_mfma16f32_a_row(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_mfma16f32_a_k(int lane, int r) {
  return lane / 16 + r;
}
TSR_MX_FN int tsr_mfma16f32_b_col(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_mfma16f32_b_k(int lane, int r) {
  return lane / 16 + r;
}
TSR_MX_FN int tsr_mfma16f32_c_row(int lane, int r) {
  return 4 * (lane / 16) + r;
}
TSR_MX_FN int tsr_mfma16f32_c_col(int lane, int r) {
  (void)r;
  return lane % 16;
}

/* ---- v_wmma_f32_16x16x16_{f16,bf16} on gfx11 (RDNA3; wave32) ----
 * A 16x16: lane holds all of row lane % 16 (element r = k r); lanes 16-31
 *   must hold the same values as lanes 0-15.
 * B 16x16: lane holds all of col lane % 16 (element r = k r), replicated
 *   the same way.
 * D 16x16 (8 f32): col lane % 16; element r in row 2 r + lane / 16 (the two
 *   lane halves interleave rows). */
enum { TSR_WMMA11_M = 16, TSR_WMMA11_N = 16, TSR_WMMA11_K = 16 };
enum { TSR_WMMA11_WAVE = 32, TSR_WMMA11_AB_REGS = 16, TSR_WMMA11_C_REGS = 8, TSR_WMMA11_RUN = 16 };
TSR_MX_FN int tsr_wmma11_a_row(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_wmma11_a_k(int lane, int r) {
  (void)lane;
  return r;
}
TSR_MX_FN int tsr_wmma11_b_col(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_wmma11_b_k(int lane, int r) {
  (void)lane;
  return r;
}
TSR_MX_FN int tsr_wmma11_c_row(int lane, int r) {
  return 2 * r + lane / 16;
}
TSR_MX_FN int tsr_wmma11_c_col(int lane, int r) {
  (void)r;
  return lane % 16;
}

/* ---- v_wmma_f32_16x16x16_{f16,bf16} on gfx12 (RDNA4; wave32) ----
 * A 16x16: lane holds row lane % 16, k 8 (lane / 16) .. + 7 (no
 *   replication: each element once).
 * B 16x16: lane holds col lane % 16, same k.
 * D 16x16 (8 f32): col lane % 16; element r in row 8 (lane / 16) + r. */
enum { TSR_WMMA12_M = 16, TSR_WMMA12_N = 16, TSR_WMMA12_K = 16 };
enum { TSR_WMMA12_WAVE = 32, TSR_WMMA12_AB_REGS = 8, TSR_WMMA12_C_REGS = 8, TSR_WMMA12_RUN = 8 };
TSR_MX_FN int tsr_wmma12_a_row(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_wmma12_a_k(int lane, int r) {
  return 8 * (lane / 16) + r;
}
TSR_MX_FN int tsr_wmma12_b_col(int lane, int r) {
  (void)r;
  return lane % 16;
}
TSR_MX_FN int tsr_wmma12_b_k(int lane, int r) {
  return 8 * (lane / 16) + r;
}
TSR_MX_FN int tsr_wmma12_c_row(int lane, int r) {
  return 8 * (lane / 16) + r;
}
TSR_MX_FN int tsr_wmma12_c_col(int lane, int r) {
  (void)r;
  return lane % 16;
}

#endif /* TESSERA_HIP_MATRIX_LAYOUTS_H */
