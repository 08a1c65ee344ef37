/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's view of the machine (instruction-set features from CPUID
 * and XGETBV, never from CPU model tables; cache sizes from CPUID or sysfs),
 * the level the kernels are dispatched to, the kernel variants (tile
 * configurations) and the heuristics that pick one per problem. The same
 * tables answer op_variants and op_run. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "configs.h"

/* ------------------------------------------------------------------------ */
/* Features                                                                  */
/* ------------------------------------------------------------------------ */

#if defined(__x86_64__) || defined(__i386__)
static bool bit(unsigned int value, int index) {
  return (value >> index) & 1u;
}

/* XCR0: the register state the OS saves (only valid when OSXSAVE is set). */
static unsigned long long read_xcr0(void) {
  unsigned int eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return ((unsigned long long)edx << 32) | eax;
}
#endif

static void detect_features(cpu_features *f) {
  memset(f, 0, sizeof *f);
#if defined(__x86_64__) || defined(__i386__)
  unsigned int eax, ebx, ecx, edx;
  unsigned int max_leaf = __get_cpuid_max(0, NULL);
  if (max_leaf >= 1 && __get_cpuid_count(1, 0, &eax, &ebx, &ecx, &edx)) {
    f->sse2 = bit(edx, 26);
    f->fma = bit(ecx, 12);
    f->osxsave = bit(ecx, 27);
    f->avx = bit(ecx, 28);
    f->f16c = bit(ecx, 29);
  }
  if (max_leaf >= 7 && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    unsigned int max_subleaf = eax;
    f->avx2 = bit(ebx, 5);
    f->avx512f = bit(ebx, 16);
    f->avx512dq = bit(ebx, 17);
    f->avx512bw = bit(ebx, 30);
    f->avx512vl = bit(ebx, 31);
    f->amx_bf16 = bit(edx, 22);
    f->avx512_fp16 = bit(edx, 23);
    f->amx_tile = bit(edx, 24);
    f->amx_int8 = bit(edx, 25);
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
      f->avx512_bf16 = bit(eax, 5);
  }
  if (f->osxsave) {
    unsigned long long xcr0 = read_xcr0();
    f->os_avx = (xcr0 & 0x6u) == 0x6u;
    f->os_avx512 = f->os_avx && (xcr0 & 0xe0u) == 0xe0u;
    f->os_amx = (xcr0 & 0x60000u) == 0x60000u;
  }
#elif defined(__aarch64__)
  f->neon = true; /* Advanced SIMD is part of AArch64 */
#if defined(__linux__) && defined(HWCAP_SVE)
  f->sve = (getauxval(AT_HWCAP) & HWCAP_SVE) != 0;
#endif
#endif
}

/* ------------------------------------------------------------------------ */
/* Caches                                                                    */
/* ------------------------------------------------------------------------ */

#if defined(__x86_64__) || defined(__i386__)
/* Deterministic cache parameters (Intel leaf 4 and AMD leaf 0x8000001D use
 * the same layout): returns 1 when the leaf described any data cache. */
static int caches_from_cpuid_leaf(unsigned int leaf, cpu_caches *c) {
  int found = 0;
  for (unsigned int index = 0; index < 16; index++) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid_count(leaf, index, &eax, &ebx, &ecx, &edx))
      break;
    unsigned int type = eax & 0x1fu; /* 0 none, 1 data, 2 instruction, 3 unified */
    if (type == 0)
      break;
    if (type == 2)
      continue;
    unsigned int level = (eax >> 5) & 0x7u;
    int64_t ways = (int64_t)(ebx >> 22) + 1;
    int64_t partitions = (int64_t)((ebx >> 12) & 0x3ffu) + 1;
    int64_t line = (int64_t)(ebx & 0xfffu) + 1;
    int64_t sets = (int64_t)ecx + 1;
    int64_t bytes = ways * partitions * line * sets;
    if (level == 1)
      c->l1d = bytes;
    else if (level == 2)
      c->l2 = bytes;
    else if (level == 3)
      c->l3 = bytes;
    c->line = (int)line;
    found = 1;
  }
  return found && c->l1d > 0;
}
#endif

