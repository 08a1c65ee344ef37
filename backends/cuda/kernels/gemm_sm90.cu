/* SPDX-License-Identifier: Apache-2.0 */
/* GEMM on Hopper (sm_90a) tensor cores: wgmma fed by TMA; bf16/f16, and f32
 * inputs as tf32 (K slices of 32 f32, both operands K-major: the host packs
 * the others).
 *
 * A block is three warpgroups. Warpgroup 0 (the producer, its registers
 * lowered with setmaxnreg) has one thread that issues the TMA loads of each
 * 64-deep K slice of A (128 rows) and B (BN columns) into a STAGES-deep ring
 * of 128-byte-swizzled shared-memory tiles; each stage has a "full" mbarrier
 * (the copy engine's byte count) and an "empty" one (one arrival per consumer
 * warp once its wgmma reading the stage has completed). Warpgroups 1 and 2
 * (the consumers, registers raised) each own 64 rows of the tile and run
 * wgmma m64nBNk16 from shared memory into f32 accumulators, keeping one
 * K slice of wgmma in flight. The grid is persistent: every block walks the
 * tiles blockIdx.x, blockIdx.x + gridDim.x, ... in the grouped order of
 * resolve_tile_at, so the producer fetches the next tile while the consumers
 * run the epilogue of the last one.
 *
 * Transposes cost nothing: each operand's tensor map runs along its unit
 * stride, and the wgmma descriptor says whether the tile is K-major ([row][k],
 * one 128-byte row per row of A or B) or MN-major ([k][row] in 64-row chunks,
 * the descriptor's transpose bit set). Epilogue: full tiles of a plain
 * 16-bit D get alpha * acc stored straight from the accumulators; the rest
 * goes through gemm.cu's epilogue_pair (beta * C, bias, activation, any D
 * strides, partial tiles). Grouped GEMM runs through the
 * same kernel: A's map covers the stacked rows of all groups (rows past a
 * group's end are loaded but never stored), B's third dim is the group.
 *
 * Built for every target; outside sm_90a the kernels trap (the host offers
 * them only on compute capability 9.0). */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"
#include "sm90.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TSR_GPU_HAS_WGMMA 1
#else
#define TSR_GPU_HAS_WGMMA 0
#endif

