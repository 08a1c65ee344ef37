/* SPDX-License-Identifier: Apache-2.0 */
/* Instruction-set detection and dispatch of the CPU plugin, tested on its
 * own sources (compiled into this program): the detection logic on made-up
 * feature sets, the level ladder, TESSERA_CPU_ISA parsing, and this
 * machine's detection (its best level has every feature of the levels below
 * it). Exit 0 on success, 1 on failure. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"

static int failures;

#define EXPECT(condition)                                                                          \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #condition);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static const cpu_isa x86_ladder[] = {CPU_ISA_GENERIC,     CPU_ISA_AVX2,        CPU_ISA_AVX512,
                                     CPU_ISA_AVX512_BF16, CPU_ISA_AVX512_FP16, CPU_ISA_AMX};

/* A CPU and OS with everything up to and including `top` on the x86 ladder. */
static cpu_features x86_features_up_to(cpu_isa top) {
  cpu_features f;
  memset(&f, 0, sizeof f);
  f.sse2 = true;
  if (cpu_isa_includes(top, CPU_ISA_AVX2))
    f.osxsave = f.os_avx = f.avx = f.avx2 = f.fma = f.f16c = true;
  if (cpu_isa_includes(top, CPU_ISA_AVX512))
    f.os_avx512 = f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;
  if (cpu_isa_includes(top, CPU_ISA_AVX512_BF16))
    f.avx512_bf16 = true;
  if (cpu_isa_includes(top, CPU_ISA_AVX512_FP16))
    f.avx512_fp16 = true;
  if (cpu_isa_includes(top, CPU_ISA_AMX))
    f.os_amx = f.amx_tile = f.amx_bf16 = true;
  return f;
}

static void test_ladder(void) {
  /* Each level of the x86 ladder includes the ones below it and no other. */
  int n = (int)(sizeof x86_ladder / sizeof x86_ladder[0]);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      EXPECT(cpu_isa_includes(x86_ladder[i], x86_ladder[j]) == (j <= i));
  EXPECT(!cpu_isa_includes(CPU_ISA_AVX512, CPU_ISA_NEON));
  EXPECT(!cpu_isa_includes(CPU_ISA_SVE, CPU_ISA_AVX2));
  EXPECT(cpu_isa_includes(CPU_ISA_SVE, CPU_ISA_NEON));
  EXPECT(cpu_isa_includes(CPU_ISA_NEON, CPU_ISA_GENERIC));
  for (int i = 0; i < CPU_ISA_COUNT_; i++) {
    cpu_isa parsed;
    EXPECT(cpu_isa_from_name(cpu_isa_name((cpu_isa)i), &parsed) && parsed == (cpu_isa)i);
  }
}

static void test_made_up_machines(void) {
#if CPU_HAVE_X86_KERNELS
  /* Every level with kernels is chosen when exactly its features are there. */
  EXPECT(cpu_isa_best_for(&(cpu_features){.sse2 = true}) == CPU_ISA_GENERIC);
  for (size_t i = 0; i < sizeof x86_ladder / sizeof x86_ladder[0]; i++) {
    cpu_isa level = x86_ladder[i];
    cpu_features f = x86_features_up_to(level);
    cpu_isa expected = level;
    while (!cpu_isa_has_kernels(expected)) /* amx: no kernels, the level below runs */
      expected = cpu_isa_parent(expected);
    EXPECT(cpu_isa_best_for(&f) == expected);
  }
  /* The OS state decides too: AVX-512 bits without zmm state in XCR0. */
  cpu_features f = x86_features_up_to(CPU_ISA_AVX512_BF16);
  f.os_avx512 = false;
  EXPECT(cpu_isa_best_for(&f) == CPU_ISA_AVX2);
  f = x86_features_up_to(CPU_ISA_AVX512);
  f.os_avx = false;
  f.os_avx512 = false;
  EXPECT(cpu_isa_best_for(&f) == CPU_ISA_GENERIC);
  /* A missing feature of a level stops the climb there. */
  f = x86_features_up_to(CPU_ISA_AVX512_FP16);
  f.fma = false;
  EXPECT(cpu_isa_best_for(&f) == CPU_ISA_GENERIC);
  f = x86_features_up_to(CPU_ISA_AVX512_BF16);
  f.avx512bw = false;
  EXPECT(cpu_isa_best_for(&f) == CPU_ISA_AVX2);
  f = x86_features_up_to(CPU_ISA_AVX512);
  f.avx512_fp16 = true; /* FP16 without BF16 is not the fp16 level */
  EXPECT(cpu_isa_best_for(&f) == CPU_ISA_AVX512);
#endif
}

