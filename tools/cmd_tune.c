/* SPDX-License-Identifier: Apache-2.0 */
/* tessera tune: time every kernel variant of one problem and record the
 * fastest in a tuning database. tessera explain: which variant a call would
 * use and which rule chose it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"
#include "problem.h"
#include "timing.h"

#define TUNE_SETS 2

typedef struct problem_options {
  const char *selector;
  tsr_op op;
  tsr_dtype dtype;
  const char *shape;
  const char *db;
  bool causal;
} problem_options;

/* Parses the options tune and explain share; `command` names the caller. */
static int parse_problem_options(int argc, char **argv, const char *command, problem_options *o) {
  memset(o, 0, sizeof *o);
  o->op = TSR_OP_COUNT_;
  o->dtype = TSR_DTYPE_F32;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    const char *value = NULL;
    if (arg_value(&c, "--device", &value)) {
      o->selector = value;
    } else if (arg_value(&c, "--op", &value)) {
      o->op = parse_op(value);
      if (o->op == TSR_OP_COUNT_)
        return EXIT_USAGE;
    } else if (arg_value(&c, "--dtype", &value)) {
      o->dtype = parse_float_dtype(value);
      if (o->dtype == TSR_DTYPE_INVALID)
        return EXIT_USAGE;
    } else if (arg_value(&c, "--shape", &value)) {
      o->shape = value;
    } else if (arg_value(&c, "--db", &value)) {
      o->db = value;
    } else if (arg_flag(&c, "--causal")) {
      o->causal = true;
    } else {
      return arg_unknown(&c, command);
    }
  }
  if (c.failed)
    return EXIT_USAGE;
  if (o->op == TSR_OP_COUNT_ || o->shape == NULL) {
    cli_error("%s needs --op NAME and --shape SHAPE (see 'tessera help' for SHAPE)", command);
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

static const char *rule_name(tsr_choice_rule rule) {
  switch (rule) {
  case TSR_CHOICE_OVERRIDE:
    return "override";
  case TSR_CHOICE_TUNING_DB:
    return "tuning database";
  case TSR_CHOICE_HEURISTIC:
    return "heuristic";
  default:
    return "unknown";
  }
}

/* The device, a queue and `set_count` copies of the problem (different
 * random inputs). Everything is released by release_setup. */
typedef struct setup {
  tsr_context *context;
  tsr_device *device;
  tsr_device_info info;
  tsr_queue *queue;
  problem sets[TUNE_SETS];
  int set_count;
} setup;

static void release_setup(setup *s) {
  for (int i = 0; i < s->set_count; i++)
    problem_destroy(&s->sets[i]);
  tsr_queue_destroy(s->queue);
  tsr_context_destroy(s->context);
}

static int make_setup(const problem_options *o, int set_count, setup *s) {
  memset(s, 0, sizeof *s);
  problem_spec spec;
  if (!problem_spec_from_shape(&spec, o->op, o->dtype, o->shape, o->causal))
    return EXIT_USAGE;
  s->context = open_context();
  if (s->context == NULL)
    return EXIT_FAILED;
  int rc = select_one_device(s->context, o->selector, &s->device, &s->info);
  if (rc != EXIT_OK)
    return rc;
  tsr_status status = tsr_queue_create(s->device, &s->queue);
  if (status != TSR_OK) {
    cli_api_error("tsr_queue_create", status);
    return EXIT_FAILED;
  }
  problem_build_options build = {0, false, NULL};
  for (int i = 0; i < set_count; i++) {
    s->set_count = i + 1;
    status =
        problem_build(&s->sets[i], &spec, s->device, s->queue, seed_mix(7, (uint64_t)i), &build);
    if (status != TSR_OK) {
      cli_error("setting up %s %s: %s", tsr_op_name(o->op), o->shape, s->sets[i].error);
      return EXIT_FAILED;
    }
  }
  return EXIT_OK;
}

/* Prints the rate of a timing: TFLOP/s for compute-bound ops, GB/s else. */
static void format_rate(char *buf, size_t capacity, const problem_spec *spec, double ms) {
  double flops = problem_flops(spec);
  if (flops > 0.0)
    snprintf(buf, capacity, "%.4f TFLOP/s", flops / (ms * 1e-3) / 1e12);
  else
    snprintf(buf, capacity, "%.2f GB/s", problem_bytes(spec) / (ms * 1e-3) / 1e9);
}

int cmd_tune(int argc, char **argv) {
  problem_options o;
  int rc = parse_problem_options(argc, argv, "tune", &o);
  if (rc != EXIT_OK)
    return rc;
  setup s;
  rc = make_setup(&o, TUNE_SETS, &s);
  if (rc != EXIT_OK) {
    release_setup(&s);
    return rc;
  }

  tsr_variant_list variants;
  memset(&variants, 0, sizeof variants);
  variants.struct_size = sizeof variants;
  tsr_status status = tsr_op_variants(s.device, o.op, problem_descriptor(&s.sets[0]), &variants);
  if (status != TSR_OK) {
    cli_api_error("tsr_op_variants", status);
    release_setup(&s);
    return EXIT_FAILED;
  }
  if (variants.count == 0) {
    cli_error("tune: %s lists no variant for %s %s %s", s.info.selector, tsr_op_name(o.op),
              tsr_dtype_name(o.dtype), o.shape);
    release_setup(&s);
    return EXIT_FAILED;
  }

  printf("tune %s %s %s on %s (%s)\n", tsr_op_name(o.op), tsr_dtype_name(o.dtype), o.shape,
         s.info.selector, s.info.name);
  printf("%-32s %10s %16s  %s\n", "variant", "median ms", "rate", "description");
  timing_plan plan = {2, 5, 30, 0.5, timing_warmup_seconds(s.info.type)};
  double best_ms = INFINITY;
  int best = -1, failures = 0;
  for (uint32_t v = 0; v < variants.count; v++) {
    progress_update("tune: variant %u/%u %s", v + 1, variants.count, variants.names[v]);
    timing_stats stats;
    status = time_problem(s.sets, s.set_count, s.queue, variants.names[v], &plan, &stats);
    double ms = stats.median_ms;
    progress_clear();
    if (status != TSR_OK) {
      printf("%-32s %10s %16s  %s\n", variants.names[v], "failed", "-", variants.descriptions[v]);
      failures++;
      continue;
    }
    char rate[32];
    format_rate(rate, sizeof rate, &s.sets[0].spec, ms);
    printf("%-32s %10.4f %16s  %s\n", variants.names[v], ms, rate, variants.descriptions[v]);
    if (ms < best_ms) {
      best_ms = ms;
      best = (int)v;
    }
  }
  if (best < 0) {
    cli_error("tune: every variant failed; nothing recorded");
    release_setup(&s);
    return EXIT_FAILED;
  }

  status =
      tsr_tuning_record(s.device, o.op, problem_descriptor(&s.sets[0]), variants.names[best], o.db);
  if (status != TSR_OK) {
    cli_api_error("tsr_tuning_record", status);
    release_setup(&s);
    return EXIT_FAILED;
  }
  char path[1024];
  if (o.db != NULL)
    snprintf(path, sizeof path, "%s", o.db);
  else if (tsr_tuning_user_path(path, sizeof path) != TSR_OK)
    snprintf(path, sizeof path, "the user tuning database");
  tsr_choice choice;
  memset(&choice, 0, sizeof choice);
  choice.struct_size = sizeof choice;
  if (tsr_op_explain(s.device, o.op, problem_descriptor(&s.sets[0]), &choice) == TSR_OK)
    printf("\nfastest: %s (%.4f ms); recorded \"%s %s %s %s %s\" in %s\n", variants.names[best],
           best_ms, choice.device_key, tsr_op_name(o.op), tsr_dtype_name(o.dtype),
           choice.shape_class, variants.names[best], path);
  else
    printf("\nfastest: %s (%.4f ms); recorded in %s\n", variants.names[best], best_ms, path);
  release_setup(&s);
  return failures ? EXIT_FAILED : EXIT_OK;
}

int cmd_explain(int argc, char **argv) {
  problem_options o;
  int rc = parse_problem_options(argc, argv, "explain", &o);
  if (rc != EXIT_OK)
    return rc;
  /* The database to consult is read from the environment when the lookup
   * happens, so --db takes effect for this process only. */
  if (o.db != NULL && setenv("TESSERA_TUNING_DB", o.db, 1) != 0) {
    cli_error("explain: cannot set TESSERA_TUNING_DB");
    return EXIT_FAILED;
  }
  setup s;
  rc = make_setup(&o, 1, &s);
  if (rc != EXIT_OK) {
    release_setup(&s);
    return rc;
  }
  const void *desc = problem_descriptor(&s.sets[0]);
  tsr_choice choice;
  memset(&choice, 0, sizeof choice);
  choice.struct_size = sizeof choice;
  tsr_status status = tsr_op_explain(s.device, o.op, desc, &choice);
  if (status != TSR_OK) {
    cli_api_error("tsr_op_explain", status);
    release_setup(&s);
    return EXIT_FAILED;
  }
  tsr_variant_list variants;
  memset(&variants, 0, sizeof variants);
  variants.struct_size = sizeof variants;
  status = tsr_op_variants(s.device, o.op, desc, &variants);
  if (status != TSR_OK) {
    cli_api_error("tsr_op_variants", status);
    release_setup(&s);
    return EXIT_FAILED;
  }
  char description[192];
  problem_describe(&s.sets[0].spec, description, sizeof description);
  printf("problem:      %s %s %s on %s\n", tsr_op_name(o.op), tsr_dtype_name(o.dtype), description,
         s.info.selector);
  printf("variant:      %s\n", choice.variant);
  printf("rule:         %s\n", rule_name(choice.rule));
  printf("source:       %s\n", choice.source);
  printf("device key:   %s\n", choice.device_key);
  printf("shape class:  %s\n", choice.shape_class);
  printf("candidates (%u):\n", variants.count);
  for (uint32_t v = 0; v < variants.count; v++)
    printf("  %c %-32s %s\n", strcmp(variants.names[v], choice.variant) == 0 ? '*' : ' ',
           variants.names[v], variants.descriptions[v]);
  release_setup(&s);
  return EXIT_OK;
}
