/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tessera fp64 reference ops: the single oracle that every device is checked
 * against (`tessera check`), exported for cross-vendor testers.
 *
 * Each function takes the op's validated argument struct from plugin.h with
 * one difference: a tensor's `buffer` is a host pointer to the memory the
 * tensor's `offset` counts from. Inputs are read in their dtype and widened to
 * double exactly; all arithmetic is double; nothing is rounded to the output
 * dtype. Outputs are written as double, dense and row-major in the output
 * tensor's shape (its strides are ignored). An absent optional output may have
 * a NULL destination.
 *
 * The functions assume the arguments are consistent (as the core's validation
 * makes them); they return TSR_ERROR_NULL_ARGUMENT for NULL pointers,
 * TSR_ERROR_OUT_OF_MEMORY when scratch space cannot be had, and
 * TSR_ERROR_INVALID_VALUE for a cross-entropy target outside [0, V) that is
 * not ignore_index (the row's loss is NaN then).
 */
#ifndef TESSERA_REFERENCE_H
#define TESSERA_REFERENCE_H

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Maps a device buffer to the address of a host copy of its whole contents;
 * NULL when there is none. */
typedef const void *(*tsr_reference_host_fn)(void *user, const tsr_buffer *buffer);

/* The arguments `op` would hand a plugin, ready for the tsr_reference_*
 * function: validates `desc` exactly as tsr_op_run does on `device`, applies
 * the same normalisation (defaults resolved, 2-D GEMM as a batch of 1, beta 0
 * without c, causal as window_right 0, ...) and writes the op's args struct
 * (tsr_gemm_args for TSR_OP_GEMM, ...) into `args` (`capacity` bytes), with
 * each tensor's `buffer` replaced by host_of(user, its tsr_buffer). A grouped
 * GEMM's group_sizes still points into `desc`. Fails like the op would, or
 * with TSR_ERROR_NOT_FOUND when host_of has no copy of a buffer. */
TSR_API tsr_status tsr_reference_prepare(tsr_device *device, tsr_op op, const void *desc,
                                         tsr_reference_host_fn host_of, void *user, void *args,
                                         size_t capacity);

/* d: batch * M * N values. */
TSR_API tsr_status tsr_reference_gemm(const tsr_gemm_args *args, double *d);
/* d: T * N values. */
TSR_API tsr_status tsr_reference_grouped_gemm(const tsr_grouped_gemm_args *args, double *d);
/* o: B * Sq * Hq * D values; lse (may be NULL): B * Hq * Sq values, -inf for a
 * row that sees no key. Packed queries: o total_q * Hq * D, lse Hq * total_q.
 * Rows no sequence owns, and those of a sequence whose cu_seqlens_q are at
 * fault, keep what the caller put there; a sequence with another fault gets
 * NaN rows (tsr_plugin_attention_seq_of decides). */
TSR_API tsr_status tsr_reference_attention(const tsr_attention_args *args, double *o, double *lse);
/* k_cache and v_cache (v only with v_new): the whole cache after the append,
 * num_blocks * block_size * Hkv * D values each, row-major. Returns
 * TSR_ERROR_INVALID_VALUE (after writing every other row) when a slot lies
 * past the cache. */
TSR_API tsr_status tsr_reference_kv_append(const tsr_kv_append_args *args, double *k_cache,
                                           double *v_cache);
/* y and residual_out (may be NULL): x's element count each. */
TSR_API tsr_status tsr_reference_rmsnorm(const tsr_rmsnorm_args *args, double *y,
                                         double *residual_out);
TSR_API tsr_status tsr_reference_layernorm(const tsr_layernorm_args *args, double *y);
TSR_API tsr_status tsr_reference_softmax(const tsr_softmax_args *args, double *y);
TSR_API tsr_status tsr_reference_rope(const tsr_rope_args *args, double *y);
TSR_API tsr_status tsr_reference_swiglu(const tsr_swiglu_args *args, double *y);
TSR_API tsr_status tsr_reference_gelu(const tsr_gelu_args *args, double *y);
/* loss and lse (may be NULL): R values each. */
TSR_API tsr_status tsr_reference_cross_entropy(const tsr_cross_entropy_args *args, double *loss,
                                               double *lse);

/* Activation functions in double, as every device must approximate them. */
TSR_API double tsr_reference_activation(tsr_activation activation, double x);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_REFERENCE_H */
