/* SPDX-License-Identifier: Apache-2.0 */
/* tessera: the command-line tool. Lists devices, checks every op on every
 * device against the fp64 reference, benchmarks, tunes and explains kernel
 * variant choices. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "cublaslt.h"
#include "openblas.h"
#include "problem.h"

/* One entry per command: `usage` and `summary` make up the overview of
 * 'tessera help'; `options` (one option a line) is added by
 * 'tessera COMMAND --help' and 'tessera help COMMAND'. */
typedef struct command_entry {
  const char *name;
  int (*run)(int, char **);
  const char *usage;
  const char *summary;
  const char *options;
  bool shapes; /* takes --shape: the help shows the SHAPE syntax */
} command_entry;

static int cmd_run(int argc, char **argv);

static const command_entry commands[] = {
    {"devices", cmd_devices, "devices [--verbose] [--json]",
     "List devices (index, selector, type, name, memory, compute units, dtypes).\n",
     "  --verbose, -v      also the directories searched and every plugin manifest:\n"
     "                     loaded, skipped or filtered, and why (a plugin with no device\n"
     "                     says why too)\n"
     "  --json             devices, plugin reports and search directories as JSON\n",
     false},
    {"info", cmd_info, "info DEVICE",
     "Everything the device reports: backend, vendor, arch, memory, ops, dtypes.\n",
     "  DEVICE, --device D the device (see DEVICE below)\n", false},
    {"check", cmd_check,
     "check [--device SEL ...|--all] [--op NAME] [--dtype D] [--case N] [--quick]\n"
     "        [--json FILE] [--junit FILE] [--compare A,B] [--seed S] [--jobs N] [--list]\n"
     "        [--verbose]",
     "Run every op x dtype x case against the fp64 reference: guard bands, NaN-\n"
     "filled outputs, per-dtype error bounds. Prints a device x op matrix and, for\n"
     "each failure, the command that reproduces it. Exit status 1 on any failure,\n"
     "and when the filters leave no case to run (\"no case matched\"). Devices are\n"
     "checked side by side, each on a thread and queue of its own.\n",
     "  --device SEL       a device to check (repeatable; default: TESSERA_DEVICE, else best)\n"
     "  --all              every device\n"
     "  --op NAME          only this op's cases\n"
     "  --dtype D          only this dtype (default: f32, f16 and bf16)\n"
     "  --case N           only case N of --op (the number a failure line prints)\n"
     "  --quick            only the cases marked quick\n"
     "  --compare A,B      also compare two devices' outputs with each other\n"
     "  --seed S           the inputs' seed (default 1)\n"
     "  --jobs N           check at most N devices at once (default: all; 1: in turn)\n"
     "  --json FILE        write the results as JSON (with the version and the devices)\n"
     "  --junit FILE       write the results as JUnit XML\n"
     "  --list             list the cases each device would run; run nothing\n"
     "  --verbose, -v      a line per case\n",
     false},
    {"bench", cmd_bench,
     "bench [--device SEL ...|--all] [--op NAME] [--dtype D] [--shape SHAPE]\n"
     "        [--causal] [--compute strict|tf32] [--suite NAME|PATH]\n"
     "        [--short] [--json FILE] [--list] [--concurrent]",
     "Time ops with queue events (median, min and max over rotated inputs): GFLOP/s,\n"
     "GB/s and the fraction of the measured peak (copy bandwidth; on CPUs the FMA\n"
     "rate of the device's threads); f32 GEMM on CPUs also runs OpenBLAS on the\n"
     "same inputs: as installed, with OPENBLAS_CORETYPE=SkylakeX and =Prescott.\n"
     "Rows are flagged ^ (rate above its ceiling) and ~ (disturbed: max/min over\n"
     "1.5, or the copy bandwidth before and after the row over 20% apart).\n"
     "Exit status 1 when a row could not run or no row matched.\n",
     "  --device SEL       a device to time (repeatable; default: TESSERA_DEVICE, else best)\n"
     "  --all              every device\n"
     "  --op NAME          only this op's rows\n"
     "  --dtype D          only this dtype's rows\n"
     "  --shape SHAPE      with --op: time that shape (in --dtype, else each of f32,\n"
     "                     f16, bf16 the device supports) instead of the default rows;\n"
     "                     with --suite: only the suite's rows of that shape\n"
     "  --causal           attention shapes: causal mask\n"
     "  --compute MODE     f32 GEMM rows: strict (default) or tf32\n"
     "  --suite NAME|PATH  the rows (and criteria) of a suite file: NAME.suite in\n"
     "                     <datadir>/tessera/bench/suites, or a PATH with '/'\n"
     "                     (docs/BENCHMARKS.md). default: a row per op the LLM spends\n"
     "                     its time in; cpu-kernels (cpu), cuda-llm (cuda),\n"
     "                     vulkan-vs-cuda (vulkan): a backend's acceptance criteria,\n"
     "                     each judged PASS/FAIL against its threshold (cpu: device\n"
     "                     cpu unless --device/--all; cuda: cuBLASLt beside every\n"
     "                     GEMM row; vulkan: the Vulkan GPUs, with the CUDA devices'\n"
     "                     rows and cuBLASLt as the same run's reference)\n"
     "  --short            fewer runs; rows marked short instead of full (default:\n"
     "                     smaller sizes)\n"
     "  --json FILE        write rows, calibration, criteria, version and devices as JSON\n"
     "  --list             list the rows each device would time; time nothing\n"
     "  --concurrent       then every row on all the devices at once (a thread and a\n"
     "                     queue each): each device's rate beside its solo rate\n",
     true},
    {"tune", cmd_tune,
     "tune --device SEL --op NAME [--dtype D] --shape SHAPE [--causal] [--db FILE]",
     "Time every kernel variant of the problem and record the fastest in the\n"
     "tuning database (default: the user database).\n",
     "  --device SEL       the device\n"
     "  --op NAME          the op\n"
     "  --dtype D          the dtype (default f32)\n"
     "  --shape SHAPE      the problem's extents\n"
     "  --causal           attention: causal mask\n"
     "  --db FILE          the tuning database to write\n",
     true},
    {"explain", cmd_explain,
     "explain --device SEL --op NAME [--dtype D] --shape SHAPE [--causal] [--db FILE]",
     "Which variant the call would use, which rule chose it, and the candidates.\n",
     "  --device SEL       the device\n"
     "  --op NAME          the op\n"
     "  --dtype D          the dtype (default f32)\n"
     "  --shape SHAPE      the problem's extents\n"
     "  --causal           attention: causal mask\n"
     "  --db FILE          consult that tuning database (as TESSERA_TUNING_DB does)\n",
     true},
    {"run", cmd_run, "run [--short] [--list]",
     "devices, then check --all (--short: check --all --quick), then bench --all\n"
     "(--short: bench --all --short, the smaller sizes). Exit status 1 when the check\n"
     "failed.\n",
     "  --short            the quick check and the short benchmark\n"
     "  --list             what check and bench would run, without running it\n",
     false},
};
#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static const command_entry *find_command(const char *name) {
  for (size_t i = 0; i < COMMAND_COUNT; i++)
    if (strcmp(name, commands[i].name) == 0)
      return &commands[i];
  return NULL;
}