/* /sys/devices/system/cpu/cpu0/cache/index* (Linux, any architecture). */
static int caches_from_sysfs(cpu_caches *c) {
  int found = 0;
  for (int index = 0; index < 8; index++) {
    char path[96], text[64];
    int level = 0;
    char type[32] = "";
    long long size = 0;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    FILE *file = fopen(path, "r");
    if (!file)
      break;
    if (fgets(text, sizeof text, file))
      level = atoi(text);
    fclose(file);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    if ((file = fopen(path, "r"))) {
      if (fgets(text, sizeof text, file))
        sscanf(text, "%31s", type);
      fclose(file);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    if ((file = fopen(path, "r"))) {
      char unit = 'B';
      if (fgets(text, sizeof text, file) && sscanf(text, "%lld%c", &size, &unit) >= 1)
        size *= unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
      fclose(file);
    }
    if (strcmp(type, "Instruction") == 0 || size <= 0)
      continue;
    if (level == 1)
      c->l1d = size;
    else if (level == 2)
      c->l2 = size;
    else if (level == 3)
      c->l3 = size;
    found = 1;
  }
  return found && c->l1d > 0;
}

static void detect_caches(cpu_caches *c) {
  memset(c, 0, sizeof *c);
  c->line = 64;
#if defined(__x86_64__) || defined(__i386__)
  unsigned int eax, ebx, ecx, edx;
  unsigned int max_leaf = __get_cpuid_max(0, NULL);
  unsigned int max_extended = __get_cpuid_max(0x80000000u, NULL);
  bool topology_extensions = max_extended >= 0x80000001u &&
                             __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) && bit(ecx, 22);
  if (max_leaf >= 4 && caches_from_cpuid_leaf(4, c)) {
    c->source = "cpuid leaf 4";
    return;
  }
  memset(c, 0, sizeof *c);
  c->line = 64;
  if (topology_extensions && max_extended >= 0x8000001du &&
      caches_from_cpuid_leaf(0x8000001du, c)) {
    c->source = "cpuid leaf 0x8000001d";
    return;
  }
  memset(c, 0, sizeof *c);
  c->line = 64;
  /* AMD's older leaves, which hypervisors that hide 0x8000001D (and the
   * topology-extensions bit) still pass through: L1d KiB in 0x80000005 ECX
   * bits 31:24, L2 KiB in 0x80000006 ECX 31:16, L3 in 512 KiB units in EDX
   * 31:18, the line size in the low byte of each. */
  if (max_extended >= 0x80000006u && __get_cpuid(0x80000005u, &eax, &ebx, &ecx, &edx) &&
      (ecx >> 24) != 0) {
    c->l1d = (int64_t)(ecx >> 24) << 10;
    c->line = (int)(ecx & 0xffu);
    if (__get_cpuid(0x80000006u, &eax, &ebx, &ecx, &edx)) {
      c->l2 = (int64_t)(ecx >> 16) << 10;
      c->l3 = (int64_t)(edx >> 18) << 19;
    }
    if (c->l2 > 0) {
      c->source = "cpuid leaves 0x80000005/6";
      return;
    }
  }
  memset(c, 0, sizeof *c);
  c->line = 64;
#endif
  if (caches_from_sysfs(c)) {
    c->source = "sysfs";
    return;
  }
  /* Sizes common to current desktop and server cores. */
  c->l1d = 32 << 10;
  c->l2 = 1 << 20;
  c->l3 = 8 << 20;
  c->line = 64;
  c->source = "assumed";
}

/* ------------------------------------------------------------------------ */
/* Levels                                                                    */
/* ------------------------------------------------------------------------ */

static const char *const isa_names[CPU_ISA_COUNT_] = {
    "generic", "avx2", "avx512", "avx512_bf16", "avx512_fp16", "amx", "neon", "sve"};

cpu_isa cpu_isa_parent(cpu_isa isa) {
  switch (isa) {
  case CPU_ISA_AVX512:
    return CPU_ISA_AVX2;
  case CPU_ISA_AVX512_BF16:
    return CPU_ISA_AVX512;
  case CPU_ISA_AVX512_FP16:
    return CPU_ISA_AVX512_BF16;
  case CPU_ISA_AMX:
    return CPU_ISA_AVX512_FP16;
  case CPU_ISA_SVE:
    return CPU_ISA_NEON;
  default: /* generic, avx2, neon */
    return CPU_ISA_GENERIC;
  }
}

bool cpu_isa_includes(cpu_isa level, cpu_isa other) {
  for (;;) {
    if (level == other)
      return true;
    if (level == CPU_ISA_GENERIC)
      return false;
    level = cpu_isa_parent(level);
  }
}

