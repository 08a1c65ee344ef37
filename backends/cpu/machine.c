/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's view of the machine: instruction-set features from CPUID
 * and XGETBV (never from CPU model tables), cache sizes from CPUID or sysfs,
 * the level the kernels are dispatched to, the CPUs this process may use and
 * the names device_info reports. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "machine.h"

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
/* Names, memory and CPUs                                                    */
/* ------------------------------------------------------------------------ */

static void trim_copy(char *dst, size_t capacity, const char *src) {
  while (*src == ' ' || *src == '\t')
    src++;
  size_t length = strlen(src);
  while (length > 0 && (src[length - 1] == ' ' || src[length - 1] == '\t' ||
                        src[length - 1] == '\n' || src[length - 1] == '\r'))
    length--;
  if (length >= capacity)
    length = capacity - 1;
  memcpy(dst, src, length);
  dst[length] = '\0';
}

/* "model name : ..." from /proc/cpuinfo; 0 when there is none. */
static int cpuinfo_model_name(char *dst, size_t capacity) {
  FILE *file = fopen("/proc/cpuinfo", "r");
  if (!file)
    return 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, file)) {
    if (strncmp(line, "model name", 10) != 0)
      continue;
    const char *colon = strchr(line, ':');
    if (colon) {
      trim_copy(dst, capacity, colon + 1);
      found = dst[0] != '\0';
    }
  }
  fclose(file);
  return found;
}

void cpu_machine_identify(cpu_isa isa, cpu_identity *out) {
  snprintf(out->vendor, sizeof out->vendor, "unknown");
  out->name[0] = '\0';
#if defined(__x86_64__) || defined(__i386__)
  unsigned int regs[4];
  if (__get_cpuid(0, &regs[0], &regs[1], &regs[2], &regs[3])) {
    char vendor[13];
    memcpy(vendor, &regs[1], 4); /* ebx, edx, ecx spell it in that order */
    memcpy(vendor + 4, &regs[3], 4);
    memcpy(vendor + 8, &regs[2], 4);
    vendor[12] = '\0';
    trim_copy(out->vendor, sizeof out->vendor, vendor);
  }
  if (__get_cpuid(0x80000000u, &regs[0], &regs[1], &regs[2], &regs[3]) && regs[0] >= 0x80000004u) {
    char brand[49];
    for (unsigned int i = 0; i < 3; i++) {
      __get_cpuid(0x80000002u + i, &regs[0], &regs[1], &regs[2], &regs[3]);
      memcpy(brand + 16 * i, regs, 16);
    }
    brand[48] = '\0';
    trim_copy(out->name, sizeof out->name, brand);
  }
#endif
  if (out->name[0] == '\0' && !cpuinfo_model_name(out->name, sizeof out->name))
    snprintf(out->name, sizeof out->name, "CPU");

  struct utsname system;
  const char *base = uname(&system) == 0 ? system.machine : "unknown";
#if defined(__x86_64__)
  base = "x86_64";
#endif
  /* The instruction set the kernels use is part of the architecture, so
   * tuning rows of an AVX2 run are not applied to an AVX-512 run. */
  if (isa == CPU_ISA_GENERIC)
    snprintf(out->arch, sizeof out->arch, "%s", base);
  else
    snprintf(out->arch, sizeof out->arch, "%s-%s", base, cpu_isa_name(isa));

  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  out->memory_bytes = pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
}

int cpu_machine_available_cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int count = CPU_COUNT(&set);
    if (count > 0)
      return count;
  }
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}