/* `text` with every line indented by `indent` spaces. */
static void print_indented(const char *text, int indent) {
  while (*text) {
    const char *end = strchr(text, '\n');
    int length = end ? (int)(end - text) : (int)strlen(text);
    printf("%*s%.*s\n", indent, "", length, text);
    text += length + (end ? 1 : 0);
  }
}

static void print_notes(bool shapes) {
  printf("\nDEVICE / SEL: cpu, cpu:0, cuda:1, vulkan, gpu, best, or an index from 'devices'.\n"
         "D: f32, f16, bf16.\n");
  if (shapes)
    printf("\nSHAPE per op:\n%s", problem_shape_help());
}

static void print_help(void) {
  printf("usage: tessera COMMAND [OPTIONS]   ('tessera COMMAND --help': its options)\n"
         "\n"
         "commands:\n");
  for (size_t i = 0; i < COMMAND_COUNT; i++) {
    printf("  %s\n", commands[i].usage);
    print_indented(commands[i].summary, 6);
  }
  printf("  help [COMMAND], --help, --version\n");
  print_notes(true);
  printf("\n"
         "environment: TESSERA_PLUGIN_PATH, TESSERA_ADD_PLUGIN_PATH, TESSERA_BACKENDS,\n"
         "TESSERA_DISABLE_BACKENDS, TESSERA_DEVICE, TESSERA_CONFIG, TESSERA_TUNING_DB,\n"
         "TESSERA_LOG=debug.\n");
}