/* The features a level adds to its parent. */
static bool own_features(cpu_isa isa, const cpu_features *f) {
  switch (isa) {
  case CPU_ISA_GENERIC:
    return true;
  case CPU_ISA_AVX2:
    return f->osxsave && f->os_avx && f->avx && f->avx2 && f->fma && f->f16c;
  case CPU_ISA_AVX512:
    return f->os_avx512 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
  case CPU_ISA_AVX512_BF16:
    return f->avx512_bf16;
  case CPU_ISA_AVX512_FP16:
    return f->avx512_fp16;
  case CPU_ISA_AMX:
    return f->os_amx && f->amx_tile && f->amx_bf16;
  case CPU_ISA_NEON:
    return f->neon;
  case CPU_ISA_SVE:
    return f->sve;
  default:
    return false;
  }
}

bool cpu_isa_has_features(cpu_isa isa, const cpu_features *features) {
  if ((int)isa < 0 || isa >= CPU_ISA_COUNT_)
    return false;
  for (;;) {
    if (!own_features(isa, features))
      return false;
    if (isa == CPU_ISA_GENERIC)
      return true;
    isa = cpu_isa_parent(isa);
  }
}

bool cpu_isa_has_kernels(cpu_isa isa) {
  switch (isa) {
  case CPU_ISA_GENERIC:
    return true;
  case CPU_ISA_AVX2:
  case CPU_ISA_AVX512:
  case CPU_ISA_AVX512_BF16:
  case CPU_ISA_AVX512_FP16: /* runs the avx512_bf16 kernels (see README) */
    return CPU_HAVE_X86_KERNELS;
  default: /* amx, neon, sve: detected, no kernels in this version */
    return false;
  }
}

cpu_isa cpu_isa_best_for(const cpu_features *features) {
  /* Levels listed from the top of each ladder down. */
  static const cpu_isa order[] = {CPU_ISA_AMX,    CPU_ISA_AVX512_FP16, CPU_ISA_AVX512_BF16,
                                  CPU_ISA_AVX512, CPU_ISA_AVX2,        CPU_ISA_SVE,
                                  CPU_ISA_NEON,   CPU_ISA_GENERIC};
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (cpu_isa_has_kernels(order[i]) && cpu_isa_has_features(order[i], features))
      return order[i];
  return CPU_ISA_GENERIC;
}

static cpu_machine machine;
static pthread_once_t machine_once = PTHREAD_ONCE_INIT;

static void detect_machine(void) {
  detect_features(&machine.features);
  detect_caches(&machine.caches);
  machine.best = cpu_isa_best_for(&machine.features);
}

const cpu_machine *cpu_machine_get(void) {
  pthread_once(&machine_once, detect_machine);
  return &machine;
}

cpu_isa cpu_isa_detect(void) {
  return cpu_machine_get()->best;
}

const char *cpu_isa_name(cpu_isa isa) {
  return (int)isa >= 0 && (int)isa < CPU_ISA_COUNT_ ? isa_names[isa] : "unknown";
}

int cpu_isa_from_name(const char *name, cpu_isa *isa) {
  for (int i = 0; i < CPU_ISA_COUNT_; i++) {
    if (name && strcmp(name, isa_names[i]) == 0) {
      *isa = (cpu_isa)i;
      return 1;
    }
  }
  return 0;
}

cpu_isa cpu_isa_choose(const char *requested, cpu_isa best, char *message, size_t capacity) {
  if (message && capacity > 0)
    message[0] = '\0';
  if (!requested || !*requested)
    return best;
  cpu_isa wanted;
  if (!cpu_isa_from_name(requested, &wanted)) {
    if (message && capacity > 0)
      snprintf(message, capacity,
               "TESSERA_CPU_ISA = '%s' is not one of generic, avx2, avx512, avx512_bf16, "
               "avx512_fp16; using %s",
               requested, cpu_isa_name(best));
    return best;
  }
  if (!cpu_isa_includes(best, wanted)) {
    if (message && capacity > 0)
      snprintf(message, capacity,
               "TESSERA_CPU_ISA = %s but this machine and build reach %s; using %s", requested,
               cpu_isa_name(best), cpu_isa_name(best));
    return best;
  }
  return wanted;
}

/* -1 until detected or set. */
static atomic_int active_isa = -1;

