/* tessera: the command-line tool. Lists devices, checks every op on every
 * device against the fp64 reference, benchmarks, tunes and explains kernel
 * variant choices. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "cublaslt.h"
#include "openblas.h"
#include "problem.h"

static void print_help(void) {
  printf("usage: tessera COMMAND [OPTIONS]\n"
         "\n"
         "commands:\n"
         "  devices [--verbose]\n"
         "      List devices (index, selector, type, name, memory, compute units, dtypes).\n"
         "      --verbose also reports every plugin manifest: loaded or why it was skipped.\n"
         "  info DEVICE\n"
         "      Everything the device reports: backend, vendor, arch, memory, ops, dtypes.\n"
         "  check [--device SEL ...|--all] [--op NAME] [--dtype D] [--case N] [--quick]\n"
         "        [--json FILE] [--junit FILE] [--compare A,B] [--seed S] [--verbose]\n"
         "      Run every op x dtype x case against the fp64 reference: guard bands, NaN-\n"
         "      filled outputs, per-dtype error bounds. Prints a device x op matrix and, for\n"
         "      each failure, the command that reproduces it. --compare A,B also compares\n"
         "      two devices' outputs with each other. Exit status 1 on any failure.\n"
         "  bench [--device SEL ...|--all] [--op NAME] [--shape SHAPE]\n"
         "        [--suite default|cpu|cuda|vulkan]\n"
         "        [--short] [--json FILE]\n"
         "      Time ops with queue events (median over rotated inputs): GFLOP/s, GB/s and\n"
         "      the fraction of the measured peak (copy bandwidth; on CPUs the FMA rate of\n"
         "      the device's threads); f32 GEMM on CPUs also runs OpenBLAS on the same\n"
         "      inputs: as installed, with OPENBLAS_CORETYPE=SkylakeX and =Prescott.\n"
         "      --suite cpu: the rows of the CPU acceptance criteria, each judged\n"
         "      PASS/FAIL against its threshold (device cpu unless --device/--all;\n"
         "      --short: fewer runs); --suite cuda: the CUDA criteria, cuBLASLt beside\n"
         "      every GEMM row; --suite vulkan: the Vulkan criteria on the GPUs' Vulkan\n"
         "      devices, with the CUDA devices' rows and cuBLASLt as the same run's\n"
         "      reference. --op/--shape run only the matching rows.\n"
         "      Exit status 1 only when a row could not run.\n"
         "  tune --device SEL --op NAME [--dtype D] --shape SHAPE [--causal] [--db FILE]\n"
         "      Time every kernel variant of the problem and record the fastest in the\n"
         "      tuning database (default: the user database).\n"
         "  explain --device SEL --op NAME [--dtype D] --shape SHAPE [--causal] [--db FILE]\n"
         "      Which variant the call would use, which rule chose it, and the candidates.\n"
         "      --db FILE consults that tuning database (as TESSERA_TUNING_DB does).\n"
         "  run [--short]\n"
         "      devices, then the full check on every device, then bench --short on every\n"
         "      device (--short: check --quick). Exit status 1 when the check failed.\n"
         "  help, --help, --version\n"
         "\n"
         "DEVICE / SEL: cpu, cpu:0, cuda:1, vulkan, gpu, best, or an index from 'devices'.\n"
         "D: f32, f16, bf16 (default f32 for tune and explain).\n"
         "\n"
         "SHAPE per op:\n"
         "%s"
         "\n"
         "environment: TESSERA_PLUGIN_PATH, TESSERA_ADD_PLUGIN_PATH, TESSERA_BACKENDS,\n"
         "TESSERA_DISABLE_BACKENDS, TESSERA_DEVICE, TESSERA_CONFIG, TESSERA_TUNING_DB,\n"
         "TESSERA_LOG=debug.\n",
         problem_shape_help());
}

/* devices, the check on every device, then a short benchmark. */
static int cmd_run(int argc, char **argv) {
  bool quick = false;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    if (arg_flag(&c, "--short"))
      quick = true;
    else
      return arg_unknown(&c, "run");
  }
  if (c.failed)
    return EXIT_USAGE;

  char *devices_args[] = {NULL};
  int rc = cmd_devices(0, devices_args);
  if (rc != EXIT_OK)
    return rc;
  printf("\n");
  fflush(stdout);

  char arg_check_all[] = "--all", arg_quick[] = "--quick";
  char *check_args[] = {arg_check_all, arg_quick, NULL};
  int check_rc = cmd_check(quick ? 2 : 1, check_args);
  printf("\n");
  fflush(stdout);
  if (check_rc == EXIT_USAGE)
    return check_rc;

  char arg_bench_all[] = "--all", arg_short[] = "--short";
  char *bench_args[] = {arg_bench_all, arg_short, NULL};
  int bench_rc = cmd_bench(2, bench_args);
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
  if (strcmp(command, "help") == 0 || strcmp(command, "--help") == 0 ||
      strcmp(command, "-h") == 0) {
    print_help();
    return EXIT_OK;
  }
  if (strcmp(command, "--version") == 0 || strcmp(command, "version") == 0) {
    printf("tessera %s\n", tsr_version());
    return EXIT_OK;
  }
  /* "tessera COMMAND --help" prints the same help. */
  for (int i = 0; i < rest_count; i++) {
    if (strcmp(rest[i], "--help") == 0 || strcmp(rest[i], "-h") == 0) {
      print_help();
      return EXIT_OK;
    }
  }
  /* Not in the help: bench runs OpenBLAS in a child process through it. */
  if (strcmp(command, OPENBLAS_CHILD_COMMAND) == 0)
    return cmd_openblas_sgemm(rest_count, rest);
  /* Not in the help either: says whether bench finds cuBLASLt (tests, run.sh). */
  if (strcmp(command, "__cublaslt-probe") == 0)
    return cmd_cublaslt_probe(rest_count, rest);
  static const struct {
    const char *name;
    int (*run)(int, char **);
  } commands[] = {
      {"devices", cmd_devices}, {"info", cmd_info}, {"check", cmd_check},
      {"bench", cmd_bench},     {"tune", cmd_tune}, {"explain", cmd_explain},
      {"run", cmd_run},
  };
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(command, commands[i].name) == 0)
      return commands[i].run(rest_count, rest);
  cli_error("unknown command '%s' (see 'tessera help')", command);
  return EXIT_USAGE;
}