namespace {

constexpr int WGMMA_BM = 128, WGMMA_THREADS = 384;
/* A K slice is 128 bytes of each row: 64 16-bit or 32 tf32 elements. */
constexpr uint32_t WGMMA_ROW_BYTES = 128;
template <typename T> struct wgmma_k {
  static constexpr int BK = (int)(WGMMA_ROW_BYTES / sizeof(T));
};
/* One 64-row chunk of an MN-major tile, or 64 rows of a K-major one: 64 x 64
 * 16-bit elements. */
constexpr uint32_t WGMMA_CHUNK_BYTES = 64 * 64 * 2;

#if TSR_GPU_HAS_WGMMA

TSR_DEVICE void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

TSR_DEVICE void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

TSR_DEVICE void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Returns once the phase of parity `parity` has completed. */
TSR_DEVICE void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred done;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, done;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

/* One box of a 3-D tensor map into shared memory, completing on `bar`. */
TSR_DEVICE void tma_load_3d(uint32_t dst, const tsr_gpu_tensor_map *map, uint32_t bar, int32_t c0,
                            int32_t c1, int32_t c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
               "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

/* Keeps the compiler from moving reads of an accumulator above the wait
 * for the wgmma that writes it. */
TSR_DEVICE void wgmma_fence_operand(float &r) {
  asm volatile("" : "+f"(r)::"memory");
}

/* Shared-memory matrix descriptor, 128-byte swizzle: start address, leading
 * and stride byte offsets (16-byte units). K-major tiles: stride = 1024
 * bytes between groups of 8 rows, leading unused. MN-major tiles: stride =
 * 1024 bytes between groups of 8 k, leading = one 64-row chunk. */
TSR_DEVICE uint64_t wgmma_descriptor(uint32_t address, uint32_t leading, uint32_t stride) {
  return (uint64_t)((address & 0x3FFFF) >> 4) | ((uint64_t)(leading >> 4) << 16) |
         ((uint64_t)(stride >> 4) << 32) | (1ull << 62);
}

/* D[64 x 256] += A[64 x 16] B[16 x 256], both from shared memory through
 * descriptors; TRANS_A / TRANS_B: the operand is MN-major in shared memory. */
template <typename T, int TRANS_A, int TRANS_B>
TSR_DEVICE void wgmma_m64n256k16(float *d, uint64_t desc_a, uint64_t desc_b) {
#define TSR_WGMMA_M64N256K16(type)                                                                 \
  asm volatile(                                                                                    \
      "{\n.reg .pred scale_d;\nsetp.ne.b32 scale_d, %130, 0;\n"                                    \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." type "." type " "                             \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "     \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
      "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, " \
      "%73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, " \
      "%91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, "    \
      "%107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, " \
      "%122, %123, %124, %125, %126, %127}, "                                                      \
      "%128, %129, scale_d, 1, 1, %131, %132;\n}\n"                                                \
      : TSR_WGMMA_ACC128(d)                                                                        \
      : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TRANS_A), "n"(TRANS_B))
  if constexpr (std::is_same<T, tsr_bf16>::value)
    TSR_WGMMA_M64N256K16("bf16");
  else
    TSR_WGMMA_M64N256K16("f16");
#undef TSR_WGMMA_M64N256K16
}

/* D[64 x 128] += A[64 x 16] B[16 x 128], both from shared memory through
 * descriptors; TRANS_A / TRANS_B: the operand is MN-major in shared memory. */
template <typename T, int TRANS_A, int TRANS_B>
TSR_DEVICE void wgmma_m64n128k16(float *d, uint64_t desc_a, uint64_t desc_b) {
#define TSR_WGMMA_M64N128K16(type)                                                                 \
  asm volatile("{\n.reg .pred scale_d;\nsetp.ne.b32 scale_d, %66, 0;\n"                            \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." type "." type " "                    \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "  \
               "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "  \
               "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "           \
               "%64, %65, scale_d, 1, 1, %67, %68;\n}\n"                                           \
               : TSR_WGMMA_ACC64(d)                                                                \
               : "l"(desc_a), "l"(desc_b), "r"(1), "n"(TRANS_A), "n"(TRANS_B))
  if constexpr (std::is_same<T, tsr_bf16>::value)
    TSR_WGMMA_M64N128K16("bf16");
  else
    TSR_WGMMA_M64N128K16("f16");
#undef TSR_WGMMA_M64N128K16
}

/* tf32 (f32 bits, the low 13 of the mantissa ignored): both operands
 * K-major, no transpose operands. */
TSR_DEVICE void wgmma_m64n256k8_tf32(float *d, uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred scale_d;\nsetp.ne.b32 scale_d, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
      "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, "
      "%73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, "
      "%91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, "
      "%107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, "
      "%122, %123, %124, %125, %126, %127}, "
      "%128, %129, scale_d, 1, 1;\n}\n"
      : TSR_WGMMA_ACC128(d)
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

TSR_DEVICE void wgmma_m64n128k8_tf32(float *d, uint64_t desc_a, uint64_t desc_b) {
  asm volatile("{\n.reg .pred scale_d;\nsetp.ne.b32 scale_d, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, "
               "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, "
               "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, "
               "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "%64, %65, scale_d, 1, 1;\n}\n"
               : TSR_WGMMA_ACC64(d)
               : "l"(desc_a), "l"(desc_b), "r"(1));
}

/* Where tile `linear` of the launch lies: its epilogue pointers and the
 * tensor-map coordinates of its A rows and of the batch entry or group. */
struct wgmma_tile {
  gemm_tile t;
  int32_t a_row, a_z, b_z;
};

TSR_DEVICE void wgmma_locate(const tsr_gpu_gemm_sm90_params &P, int64_t linear, int bn,
                             wgmma_tile &w) {
  const gemm_params &p = P.gemm;
  int group;
  if (p.group_count > 0) {
    resolve_tile_at(p, linear, 0, WGMMA_BM, bn, w.t, group);
    w.a_row = (int32_t)(p.group_row_start[group] + w.t.m0);
    w.a_z = 0;
    w.b_z = P.b_batched ? p.group_index[group] : 0;
  } else {
    int64_t per_batch = (int64_t)p.tiles_m * p.tiles_n;
    int64_t batch = (int64_t)p.batch_offset + linear / per_batch;
    resolve_tile_at(p, linear % per_batch, batch, WGMMA_BM, bn, w.t, group);
    w.a_row = (int32_t)w.t.m0;
    w.a_z = P.a_batched ? (int32_t)batch : 0;
    w.b_z = P.b_batched ? (int32_t)batch : 0;
  }
}

TSR_DEVICE int64_t wgmma_tile_count(const gemm_params &p) {
  return p.group_count > 0 ? (int64_t)p.group_tile_start[p.group_count]
                           : (int64_t)p.tiles_m * p.tiles_n * p.batch_count;
}

/* The producer thread: TMA loads of every K slice of every tile of this
 * block into the stage ring. */
template <typename T, int BN, int STAGES>
TSR_DEVICE void wgmma_produce(const tsr_gpu_gemm_sm90_params &P, uint32_t a_smem, uint32_t b_smem,
                              uint32_t full, uint32_t empty) {
  constexpr int BK = wgmma_k<T>::BK;
  constexpr uint32_t A_BYTES = WGMMA_BM * WGMMA_ROW_BYTES, B_BYTES = BN * WGMMA_ROW_BYTES;
  const gemm_params &p = P.gemm;
  const int64_t tiles = wgmma_tile_count(p);
  const int32_t k_tiles = (int32_t)((p.k + BK - 1) / BK);
  const bool a_k_major = p.a_k_major != 0, b_k_major = p.b_k_major != 0;
  int stage = 0;
  uint32_t phase = 0;
  for (int64_t linear = blockIdx.x; linear < tiles; linear += gridDim.x) {
    wgmma_tile w;
    wgmma_locate(P, linear, BN, w);
    const int32_t n0 = (int32_t)w.t.n0;
    for (int32_t kt = 0; kt < k_tiles; kt++) {
      const uint32_t full_bar = full + 8 * stage;
      mbarrier_wait(empty + 8 * stage, phase ^ 1);
      mbarrier_arrive_expect_tx(full_bar, A_BYTES + B_BYTES);
      const int32_t k0 = kt * BK;
      const uint32_t a_dst = a_smem + stage * A_BYTES, b_dst = b_smem + stage * B_BYTES;
      if (a_k_major) {
        tma_load_3d(a_dst, &P.map_a, full_bar, k0, w.a_row, w.a_z);
      } else {
#pragma unroll
        for (int c = 0; c < WGMMA_BM / 64; c++)
          tma_load_3d(a_dst + c * WGMMA_CHUNK_BYTES, &P.map_a, full_bar, w.a_row + 64 * c, k0,
                      w.a_z);
      }
      if (b_k_major) {
        tma_load_3d(b_dst, &P.map_b, full_bar, k0, n0, w.b_z);
      } else {
#pragma unroll
        for (int c = 0; c < BN / 64; c++)
          tma_load_3d(b_dst + c * WGMMA_CHUNK_BYTES, &P.map_b, full_bar, n0 + 64 * c, k0, w.b_z);
      }
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

/* A consumer warpgroup: 64 rows x BN of each tile, then the epilogue.
 * TRANS_A / TRANS_B: the operand's tiles are MN-major. */
template <typename T, int BN, int STAGES, int TRANS_A, int TRANS_B>
TSR_DEVICE void wgmma_consume(const tsr_gpu_gemm_sm90_params &P, uint32_t a_smem, uint32_t b_smem,
                              uint32_t full, uint32_t empty, int consumer) {
  constexpr int BK = wgmma_k<T>::BK;
  constexpr uint32_t A_BYTES = WGMMA_BM * WGMMA_ROW_BYTES, B_BYTES = BN * WGMMA_ROW_BYTES;
  /* Per k16 (tf32: k8) step: 32 bytes along a K-major row, 16 rows of 128
   * bytes in an MN-major chunk. */
  constexpr uint32_t A_STEP = TRANS_A ? 2048 : 32, B_STEP = TRANS_B ? 2048 : 32;
  constexpr uint32_t A_LEADING = TRANS_A ? WGMMA_CHUNK_BYTES : 16;
  constexpr uint32_t B_LEADING = TRANS_B ? WGMMA_CHUNK_BYTES : 16;
  const gemm_params &p = P.gemm;
  const int64_t tiles = wgmma_tile_count(p);
  const int32_t k_tiles = (int32_t)((p.k + BK - 1) / BK);
  const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
  /* This warpgroup's 64 rows of A: 64 K-major rows or the second MN chunk,
   * 8 KiB into the stage either way. */
  const uint32_t a_offset = (uint32_t)consumer * WGMMA_CHUNK_BYTES;
  int stage = 0;
  uint32_t phase = 0;
  float acc[BN / 2];
  for (int64_t linear = blockIdx.x; linear < tiles; linear += gridDim.x) {
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
      acc[i] = 0.0f;
    int previous = -1;
    for (int32_t kt = 0; kt < k_tiles; kt++) {
      mbarrier_wait(full + 8 * stage, phase);
      const uint32_t a_base = a_smem + stage * A_BYTES + a_offset;
      const uint32_t b_base = b_smem + stage * B_BYTES;
      tsr_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < (int)WGMMA_ROW_BYTES / 32; kk++) {
        uint64_t desc_a = wgmma_descriptor(a_base + kk * A_STEP, A_LEADING, 1024);
        uint64_t desc_b = wgmma_descriptor(b_base + kk * B_STEP, B_LEADING, 1024);
        if constexpr (sizeof(T) == 4 && BN == 256)
          wgmma_m64n256k8_tf32(acc, desc_a, desc_b);
        else if constexpr (sizeof(T) == 4)
          wgmma_m64n128k8_tf32(acc, desc_a, desc_b);
        else if constexpr (BN == 256)
          wgmma_m64n256k16<T, TRANS_A, TRANS_B>(acc, desc_a, desc_b);
        else
          wgmma_m64n128k16<T, TRANS_A, TRANS_B>(acc, desc_a, desc_b);
      }
      tsr_wgmma_commit();
      /* The slice before this one is done: give its stage back. */
      tsr_wgmma_wait<1>();
      if (previous >= 0 && lane == 0)
        mbarrier_arrive(empty + 8 * previous);
      previous = stage;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
    }
    tsr_wgmma_wait<0>();
    if (previous >= 0 && lane == 0)
      mbarrier_arrive(empty + 8 * previous);
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
      wgmma_fence_operand(acc[i]);

    /* Accumulator layout of wgmma m64nN: per 8 columns, rows warp * 16 +
     * lane / 4 (+ 8), columns 2 * (lane % 4) (+ 1). */
    wgmma_tile w;
    wgmma_locate(P, linear, BN, w);
    const int64_t row = w.t.m0 + 64 * consumer + 16 * warp + lane / 4;
    const int64_t col = w.t.n0 + 2 * (lane % 4);
    /* Full tiles of a plain D with unit column stride: one 4-byte (f32:
     * 8-byte) store per pair, no per-element bounds or layout tests. */
    const bool direct = !p.has_c && !p.has_bias && p.activation == TSR_GPU_ACT_NONE && p.d_n == 1 &&
                        (p.d_m & 1) == 0 && ((uintptr_t)w.t.d & 7) == 0 &&
                        w.t.m0 + WGMMA_BM <= w.t.m && w.t.n0 + BN <= p.n;
    if (direct && p.out_dtype == TSR_GPU_F32) {
      float *d0 = (float *)w.t.d + row * p.d_m + col;
      float *d8 = d0 + 8 * p.d_m;
      const float alpha = p.alpha;
#pragma unroll
      for (int c = 0; c < BN / 8; c++) {
        *(float2 *)(d0 + 8 * c) = make_float2(alpha * acc[4 * c], alpha * acc[4 * c + 1]);
        *(float2 *)(d8 + 8 * c) = make_float2(alpha * acc[4 * c + 2], alpha * acc[4 * c + 3]);
      }
    } else if (direct) {
      uint16_t *d0 = (uint16_t *)w.t.d + row * p.d_m + col;
      uint16_t *d8 = d0 + 8 * p.d_m;
      const float alpha = p.alpha;
      const bool bf16 = p.out_dtype == TSR_GPU_BF16;
#pragma unroll
      for (int c = 0; c < BN / 8; c++) {
        float v0 = alpha * acc[4 * c], v1 = alpha * acc[4 * c + 1];
        float v2 = alpha * acc[4 * c + 2], v3 = alpha * acc[4 * c + 3];
        *(uint32_t *)(d0 + 8 * c) = bf16 ? tsr_pack2<tsr_bf16>(v0, v1) : tsr_pack2<tsr_f16>(v0, v1);
        *(uint32_t *)(d8 + 8 * c) = bf16 ? tsr_pack2<tsr_bf16>(v2, v3) : tsr_pack2<tsr_f16>(v2, v3);
      }
    } else {
#pragma unroll
      for (int c = 0; c < BN / 8; c++) {
        epilogue_pair(p, w.t, row, col + 8 * c, acc[4 * c], acc[4 * c + 1]);
        epilogue_pair(p, w.t, row + 8, col + 8 * c, acc[4 * c + 2], acc[4 * c + 3]);
      }
    }
  }
}

#endif /* TSR_GPU_HAS_WGMMA */

template <typename T, int BN, int STAGES>
TSR_DEVICE void gemm_wgmma_body(const tsr_gpu_gemm_sm90_params &P) {
#if TSR_GPU_HAS_WGMMA
  constexpr uint32_t A_BYTES = WGMMA_BM * WGMMA_ROW_BYTES, B_BYTES = BN * WGMMA_ROW_BYTES;
  extern __shared__ __align__(1024) unsigned char wgmma_smem[];
  /* The 128-byte swizzle repeats every 1024 bytes: stages start on it. */
  const uint32_t base = (tsr_smem_address(wgmma_smem) + 1023u) & ~1023u;
  const uint32_t a_smem = base, b_smem = base + STAGES * A_BYTES;
  const uint32_t full = b_smem + STAGES * B_BYTES, empty = full + 8 * STAGES;
  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      mbarrier_init(full + 8 * s, 1);
      mbarrier_init(empty + 8 * s, 8); /* the consumers' 8 warps */
    }
    /* The copy engine (async proxy) must see the initialised barriers. */
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    tsr_fence_proxy_async();
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::);
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(&P.map_a) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(&P.map_b) : "memory");
      wgmma_produce<T, BN, STAGES>(P, a_smem, b_smem, full, empty);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::);
    const int consumer = warpgroup - 1;
    const bool trans_a = P.gemm.a_k_major == 0, trans_b = P.gemm.b_k_major == 0;
    if constexpr (sizeof(T) == 4) /* tf32: the host packs operands K-major */
      wgmma_consume<T, BN, STAGES, 0, 0>(P, a_smem, b_smem, full, empty, consumer);
    else if (!trans_a && !trans_b)
      wgmma_consume<T, BN, STAGES, 0, 0>(P, a_smem, b_smem, full, empty, consumer);
    else if (!trans_a && trans_b)
      wgmma_consume<T, BN, STAGES, 0, 1>(P, a_smem, b_smem, full, empty, consumer);
    else if (trans_a && !trans_b)
      wgmma_consume<T, BN, STAGES, 1, 0>(P, a_smem, b_smem, full, empty, consumer);
    else
      wgmma_consume<T, BN, STAGES, 1, 1>(P, a_smem, b_smem, full, empty, consumer);
  }