cpu_isa cpu_isa_active(void) {
  int isa = atomic_load(&active_isa);
  if (isa < 0) {
    isa = (int)cpu_isa_detect();
    atomic_store(&active_isa, isa);
  }
  return (cpu_isa)isa;
}

void cpu_isa_set_active(cpu_isa isa) {
  atomic_store(&active_isa, (int)isa);
}

/* Appends printf-formatted text, keeping the buffer terminated. */
static void append(char *buffer, size_t capacity, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buffer, size_t capacity, size_t *used, const char *fmt, ...) {
  if (*used + 1 >= capacity)
    return;
  va_list ap;
  va_start(ap, fmt);
  int written = vsnprintf(buffer + *used, capacity - *used, fmt, ap);
  va_end(ap);
  if (written > 0)
    *used += (size_t)written < capacity - *used ? (size_t)written : capacity - *used - 1;
}

static void append_size(char *buffer, size_t capacity, size_t *used, const char *key,
                        int64_t bytes) {
  if (bytes <= 0)
    append(buffer, capacity, used, "%s: unknown\n", key);
  else if (bytes % (1 << 20) == 0)
    append(buffer, capacity, used, "%s: %lld MiB\n", key, (long long)(bytes >> 20));
  else
    append(buffer, capacity, used, "%s: %lld KiB\n", key, (long long)(bytes >> 10));
}

void cpu_machine_describe(cpu_isa active, int threads, char *buffer, size_t capacity) {
  if (capacity == 0)
    return;
  buffer[0] = '\0';
  size_t used = 0;
  const cpu_machine *m = cpu_machine_get();
  const cpu_features *f = &m->features;
  struct {
    bool present;
    const char *name;
  } const features[] = {
      {f->sse2, "sse2"},
      {f->avx, "avx"},
      {f->fma, "fma"},
      {f->f16c, "f16c"},
      {f->avx2, "avx2"},
      {f->avx512f, "avx512f"},
      {f->avx512bw, "avx512bw"},
      {f->avx512vl, "avx512vl"},
      {f->avx512dq, "avx512dq"},
      {f->avx512_bf16, "avx512_bf16"},
      {f->avx512_fp16, "avx512_fp16"},
      {f->amx_tile, "amx_tile"},
      {f->amx_bf16, "amx_bf16"},
      {f->amx_int8, "amx_int8"},
      {f->neon, "neon"},
      {f->sve, "sve"},
  };
  append(buffer, capacity, &used, "cpu features:");
  for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
    if (features[i].present)
      append(buffer, capacity, &used, " %s", features[i].name);
  append(buffer, capacity, &used, "\nos register state (xcr0):%s%s%s%s\n", f->os_avx ? " avx" : "",
         f->os_avx512 ? " avx512" : "", f->os_amx ? " amx" : "",
         !f->os_avx && !f->os_avx512 && !f->os_amx ? " none" : "");
  append(buffer, capacity, &used, "isa levels:");
  for (int i = 0; i < CPU_ISA_COUNT_; i++)
    if (cpu_isa_has_features((cpu_isa)i, f))
      append(buffer, capacity, &used, " %s%s", isa_names[i],
             cpu_isa_has_kernels((cpu_isa)i) ? "" : "(no kernels)");
  append(buffer, capacity, &used, "\nisa best: %s\nisa in use: %s\n", cpu_isa_name(m->best),
         cpu_isa_name(active));
  append_size(buffer, capacity, &used, "l1d cache", m->caches.l1d);
  append_size(buffer, capacity, &used, "l2 cache", m->caches.l2);
  append_size(buffer, capacity, &used, "l3 cache", m->caches.l3);
  append(buffer, capacity, &used, "cache line: %d bytes\ncache sizes from: %s\nthreads: %d\n",
         m->caches.line, m->caches.source ? m->caches.source : "unknown", threads);
}

/* ------------------------------------------------------------------------ */
/* GEMM variants                                                             */
/* ------------------------------------------------------------------------ */

/* The kernel family a level runs: avx512 for every AVX-512 level (bf16
 * inputs switch to vdpbf16ps inside it where the level has AVX512_BF16),
 * avx2, or the portable C kernels. */
static cpu_isa gemm_family(cpu_isa level) {
  if (cpu_isa_includes(level, CPU_ISA_AVX512))
    return CPU_ISA_AVX512;
  if (cpu_isa_includes(level, CPU_ISA_AVX2))
    return CPU_ISA_AVX2;
  return CPU_ISA_GENERIC;
}

