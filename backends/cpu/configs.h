/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel variant tables and the per-problem heuristics of the CPU
 * plugin (configs.c), and the GEMM workspace release (kernels/gemm.c). Not
 * installed. */
#ifndef TESSERA_CPU_CONFIGS_H
#define TESSERA_CPU_CONFIGS_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu_internal.h"
#include "machine.h"
#include "tessera/plugin_helper.h"

/* Row ops and elementwise ops have one variant: this names it. */
typedef struct cpu_simple_config {
  const char *name;
  const char *description;
} cpu_simple_config;

/* Fills the empty list `out` with every variant of `op` that the active
 * level can run (all of them can run any validated problem) and the
 * heuristic's pick for this problem with its reason, from the problem's
 * signature alone. TSR_ERROR_UNSUPPORTED for an unknown op. */
tsr_status cpu_op_variants(tsr_op op, const void *args, tsr_plugin_variant_list *out);

/* The config row behind variant `name` of `op` (rows start with their name:
 * tsr_plugin_row_find): a cpu_gemm_config for gemm and grouped gemm, a
 * cpu_attention_config for attention, a cpu_simple_config otherwise. NULL
 * when `op` lists no variant of that name at the active level. */
const void *cpu_op_find_variant(tsr_op op, const char *name);

/* The heuristic's pick for the problem (used when no variant is named): the
 * row op_variants marks. It depends only on the problem's signature (for
 * grouped GEMM: an auto row, resolved by cpu_op_run_config). */
const void *cpu_op_default_variant(tsr_op op, const void *args);

/* The config a queued op runs with: `config` itself, or for grouped GEMM's
 * auto rows the gemv or packed row its group sizes call for. No strings, no
 * formatting: op_run calls it. */
const void *cpu_op_run_config(tsr_op op, const void *args, const void *config);

/* Whether kernels/gemm.c has an MR x NR micro-kernel of family `isa`
 * (generic, avx2, avx512). */
bool cpu_gemm_has_kernel(int isa, int mr, int nr);

/* The memory kernels/gemm.c keeps between calls: packing buffers of the
 * thread that runs a GEMM, and the tile GEMM's per-thread scratch. */
typedef struct cpu_gemm_scratch {
  char *packing;
  size_t packing_bytes;
  char *tile;
  size_t tile_bytes;
} cpu_gemm_scratch;

/* Swaps the calling thread's kept memory with *slot: a queue installs its
 * own around the commands a thread runs for it, then takes it back. */
void cpu_gemm_scratch_exchange(cpu_gemm_scratch *slot);
void cpu_gemm_scratch_free(cpu_gemm_scratch *slot);
/* Frees what the calling thread keeps; a pool worker calls it before it
 * exits. */
void cpu_gemm_release_thread_workspace(void);

#endif /* TESSERA_CPU_CONFIGS_H */
