/* SPDX-License-Identifier: Apache-2.0 */
/* kv_append (reshape-and-cache, ops_attention.c launches it): row t of
 * k_new and v_new [T, Hkv, D] goes to row slot % block_size of block
 * slot / block_size of k_cache and v_cache [blocks, block_size, Hkv, D],
 * slot = slots[t] (int32, read as plain ints). The elements are copied as
 * stored (one dtype for all four tensors), bits unchanged. A negative slot
 * skips its row; a slot at or past blocks * block_size skips it too and
 * records t in the queue's TSR_CL_FAULT_KV_SLOT word (atomic_min), which
 * queue_finish reports. A work-group per (row, head) pair of D elements,
 * groups taking pairs g, g + groups, ... so any T fits a bounded grid.
 * -DTSR_KV_THREADS: work items per group (a power of two). */

#ifndef TSR_KV_THREADS
#define TSR_KV_THREADS 64
#endif

__kernel __attribute__((reqd_work_group_size(TSR_KV_THREADS, 1, 1))) void
tsr_kv_append(const __global tsr_t *k_new, const __global tsr_t *v_new, __global tsr_t *k_cache,
              __global tsr_t *v_cache, const __global int *slots, volatile __global int *faults,
              const tsr_cl_kv_append_params p) {
  const int tid = (int)get_local_id(0);
  for (long pair = get_group_id(0); pair < p.rows; pair += get_num_groups(0)) {
    const long t = pair / p.heads;
    const int h = (int)(pair % p.heads);
    const long slot = slots[p.slots_first + t * p.slots_s];
    if (slot < 0)
      continue;
    if (slot >= p.slots) {
      if (h == 0 && tid == 0)
        atomic_min(&faults[TSR_CL_FAULT_KV_SLOT], (int)min(t, (long)INT_MAX - 1));
      continue;
    }
    const long block = slot / p.block_size, within = slot % p.block_size;
    long from = p.kn_first + t * p.kn_st + h * p.kn_sh;
    long to = p.kc_first + block * p.kc_sb + within * p.kc_ss + h * p.kc_sh;
    for (int d = tid; d < p.dim; d += TSR_KV_THREADS)
      k_cache[to + d * p.kc_sd] = k_new[from + d * p.kn_sd];
    if (p.flags & TSR_CL_KV_APPEND_V) {
      from = p.vn_first + t * p.vn_st + h * p.vn_sh;
      to = p.vc_first + block * p.vc_sb + within * p.vc_ss + h * p.vc_sh;
      for (int d = tid; d < p.dim; d += TSR_KV_THREADS)
        v_cache[to + d * p.vc_sd] = v_new[from + d * p.vn_sd];
    }
  }
}