/* Register blocks per family, the heuristic's choice first. AVX-512 has 32
 * zmm registers: 14x32 keeps 28 accumulators, two B vectors and the A
 * broadcast comes from memory inside the FMA; AVX2 has 16 ymm registers:
 * 6x16 keeps 12 accumulators. */
typedef struct gemm_shape {
  cpu_isa family;
  int mr, nr;
} gemm_shape;
static const gemm_shape gemm_shapes[] = {
    {CPU_ISA_AVX512, 14, 32}, {CPU_ISA_AVX512, 12, 32}, {CPU_ISA_AVX512, 8, 32},
    {CPU_ISA_AVX2, 6, 16},    {CPU_ISA_AVX2, 4, 16},    {CPU_ISA_GENERIC, 4, 8},
};

/* Cache blocks from the cache sizes, in f32 terms (a bf16 pair strip of
 * the same KC takes half the bytes). KC: the A micro-panel (MR x KC) fills
 * up to ~90% of L1d, so it stays there while the B micro-panel (KC x NR)
 * streams from L2 (the kernel keeps its rate with B in L2: measured 97% of
 * the FMA peak at KC = 1024); larger KC also means fewer passes over the
 * partial sums in D. MC: the packed A block (MC x KC) fills half of L2. NC:
 * the packed B panel (KC x NC) fills a quarter of L3. On the Zen 4 this was
 * tuned on (32 KiB / 1 MiB / 32 MiB) that gives 14x32: KC=512 MC=252
 * NC=4096, the best of the KC/MC/NC sweep in docs/PERFORMANCE.md.
 * `kc_numerator / kc_denominator` scales KC for the neighbours listed for
 * tuning. */
static void gemm_blocking(const cpu_caches *caches, int mr, int nr, int kc_numerator,
                          int kc_denominator, int *mc, int *kc, int *nc) {
  int64_t k = caches->l1d * 9 / 10 / (4 * mr);
  k = k * kc_numerator / kc_denominator;
  k = k / 64 * 64;
  k = k < 64 ? 64 : k > 2048 ? 2048 : k;
  int64_t m = caches->l2 / 2 / (4 * k);
  m = m / mr * mr;
  m = m < mr ? mr : m > 64 * mr ? 64 * mr : m;
  int64_t l3 = caches->l3 > 0 ? caches->l3 : caches->l2 * 4;
  int64_t n = l3 / 4 / (4 * k);
  n = n / nr * nr;
  n = n < 4 * nr ? 4 * nr : n > 8192 ? 8192 : n;
  *kc = (int)k;
  *mc = (int)m;
  *nc = (int)n;
}

enum { GEMM_MAX_CONFIGS = 24 };
static cpu_gemm_config gemm_configs[GEMM_MAX_CONFIGS];
static int gemm_config_count;
static pthread_once_t gemm_configs_once = PTHREAD_ONCE_INIT;

static void add_gemm_config(cpu_isa family, int method, int mr, int nr, int mc, int kc, int nc) {
  if (gemm_config_count >= GEMM_MAX_CONFIGS)
    return;
  cpu_gemm_config *c = &gemm_configs[gemm_config_count++];
  c->isa = family;
  c->method = method;
  c->mr = mr;
  c->nr = nr;
  c->mc = mc;
  c->kc = kc;
  c->nc = nc;
  if (method == CPU_GEMM_GEMV)
    snprintf(c->name, sizeof c->name, "cpu_gemv_%s", cpu_isa_name(family));
  else
    snprintf(c->name, sizeof c->name, "cpu_gemm_%s_mr%dnr%d_kc%d_mc%d_nc%d", cpu_isa_name(family),
             mr, nr, kc, mc, nc);
  if (method == CPU_GEMM_GEMV)
    snprintf(c->description, sizeof c->description,
             "%s gemv: B streamed once without packing, rows of A in registers, all threads; "
             "f32 accumulation",
             cpu_isa_name(family));
  else
    snprintf(c->description, sizeof c->description,
             "%s register block MR=%d x NR=%d; KC=%d MC=%d NC=%d; f32 accumulation",
             cpu_isa_name(family), mr, nr, kc, mc, nc);
}