static void test_choose(void) {
  char message[256];
  /* Unset: the best level, no message. */
  EXPECT(cpu_isa_choose(NULL, CPU_ISA_AVX512_BF16, message, sizeof message) == CPU_ISA_AVX512_BF16);
  EXPECT(message[0] == '\0');
  EXPECT(cpu_isa_choose("", CPU_ISA_AVX2, message, sizeof message) == CPU_ISA_AVX2);
  /* A lower level is honoured. */
  EXPECT(cpu_isa_choose("avx2", CPU_ISA_AVX512_BF16, message, sizeof message) == CPU_ISA_AVX2);
  EXPECT(message[0] == '\0');
  EXPECT(cpu_isa_choose("generic", CPU_ISA_AVX512, message, sizeof message) == CPU_ISA_GENERIC);
  /* A higher level than the machine's is refused, with a message. */
  EXPECT(cpu_isa_choose("avx512_fp16", CPU_ISA_AVX2, message, sizeof message) == CPU_ISA_AVX2);
  EXPECT(strstr(message, "reach avx2") != NULL);
  /* Another ladder is refused too. */
  EXPECT(cpu_isa_choose("neon", CPU_ISA_AVX512, message, sizeof message) == CPU_ISA_AVX512);
  EXPECT(message[0] != '\0');
  /* An unknown name is refused, with a message. */
  EXPECT(cpu_isa_choose("avx9000", CPU_ISA_AVX512, message, sizeof message) == CPU_ISA_AVX512);
  EXPECT(strstr(message, "avx9000") != NULL);
  EXPECT(cpu_isa_choose("AVX2", CPU_ISA_AVX512, message, sizeof message) == CPU_ISA_AVX512);
}

static void test_this_machine(void) {
  const cpu_machine *m = cpu_machine_get();
  /* The best level has kernels, and it and every level below it have their
   * features (levels are monotonic). */
  EXPECT(cpu_isa_has_kernels(m->best));
  for (cpu_isa level = m->best;; level = cpu_isa_parent(level)) {
    EXPECT(cpu_isa_has_features(level, &m->features));
    if (level == CPU_ISA_GENERIC)
      break;
  }
  /* No level above it with kernels has its features. */
  for (int i = 0; i < CPU_ISA_COUNT_; i++)
    if (cpu_isa_has_kernels((cpu_isa)i) && cpu_isa_has_features((cpu_isa)i, &m->features))
      EXPECT(cpu_isa_includes(m->best, (cpu_isa)i));
      /* The detection agrees with the compiler's own view of the CPU. */
#if CPU_HAVE_X86_KERNELS
  __builtin_cpu_init();
  EXPECT(m->features.avx2 == (__builtin_cpu_supports("avx2") != 0));
  EXPECT(m->features.avx512f == (__builtin_cpu_supports("avx512f") != 0));
#endif
  EXPECT(m->caches.l1d > 0 && m->caches.l2 >= m->caches.l1d);
  char details[1024];
  cpu_machine_describe(m->best, 3, details, sizeof details);
  char line[64];
  snprintf(line, sizeof line, "isa in use: %s\n", cpu_isa_name(m->best));
  EXPECT(strstr(details, line) != NULL);
  EXPECT(strstr(details, "threads: 3\n") != NULL);
  EXPECT(strstr(details, "l1d cache: ") != NULL);
  printf("%s", details);
}

/* --check-level LEVEL TESSERA [ARGS...]: skips (77) when this machine lacks
 * LEVEL; else, with TESSERA_CPU_ISA=LEVEL, checks that `TESSERA info cpu`
 * reports the level in use and runs `TESSERA check --device cpu ARGS`. */
static int check_level(const char *name, const char *tessera, int argc, char **argv) {
  cpu_isa level;
  if (!cpu_isa_from_name(name, &level)) {
    fprintf(stderr, "unknown level '%s'\n", name);
    return 2;
  }
  if (!cpu_isa_includes(cpu_isa_detect(), level)) {
    printf("SKIP: this machine and build reach %s, not %s\n", cpu_isa_name(cpu_isa_detect()), name);
    return 77;
  }
  setenv("TESSERA_CPU_ISA", name, 1);
  char command[4096];
  snprintf(command, sizeof command, "'%s' info cpu", tessera);
  FILE *pipe = popen(command, "r");
  if (!pipe) {
    fprintf(stderr, "cannot run %s\n", command);
    return 1;
  }
  char line[512], expected[128];
  snprintf(expected, sizeof expected, "isa in use: %s\n", name);
  bool found = false;
  while (fgets(line, sizeof line, pipe))
    if (strstr(line, expected))
      found = true;
  if (pclose(pipe) != 0 || !found) {
    fprintf(stderr, "'%s' did not report \"%.*s\"\n", command, (int)strlen(expected) - 1, expected);
    return 1;
  }
  size_t used = (size_t)snprintf(command, sizeof command, "'%s' check --device cpu", tessera);
  for (int i = 0; i < argc && used < sizeof command; i++)
    used += (size_t)snprintf(command + used, sizeof command - used, " '%s'", argv[i]);
  printf("TESSERA_CPU_ISA=%s %s\n", name, command);
  fflush(stdout);
  int status = system(command);
  return status == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "--check-level") == 0)
    return check_level(argv[2], argv[3], argc - 4, argv + 4);
  /* --supports LEVEL: exit 0 when this machine and build run LEVEL, 77
   * (ctest's skip code in this suite) when not, 2 for an unknown name. */
  if (argc == 3 && strcmp(argv[1], "--supports") == 0) {
    cpu_isa level;
    if (!cpu_isa_from_name(argv[2], &level)) {
      fprintf(stderr, "unknown level '%s'\n", argv[2]);
      return 2;
    }
    bool runs = cpu_isa_includes(cpu_isa_detect(), level);
    printf("%s: %s\n", argv[2], runs ? "supported" : "not supported here");
    return runs ? 0 : 77;
  }
  test_ladder();
  test_made_up_machines();
  test_choose();
  test_this_machine();
  if (failures) {
    fprintf(stderr, "test_isa: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_isa: ok\n");
  return 0;
}
