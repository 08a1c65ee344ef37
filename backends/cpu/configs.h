/* Kernel variant tables, the per-problem heuristics and the instruction set
 * the kernels are dispatched to (configs.c), and the GEMM workspace release
 * (kernels/gemm.c). Not installed. */
#ifndef TESSERA_CPU_CONFIGS_H
#define TESSERA_CPU_CONFIGS_H

#include <stddef.h>

#include "cpu_internal.h"

/* Whether this build has the x86-64 AVX2 / AVX-512 micro-kernels. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_HAVE_X86_KERNELS 1
#else
#define CPU_HAVE_X86_KERNELS 0
#endif

/* Instruction sets the GEMM micro-kernels are compiled for, in increasing
 * order: a kernel of a level runs on every machine of that level or above. */
typedef enum cpu_isa {
  CPU_ISA_GENERIC = 0, /* the compiler's baseline for the target (SSE2 on x86-64) */
  CPU_ISA_AVX2 = 1,    /* AVX2 + FMA, 256-bit */
  CPU_ISA_AVX512 = 2,  /* AVX-512F, 512-bit */
  CPU_ISA_COUNT_ = 3
} cpu_isa;

/* The best instruction set both this build and this machine support. */
cpu_isa cpu_isa_detect(void);
/* "generic", "avx2", "avx512". */
const char *cpu_isa_name(cpu_isa isa);
/* Parses an instruction set name; returns 0 when unknown. */
int cpu_isa_from_name(const char *name, cpu_isa *isa);
/* The instruction set the kernels use: cpu_isa_detect() until the plugin
 * selects another (TESSERA_CPU_ISA) at init. */
cpu_isa cpu_isa_active(void);
void cpu_isa_set_active(cpu_isa isa);

/* Row ops and elementwise ops have one variant: this names it. */
typedef struct cpu_simple_config {
  const char *name;
  const char *description;
} cpu_simple_config;

/* Fills `out` with every variant of `op` (all of them can run any validated
 * problem) and the heuristic's pick for this problem with its reason.
 * TSR_ERROR_UNSUPPORTED for an unknown op. */
tsr_status cpu_op_variants(tsr_op op, const void *args, tsr_plugin_variant_list *out);

/* The config behind variant `name` of `op`: a cpu_gemm_config for gemm and
 * grouped gemm, a cpu_attention_config for attention, a cpu_simple_config
 * otherwise. NULL when `op` has no variant of that name. */
const void *cpu_op_find_variant(tsr_op op, const char *name);

/* The heuristic's pick for the problem (used when no variant is named). */
const void *cpu_op_default_variant(tsr_op op, const void *args);

/* Writes the variant names of `op` as "a, b, c" (for error messages). */
void cpu_op_variant_names(tsr_op op, char *buffer, size_t capacity);

/* Frees the packing memory kernels/gemm.c keeps for the calling thread
 * between calls; a queue's worker calls it before it exits. */
void cpu_gemm_release_thread_workspace(void);

#endif /* TESSERA_CPU_CONFIGS_H */