/* Every family this machine can run, best first: its register blocks with
 * the cache-derived blocking (the first also with half and double KC), then
 * its gemv. */
static void build_gemm_configs(void) {
  const cpu_machine *m = cpu_machine_get();
  static const cpu_isa families[] = {CPU_ISA_AVX512, CPU_ISA_AVX2, CPU_ISA_GENERIC};
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    cpu_isa family = families[f];
    if (!cpu_isa_includes(m->best, family))
      continue;
    bool first = true;
    for (size_t s = 0; s < sizeof gemm_shapes / sizeof gemm_shapes[0]; s++) {
      const gemm_shape *shape = &gemm_shapes[s];
      if (shape->family != family || !cpu_gemm_has_kernel(family, shape->mr, shape->nr))
        continue;
      int mc, kc, nc;
      gemm_blocking(&m->caches, shape->mr, shape->nr, 1, 1, &mc, &kc, &nc);
      add_gemm_config(family, CPU_GEMM_PACKED, shape->mr, shape->nr, mc, kc, nc);
      if (first) {
        static const int scales[][2] = {{1, 2}, {2, 1}};
        for (int i = 0; i < 2; i++) {
          int mc2, kc2, nc2;
          gemm_blocking(&m->caches, shape->mr, shape->nr, scales[i][0], scales[i][1], &mc2, &kc2,
                        &nc2);
          if (kc2 != kc)
            add_gemm_config(family, CPU_GEMM_PACKED, shape->mr, shape->nr, mc2, kc2, nc2);
        }
        first = false;
      }
    }
    add_gemm_config(family, CPU_GEMM_GEMV, 0, 0, 0, 0, 0);
  }
}

static void ensure_gemm_configs(void) {
  pthread_once(&gemm_configs_once, build_gemm_configs);
}

/* A variant runs when the active level includes its family. */
static bool gemm_config_usable(const cpu_gemm_config *c) {
  return cpu_isa_includes(cpu_isa_active(), (cpu_isa)c->isa);
}

