/* SPDX-License-Identifier: Apache-2.0 */
/* kv_append (reshape-and-cache): row t of k_new / v_new [T, Hkv, D] goes to
 * slot slots[t] of the paged caches [num_blocks, block_size, Hkv, D]. A
 * copy of bits, so one kernel per element size:
 * tsr_kv_append_b16 (f16, bf16) and tsr_kv_append_b32 (f32). A thread moves
 * one 16-byte vector (vec: unit stride along D and 16-byte aligned rows,
 * checked by the host from the addresses) or one element of a (row, head),
 * grid-stride. A negative slot skips its row; a slot at or past the cache
 * is never written and the smallest such row is reported through the
 * queue's fault word TSR_GPU_FAULT_KV_SLOT. */
#include "gpu_portability.h"
#include "kernel_list.h"
#include "kernel_params.h"

namespace {

template <typename E> TSR_DEVICE void kv_append_body(const tsr_gpu_kv_append_params &p) {
  const int64_t total = p.rows * p.heads * p.units;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t unit = idx % p.units, rest = idx / p.units;
    const int64_t h = rest % p.heads, t = rest / p.heads;
    const int64_t slot = ((const int32_t *)p.slots)[t * p.slots_stride];
    if (slot < 0)
      continue;
    if (slot >= p.slot_count) {
      if (unit == 0 && h == 0)
        atomicMin((int *)p.faults + TSR_GPU_FAULT_KV_SLOT, t < 0x7fffffff ? (int)t : 0x7fffffff);
      continue;
    }
    const int64_t block = slot / p.block_size, r = slot % p.block_size;
    if (p.vec) {
      /* strides are in elements; a unit is 16 bytes along D */
      const int64_t per = 16 / (int64_t)sizeof(E);
      const E *kn = (const E *)p.k_new + t * p.kn_t + h * p.kn_h + unit * per;
      E *kc = (E *)p.k_cache + block * p.kc_b + r * p.kc_s + h * p.kc_h + unit * per;
      *(uint4 *)kc = *(const uint4 *)kn;
      if (p.has_v) {
        const E *vn = (const E *)p.v_new + t * p.vn_t + h * p.vn_h + unit * per;
        E *vc = (E *)p.v_cache + block * p.vc_b + r * p.vc_s + h * p.vc_h + unit * per;
        *(uint4 *)vc = *(const uint4 *)vn;
      }
    } else {
      ((E *)p.k_cache)[block * p.kc_b + r * p.kc_s + h * p.kc_h + unit * p.kc_d] =
          ((const E *)p.k_new)[t * p.kn_t + h * p.kn_h + unit * p.kn_d];
      if (p.has_v)
        ((E *)p.v_cache)[block * p.vc_b + r * p.vc_s + h * p.vc_h + unit * p.vc_d] =
            ((const E *)p.v_new)[t * p.vn_t + h * p.vn_h + unit * p.vn_d];
    }
  }
}

} /* namespace */

TSR_KERNEL void __launch_bounds__(256) tsr_kv_append_b16(TSR_PARAMS(tsr_gpu_kv_append_params) p) {
  kv_append_body<uint16_t>(p);
}
TSR_KERNEL void __launch_bounds__(256) tsr_kv_append_b32(TSR_PARAMS(tsr_gpu_kv_append_params) p) {
  kv_append_body<uint32_t>(p);
}
