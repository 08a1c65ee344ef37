/* SPDX-License-Identifier: Apache-2.0 */
/* The machine the CPU plugin runs on: instruction-set features from CPUID and
 * XGETBV (never from CPU model tables), cache sizes from CPUID or sysfs, the
 * CPUs this process may use, the names device_info reports, and the
 * instruction-set level the kernels are dispatched to (machine.c). Not
 * installed. */
#ifndef TESSERA_CPU_MACHINE_H
#define TESSERA_CPU_MACHINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether this build carries the x86-64 AVX2 / AVX-512 kernels (GCC and
 * clang compile them with per-function target attributes). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_HAVE_X86_KERNELS 1
#else
#define CPU_HAVE_X86_KERNELS 0
#endif

/* Instruction-set levels. Each level belongs to one ladder (x86-64 or Arm)
 * and includes every level below it on its ladder; `generic` (the
 * compiler's baseline for the target) is the foot of both. A level is
 * usable when the CPU has its features, the OS saves their registers
 * (XCR0), and this build has kernels for it. */
typedef enum cpu_isa {
  CPU_ISA_GENERIC = 0,     /* baseline: SSE2 on x86-64, plain C elsewhere */
  CPU_ISA_AVX2 = 1,        /* AVX2 + FMA + F16C, 256-bit */
  CPU_ISA_AVX512 = 2,      /* AVX-512 F, BW, VL, DQ */
  CPU_ISA_AVX512_BF16 = 3, /* + AVX512_BF16 (vdpbf16ps) */
  CPU_ISA_AVX512_FP16 = 4, /* + AVX512_FP16 */
  CPU_ISA_AMX = 5,         /* + AMX-TILE, AMX-BF16: detected and reported, no kernels yet */
  CPU_ISA_NEON = 6,        /* Arm: Advanced SIMD; no kernels yet */
  CPU_ISA_SVE = 7,         /* Arm: SVE; no kernels yet */
  CPU_ISA_COUNT_ = 8
} cpu_isa;

/* What CPUID reports and what the OS has enabled in XCR0. */
typedef struct cpu_features {
  /* CPUID feature bits */
  bool sse2, osxsave, avx, fma, f16c, avx2;
  bool avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, avx512_fp16;
  bool amx_tile, amx_bf16, amx_int8;
  bool neon, sve;
  /* register state the OS saves on context switches (XGETBV, XCR0) */
  bool os_avx;    /* XCR0 bits 1-2: SSE and AVX (ymm) state */
  bool os_avx512; /* XCR0 bits 5-7: opmask, upper zmm0-15, zmm16-31 */
  bool os_amx;    /* XCR0 bits 17-18: tile config and tile data */
} cpu_features;

/* Cache sizes in bytes (0: unknown) and where they came from. */
typedef struct cpu_caches {
  int64_t l1d, l2, l3;
  int line;
  const char *source; /* "cpuid leaf 4", "cpuid leaf 0x8000001d", "sysfs", "assumed" */
} cpu_caches;

/* The machine, detected once per process. */
typedef struct cpu_machine {
  cpu_features features;
  cpu_caches caches;
  cpu_isa best; /* highest level the CPU, the OS and this build all support */
} cpu_machine;

const cpu_machine *cpu_machine_get(void);

/* Pure parts of detection, separate so that tests can feed them made-up
 * feature sets. */
bool cpu_isa_has_features(cpu_isa isa, const cpu_features *features);
bool cpu_isa_has_kernels(cpu_isa isa);
/* The highest level whose features are present and which has kernels. */
cpu_isa cpu_isa_best_for(const cpu_features *features);
/* The next lower level on the same ladder; generic for generic. */
cpu_isa cpu_isa_parent(cpu_isa isa);
/* Whether `level` includes `other` (equal or above it on its ladder). */
bool cpu_isa_includes(cpu_isa level, cpu_isa other);

/* The best level of this machine (cpu_machine_get()->best). */
cpu_isa cpu_isa_detect(void);
/* "generic", "avx2", "avx512", "avx512_bf16", "avx512_fp16", "amx", "neon", "sve". */
const char *cpu_isa_name(cpu_isa isa);
/* Parses a level name; returns 0 when unknown. */
int cpu_isa_from_name(const char *name, cpu_isa *isa);
/* The level to use when TESSERA_CPU_ISA is `requested` (NULL or "" when
 * unset) on a machine whose best level is `best`: the requested one when
 * `best` includes it, else `best`. A refusal is described in `message`
 * (empty otherwise). */
cpu_isa cpu_isa_choose(const char *requested, cpu_isa best, char *message, size_t capacity);

/* The level the kernels use: cpu_isa_detect() until the plugin selects
 * another (TESSERA_CPU_ISA) at init. */
cpu_isa cpu_isa_active(void);
void cpu_isa_set_active(cpu_isa isa);

/* "key: value" lines: features, the level in use, caches, threads. */
void cpu_machine_describe(cpu_isa active, int threads, char *buffer, size_t capacity);

/* What device_info says of the host: the vendor and name from CPUID (else
 * /proc/cpuinfo's model name, else "CPU"), the architecture with the level
 * `isa` in it (x86_64-avx2), and the physical memory. */
typedef struct cpu_identity {
  char vendor[64];
  char name[256];
  char arch[64];
  uint64_t memory_bytes;
} cpu_identity;

void cpu_machine_identify(cpu_isa isa, cpu_identity *out);

/* The CPUs this process may run on (sched_getaffinity, else the online count). */
int cpu_machine_available_cpus(void);

#endif /* TESSERA_CPU_MACHINE_H */