static const cpu_gemm_config *find_gemm_config(cpu_isa family, int method) {
  ensure_gemm_configs();
  for (int i = 0; i < gemm_config_count; i++)
    if (gemm_configs[i].isa == (int)family && gemm_configs[i].method == method)
      return &gemm_configs[i];
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Attention, row and elementwise variants                                   */
/* ------------------------------------------------------------------------ */

static const cpu_attention_config attention_configs[] = {
    {"cpu_attention_bq32_bkv64", 32, 64},
    {"cpu_attention_bq64_bkv128", 64, 128},
};
enum { ATTENTION_SMALL, ATTENTION_LARGE, ATTENTION_CONFIG_COUNT = 2 };

static const cpu_simple_config rows_config = {
    "cpu_rows", "one row per task, f32 arithmetic, rows split over the thread pool"};
static const cpu_simple_config elementwise_config = {
    "cpu_elementwise", "contiguous runs converted through f32 buffers, split over the thread pool"};

static int op_is_row_op(tsr_op op) {
  return op == TSR_OP_RMSNORM || op == TSR_OP_LAYERNORM || op == TSR_OP_SOFTMAX ||
         op == TSR_OP_CROSS_ENTROPY;
}

static int op_is_elementwise(tsr_op op) {
  return op == TSR_OP_ROPE || op == TSR_OP_SWIGLU || op == TSR_OP_GELU;
}

/* ------------------------------------------------------------------------ */
/* Heuristics                                                                */
/* ------------------------------------------------------------------------ */

/* Rows per matrix product, columns, depth, and whether B has a unit stride
 * in one direction (what the gemv path streams well). */
static void gemm_shape_of(tsr_op op, const void *args, int64_t *m, int64_t *n, int64_t *k,
                          bool *b_unit_stride, int32_t *b_dtype) {
  const tsr_plugin_tensor *b;
  int b_row_dim;
  if (op == TSR_OP_GEMM) {
    const tsr_gemm_args *g = args;
    *m = g->d.shape[1];
    *n = g->d.shape[2];
    *k = g->a.shape[2];
    b = &g->b;
    b_row_dim = 1;
  } else {
    const tsr_grouped_gemm_args *g = args;
    int64_t groups = 0, rows = 0;
    for (int64_t i = 0; i < g->group_count; i++) {
      if (g->group_sizes && g->group_sizes[i] > 0) {
        groups++;
        rows += g->group_sizes[i];
      }
    }
    *m = groups > 0 ? (rows + groups - 1) / groups : 0;
    *n = g->d.shape[1];
    *k = g->a.shape[1];
    b = &g->b;
    b_row_dim = 1;
  }
  *b_unit_stride = b->strides[b_row_dim + 1] == 1 || b->strides[b_row_dim] == 1;
  *b_dtype = b->dtype;
}

/* Up to this many rows the products are bound by reading B, and the gemv
 * path (B streamed once, no packing) is the faster one. Its partial sums
 * cost a load and a store per row of A for each vector of B, so with more
 * rows it turns bound by stores; the packed path's vdpbf16ps kernels make
 * bf16 cross over sooner (measured on Zen 5, 4096 x 4096: docs/PERFORMANCE.md). */
enum { GEMM_GEMV_MAX_ROWS = 8, GEMM_GEMV_MAX_ROWS_BF16 = 4 };

static const cpu_gemm_config *gemm_heuristic(tsr_op op, const void *args, char *reason,
                                             size_t capacity) {
  int64_t m, n, k;
  bool b_unit_stride;
  int32_t b_dtype;
  gemm_shape_of(op, args, &m, &n, &k, &b_unit_stride, &b_dtype);
  cpu_isa level = cpu_isa_active();
  cpu_isa family = gemm_family(level);
  const char *rows_word = op == TSR_OP_GEMM ? "M" : "mean rows per group";
  const int gemv_max_rows =
      b_dtype == TSR_DTYPE_BF16 && cpu_isa_includes(level, CPU_ISA_AVX512_BF16)
          ? GEMM_GEMV_MAX_ROWS_BF16
          : GEMM_GEMV_MAX_ROWS;
  bool gemv = m <= gemv_max_rows && b_unit_stride;
  const cpu_gemm_config *pick = find_gemm_config(family, gemv ? CPU_GEMM_GEMV : CPU_GEMM_PACKED);
  if (reason) {
    if (gemv)
      snprintf(reason, capacity,
               "%s = %lld, N = %lld, K = %lld on %s: at most %d rows, reading B is the cost; "
               "stream it once, unpacked, over all threads",
               rows_word, (long long)m, (long long)n, (long long)k, cpu_isa_name(level),
               gemv_max_rows);
    else
      snprintf(reason, capacity,
               "%s = %lld, N = %lld, K = %lld on %s: the %s %dx%d register block with cache "
               "blocks from L1d/L2/L3",
               rows_word, (long long)m, (long long)n, (long long)k, cpu_isa_name(level),
               cpu_isa_name(family), pick->mr, pick->nr);
  }
  return pick;
}

static int attention_heuristic(const tsr_attention_args *args, char *reason, size_t capacity) {
  int64_t q_len = args->q.shape[1], kv_len = args->k.shape[1];
  int pick = q_len <= 32 || kv_len <= 256 ? ATTENTION_SMALL : ATTENTION_LARGE;
  if (reason)
    snprintf(reason, capacity,
             pick == ATTENTION_SMALL
                 ? "Sq = %lld, Skv = %lld: short sequences, small tiles keep every thread busy"
                 : "Sq = %lld, Skv = %lld: long sequences, large tiles reuse each key tile longer",
             (long long)q_len, (long long)kv_len);
  return pick;
}

/* ------------------------------------------------------------------------ */
/* Listing and lookup                                                        */
/* ------------------------------------------------------------------------ */

/* Copies text, cut to fit and always terminated. */
static void copy_text(char *dst, size_t capacity, const char *src) {
  size_t length = strnlen(src, capacity - 1);
  memcpy(dst, src, length);
  dst[length] = '\0';
}

static void put_variant(tsr_plugin_variant_list *out, const char *name, const char *description) {
  if (out->count >= TSR_PLUGIN_MAX_VARIANTS)
    return;
  tsr_plugin_variant *v = &out->variants[out->count++];
  copy_text(v->name, sizeof v->name, name);
  copy_text(v->description, sizeof v->description, description);
}

/* c's description, with the bf16 kernel named where the active level uses it
 * (the level can be forced after the configs are built). */
static void describe_gemm_config(const cpu_gemm_config *c, char *buffer, size_t capacity) {
  static const char bf16_note[] = "; bf16 inputs: vdpbf16ps";
  bool bf16 = c->method == CPU_GEMM_PACKED && c->isa == CPU_ISA_AVX512 &&
              cpu_isa_includes(cpu_isa_active(), CPU_ISA_AVX512_BF16);
  copy_text(buffer, capacity, c->description);
  size_t used = strlen(buffer);
  if (bf16 && used + sizeof bf16_note <= capacity)
    memcpy(buffer + used, bf16_note, sizeof bf16_note);
}

tsr_status cpu_op_variants(tsr_op op, const void *args, tsr_plugin_variant_list *out) {
  out->count = 0;
  out->heuristic = 0;
  out->reason[0] = '\0';
  char description[160];
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    ensure_gemm_configs();
    char reason[sizeof out->reason];
    const cpu_gemm_config *pick = gemm_heuristic(op, args, reason, sizeof reason);
    for (int i = 0; i < gemm_config_count; i++) {
      const cpu_gemm_config *c = &gemm_configs[i];
      if (!gemm_config_usable(c))
        continue;
      if (c == pick)
        out->heuristic = (int32_t)out->count;
      describe_gemm_config(c, description, sizeof description);
      put_variant(out, c->name, description);
    }
    snprintf(out->reason, sizeof out->reason, "%s", reason);
    return TSR_OK;
  }
  if (op == TSR_OP_ATTENTION) {
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++) {
      const cpu_attention_config *c = &attention_configs[i];
      snprintf(description, sizeof description,
               "query tile %d rows x key tile %d rows, online softmax in f32", c->block_q,
               c->block_kv);
      put_variant(out, c->name, description);
    }
    out->heuristic = attention_heuristic(args, out->reason, sizeof out->reason);
    return TSR_OK;
  }
  const cpu_simple_config *only = op_is_row_op(op)        ? &rows_config
                                  : op_is_elementwise(op) ? &elementwise_config
                                                          : NULL;
  if (!only)
    return TSR_ERROR_UNSUPPORTED;
  put_variant(out, only->name, only->description);
  snprintf(out->reason, sizeof out->reason, "the only variant of this op");
  return TSR_OK;
}