static void print_command_help(const command_entry *c) {
  printf("usage: tessera %s\n\n", c->usage);
  printf("%s\noptions:\n%s", c->summary, c->options);
  print_notes(c->shapes);
  printf("\n(all commands: 'tessera help')\n");
}

/* devices, the check on every device, then the benchmark on every device:
 * the full sizes, or with --short the quick check and the short sizes. */
static int cmd_run(int argc, char **argv) {
  bool quick = false, list = false;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    if (arg_flag(&c, "--short"))
      quick = true;
    else if (arg_flag(&c, "--list"))
      list = true;
    else
      return arg_unknown(&c, "run");
  }
  if (c.failed)
    return EXIT_USAGE;

  char *devices_args[] = {NULL};
  int rc = cmd_devices(0, devices_args);
  if (rc != EXIT_OK)
    return rc;

  char arg_all[] = "--all", arg_quick[] = "--quick", arg_short[] = "--short", arg_list[] = "--list";
  char *check_args[4] = {arg_all}, *bench_args[4] = {arg_all};
  int check_count = 1, bench_count = 1;
  if (quick) {
    check_args[check_count++] = arg_quick;
    bench_args[bench_count++] = arg_short;
  }
  if (list) {
    check_args[check_count++] = arg_list;
    bench_args[bench_count++] = arg_list;
  }
  /* Each step says what it runs, so a log shows which sizes were timed. */
  printf("\nrun: tessera check");
  for (int i = 0; i < check_count; i++)
    printf(" %s", check_args[i]);
  printf("\n");
  fflush(stdout);
  int check_rc = cmd_check(check_count, check_args);
  if (check_rc == EXIT_USAGE)
    return check_rc;

  printf("\nrun: tessera bench");
  for (int i = 0; i < bench_count; i++)
    printf(" %s", bench_args[i]);
  printf("\n");
  fflush(stdout);
  int bench_rc = cmd_bench(bench_count, bench_args);
  if (check_rc != EXIT_OK) {
    printf("\nrun: the check FAILED (see the failures above)\n");
    return check_rc;
  }
  return bench_rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_help();
    return EXIT_USAGE;
  }
  const char *command = argv[1];
  int rest_count = argc - 2;
  char **rest = argv + 2;
  if (strcmp(command, "--version") == 0 || strcmp(command, "version") == 0) {
    printf("tessera %s\n", tsr_version());
    return EXIT_OK;
  }
  if (strcmp(command, "help") == 0 || strcmp(command, "--help") == 0 ||
      strcmp(command, "-h") == 0) {
    if (rest_count == 0) {
      print_help();
      return EXIT_OK;
    }
    const command_entry *c = find_command(rest[0]);
    if (c == NULL) {
      cli_error("unknown command '%s' (see 'tessera help')", rest[0]);
      return EXIT_USAGE;
    }
    print_command_help(c);
    return EXIT_OK;
  }
  /* Not in the help: bench runs OpenBLAS in a child process through it. */
  if (strcmp(command, OPENBLAS_CHILD_COMMAND) == 0)
    return cmd_openblas_sgemm(rest_count, rest);
  /* Not in the help either: says whether bench finds cuBLASLt (tests, run.sh). */
  if (strcmp(command, "__cublaslt-probe") == 0)
    return cmd_cublaslt_probe(rest_count, rest);
  const command_entry *c = find_command(command);
  if (c == NULL) {
    cli_error("unknown command '%s' (see 'tessera help')", command);
    return EXIT_USAGE;
  }
  /* "tessera COMMAND --help" anywhere among its arguments: its own help. */
  for (int i = 0; i < rest_count; i++) {
    if (strcmp(rest[i], "--help") == 0 || strcmp(rest[i], "-h") == 0) {
      print_command_help(c);
      return EXIT_OK;
    }
  }
  return c->run(rest_count, rest);
}