#else
  (void)P;
  __trap();
#endif
}

} /* namespace */

#define TSR_DEFINE_GEMM_WGMMA(dt, T, BN, S)                                                        \
  TSR_KERNEL void __launch_bounds__(WGMMA_THREADS, 1)                                              \
      tsr_gemm_wgmma_##dt##_128x##BN##x64_s##S(TSR_PARAMS(tsr_gpu_gemm_sm90_params) P) {           \
    gemm_wgmma_body<T, BN, S>(P);                                                                  \
  }
#define TSR_DEFINE_GEMM_WGMMA_BOTH(BN, S)                                                          \
  TSR_DEFINE_GEMM_WGMMA(bf16, tsr_bf16, BN, S)                                                     \
  TSR_DEFINE_GEMM_WGMMA(f16, tsr_f16, BN, S)
TSR_GEMM_WGMMA_CONFIGS(TSR_DEFINE_GEMM_WGMMA_BOTH)

#define TSR_DEFINE_GEMM_WGMMA_TF32(BN, S)                                                          \
  TSR_KERNEL void __launch_bounds__(WGMMA_THREADS, 1)                                              \
      tsr_gemm_wgmma_tf32_128x##BN##x32_s##S(TSR_PARAMS(tsr_gpu_gemm_sm90_params) P) {             \
    gemm_wgmma_body<float, BN, S>(P);                                                              \
  }
TSR_GEMM_WGMMA_CONFIGS(TSR_DEFINE_GEMM_WGMMA_TF32)