const void *cpu_op_find_variant(tsr_op op, const char *name) {
  if (!name)
    return NULL;
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    ensure_gemm_configs();
    for (int i = 0; i < gemm_config_count; i++)
      if (strcmp(name, gemm_configs[i].name) == 0)
        return gemm_config_usable(&gemm_configs[i]) ? &gemm_configs[i] : NULL;
    return NULL;
  }
  if (op == TSR_OP_ATTENTION) {
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++)
      if (strcmp(name, attention_configs[i].name) == 0)
        return &attention_configs[i];
    return NULL;
  }
  if (op_is_row_op(op))
    return strcmp(name, rows_config.name) == 0 ? &rows_config : NULL;
  if (op_is_elementwise(op))
    return strcmp(name, elementwise_config.name) == 0 ? &elementwise_config : NULL;
  return NULL;
}

const void *cpu_op_default_variant(tsr_op op, const void *args) {
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM)
    return gemm_heuristic(op, args, NULL, 0);
  if (op == TSR_OP_ATTENTION)
    return &attention_configs[attention_heuristic(args, NULL, 0)];
  if (op_is_row_op(op))
    return &rows_config;
  if (op_is_elementwise(op))
    return &elementwise_config;
  return NULL;
}

void cpu_op_variant_names(tsr_op op, char *buffer, size_t capacity) {
  if (capacity == 0)
    return;
  buffer[0] = '\0';
  size_t used = 0;
  const char *names[GEMM_MAX_CONFIGS + ATTENTION_CONFIG_COUNT];
  int count = 0;
  if (op == TSR_OP_GEMM || op == TSR_OP_GROUPED_GEMM) {
    ensure_gemm_configs();
    for (int i = 0; i < gemm_config_count; i++)
      if (gemm_config_usable(&gemm_configs[i]))
        names[count++] = gemm_configs[i].name;
  } else if (op == TSR_OP_ATTENTION) {
    for (int i = 0; i < ATTENTION_CONFIG_COUNT; i++)
      names[count++] = attention_configs[i].name;
  } else if (op_is_row_op(op)) {
    names[count++] = rows_config.name;
  } else if (op_is_elementwise(op)) {
    names[count++] = elementwise_config.name;
  }
  for (int i = 0; i < count; i++)
    append(buffer, capacity, &used, "%s%s", i > 0 ? ", " : "", names[i]);
}
