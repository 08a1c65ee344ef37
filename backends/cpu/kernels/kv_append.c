/* SPDX-License-Identifier: Apache-2.0 */
/* kv_append (reshape-and-cache): row t of k_new and v_new [T, Hkv, D] goes
 * to slot slots[t] of the paged caches [num_blocks, block_size, Hkv, D].
 * The dtypes match, so rows are copied bit for bit (memcpy where the
 * channels are contiguous, element by element otherwise).
 *
 * Work is split by destination: share s of the pool writes the rows whose
 * slot is s modulo the shares, in row order, so each slot is written by one
 * thread and two rows naming one slot leave the later one whole (never a mix
 * of the two). Every share reads all of `slots` (4 bytes a row). A negative
 * slot skips its row; one at or past the cache's end skips it too and
 * share 0 records the first such row as a fault (TSR_PLUGIN_FAULT_KV_SLOT). */
#include <string.h>

#include "cpu_kernel_util.h"

/* Bytes per share: about CPU_CHUNK_MIN_NS of copying (the split cost
 * model). */
enum { KV_APPEND_MIN_SHARE_BYTES = 256 << 10 };

typedef struct kv_append_job {
  const tsr_kv_append_args *args;
  const cpu_exec *exec;
  const int32_t *slots;
  int64_t slot_stride, rows, heads, dim, block_size, capacity;
  size_t element;
} kv_append_job;

/* Copies row t of `from` into slot `slot` of `to`. */
static void copy_row(const kv_append_job *job, const tsr_plugin_tensor *from,
                     const tsr_plugin_tensor *to, int64_t t, int64_t slot) {
  const size_t element = job->element;
  const char *src = cpu_tensor_base(from) + (size_t)(t * from->strides[0]) * element;
  char *dst = cpu_tensor_base(to) + (size_t)((slot / job->block_size) * to->strides[0] +
                                             (slot % job->block_size) * to->strides[1]) *
                                        element;
  const int64_t heads = job->heads, dim = job->dim;
  if (from->strides[2] == 1 && to->strides[3] == 1) {
    if (heads == 1 || (from->strides[1] == dim && to->strides[2] == dim)) {
      memcpy(dst, src, (size_t)(heads * dim) * element);
      return;
    }
    for (int64_t h = 0; h < heads; h++)
      memcpy(dst + (size_t)(h * to->strides[2]) * element,
             src + (size_t)(h * from->strides[1]) * element, (size_t)dim * element);
    return;
  }
  for (int64_t h = 0; h < heads; h++)
    for (int64_t c = 0; c < dim; c++)
      memcpy(dst + (size_t)(h * to->strides[2] + c * to->strides[3]) * element,
             src + (size_t)(h * from->strides[1] + c * from->strides[2]) * element, element);
}

static void append_share(void *context, int64_t share, int64_t shares, int worker) {
  (void)worker;
  const kv_append_job *job = context;
  const tsr_kv_append_args *args = job->args;
  int reported = 0;
  for (int64_t t = 0; t < job->rows; t++) {
    int64_t slot = job->slots[t * job->slot_stride];
    if (slot < 0)
      continue; /* padding */
    if (slot >= job->capacity) {
      if (share == 0 && !reported) { /* rows go in order: the first is the smallest */
        cpu_fault_record(job->exec, TSR_PLUGIN_FAULT_KV_SLOT, t);
        reported = 1;
      }
      continue;
    }
    if (slot % shares != share)
      continue;
    copy_row(job, &args->k_new, &args->k_cache, t, slot);
    if (args->v_new.buffer)
      copy_row(job, &args->v_new, &args->v_cache, t, slot);
  }
}

tsr_status cpu_kv_append_run(const cpu_exec *exec, const tsr_kv_append_args *args) {
  kv_append_job job = {.args = args, .exec = exec};
  job.rows = args->k_new.shape[0];
  job.heads = args->k_new.shape[1];
  job.dim = args->k_new.shape[2];
  job.block_size = args->k_cache.shape[1];
  job.capacity = args->k_cache.shape[0] * args->k_cache.shape[1];
  job.element = args->k_new.dtype == TSR_DTYPE_F32 ? 4 : 2;
  job.slots = (const int32_t *)cpu_tensor_base(&args->slots);
  job.slot_stride = args->slots.strides[0];
  if (job.rows == 0)
    return TSR_OK;
  int64_t bytes =
      job.rows * job.heads * job.dim * (int64_t)job.element * (args->v_new.buffer ? 2 : 1);
  int64_t shares = bytes / KV_APPEND_MIN_SHARE_BYTES;
  int threads = cpu_pool_threads(exec->pool);
  shares = shares < 1 ? 1 : shares > threads ? threads : shares;
  cpu_pool_run_threads(exec->pool, (int)shares, append_share, &job);
  return TSR_OK;
}
