/* SPDX-License-Identifier: Apache-2.0 */
/* tessera check: every (device, op, dtype, case) against the fp64 reference,
 * with guard bands, NaN-filled outputs, per-dtype error bounds, a device x op
 * matrix, JSON and JUnit reports, device-to-device comparison, and for every
 * failure the command that reproduces it. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "commands.h"
#include "common.h"
#include "problem.h"

#define DEFAULT_SEED 1
#define GUARD_BYTES 256

typedef enum outcome { OUTCOME_PASS, OUTCOME_FAIL, OUTCOME_ERROR, OUTCOME_SKIP } outcome;

static const char *outcome_name(outcome o) {
  static const char *const names[] = {"pass", "fail", "error", "skip"};
  return names[o];
}

typedef struct case_record {
  char device[128]; /* selector, or "A~B" for a comparison */
  tsr_op op;
  tsr_dtype dtype;
  int case_index;
  char description[192];
  outcome result;
  double error, bound, seconds;
  char message[512];
  char reproduce[256];
} case_record;

typedef struct check_options {
  const char *selectors[MAX_SELECTED_DEVICES];
  int selector_count;
  bool all;
  tsr_op op;       /* TSR_OP_COUNT_: every op */
  tsr_dtype dtype; /* TSR_DTYPE_INVALID: every float dtype */
  int case_index;  /* -1: every case */
  bool quick;
  const char *json_path;
  const char *junit_path;
  const char *compare; /* "A,B" */
  uint64_t seed;
  bool verbose;
  bool list; /* print the cases each device would run; run nothing */
  int jobs;  /* devices checked at once; 0: all of them */
} check_options;

typedef struct record_list {
  case_record *items;
  size_t count, capacity;
} record_list;

static case_record *new_record(record_list *list) {
  if (list->count == list->capacity) {
    size_t capacity = list->capacity ? list->capacity * 2 : 256;
    case_record *items = realloc(list->items, capacity * sizeof *items);
    if (items == NULL)
      return NULL;
    list->items = items;
    list->capacity = capacity;
  }
  case_record *r = &list->items[list->count++];
  memset(r, 0, sizeof *r);
  return r;
}

static uint64_t case_seed(uint64_t seed, tsr_op op, int index, tsr_dtype dtype) {
  return seed_mix(seed_mix(seed_mix(seed, (uint64_t)op + 1), (uint64_t)index + 1),
                  (uint64_t)dtype + 1);
}

static void format_reproduce(char *buf, size_t capacity, const check_options *options,
                             const char *device, tsr_op op, tsr_dtype dtype, int index,
                             bool comparison) {
  snprintf(buf, capacity, "tessera check %s %s --op %s --dtype %s --case %d",
           comparison ? "--compare" : "--device", device, tsr_op_name(op), tsr_dtype_name(dtype),
           index);
  if (options->seed != DEFAULT_SEED) {
    size_t used = strlen(buf);
    snprintf(buf + used, capacity - used, " --seed %llu", (unsigned long long)options->seed);
  }
}

/* Whether a case of this op/dtype is to run at all on the device, and if
 * not, why. */
static bool device_can_run(const tsr_device_info *info, tsr_op op, tsr_dtype dtype, char *why,
                           size_t capacity) {
  if (!(info->op_mask & (1u << op))) {
    snprintf(why, capacity, "%s does not support %s", info->selector, tsr_op_name(op));
    return false;
  }
  if (!(info->dtype_mask & (1u << dtype))) {
    snprintf(why, capacity, "%s does not support %s", info->selector, tsr_dtype_name(dtype));
    return false;
  }
  return true;
}

/* Builds, runs and verifies one case on one device. The problem stays built
 * (for a comparison) and is destroyed by the caller. */
static void execute_case(tsr_device *device, const tsr_device_info *info, tsr_queue *queue,
                         const problem_spec *spec, uint64_t seed, problem *p, case_record *record) {
  record->result = OUTCOME_PASS;
  if (!device_can_run(info, spec->op, spec->dtype, record->message, sizeof record->message)) {
    memset(p, 0, sizeof *p);
    record->result = OUTCOME_SKIP;
    return;
  }
  problem_build_options options = {GUARD_BYTES, true, NULL};
  tsr_status status = problem_build(p, spec, device, queue, seed, &options);
  if (status != TSR_OK) {
    record->result = OUTCOME_ERROR;
    snprintf(record->message, sizeof record->message, "setup: %s", p->error);
    return;
  }
  status = problem_reference(p);
  if (status == TSR_ERROR_UNSUPPORTED) {
    /* the reference takes the core's validation, which refuses what the
     * device cannot take (the serving forms on a device without them) */
    record->result = OUTCOME_SKIP;
    snprintf(record->message, sizeof record->message, "unsupported: %s", tsr_last_error());
    return;
  }
  if (status != TSR_OK) {
    record->result = OUTCOME_ERROR;
    snprintf(record->message, sizeof record->message, "fp64 reference failed: %s",
             tsr_status_name(status));
    return;
  }
  double start = now_seconds();
  status = problem_run(p, queue, NULL);
  if (status == TSR_ERROR_UNSUPPORTED) {
    record->result = OUTCOME_SKIP;
    snprintf(record->message, sizeof record->message, "unsupported: %s", tsr_last_error());
    return;
  }
  if (status != TSR_OK) {
    record->result = OUTCOME_ERROR;
    snprintf(record->message, sizeof record->message, "tsr_%s returned %s: %s",
             tsr_op_name(spec->op), tsr_status_name(status), tsr_last_error());
    return;
  }
  status = tsr_queue_finish(queue);
  record->seconds = now_seconds() - start;
  char fault_buf[128];
  const char *fault = problem_expected_fault(spec, fault_buf, sizeof fault_buf);
  if (fault) {
    /* the planted fault must be reported, and named; the outputs are then
     * verified as usual (the faulty sequence NaN, the others right) */
    if (status != TSR_ERROR_INVALID_VALUE || !strstr(tsr_last_error(), fault)) {
      record->result = OUTCOME_FAIL;
      snprintf(record->message, sizeof record->message,
               "tsr_queue_finish returned %s (%s) but the planted fault needs "
               "TSR_ERROR_INVALID_VALUE naming '%s'",
               tsr_status_name(status), status == TSR_OK ? "no error" : tsr_last_error(), fault);
      return;
    }
    status = TSR_OK;
  }
  if (status != TSR_OK) {
    record->result = OUTCOME_ERROR;
    snprintf(record->message, sizeof record->message, "tsr_queue_finish returned %s: %s",
             tsr_status_name(status), tsr_last_error());
    return;
  }
  verify_result verdict;
  status = problem_verify(p, queue, &verdict);
  if (status != TSR_OK) {
    record->result = OUTCOME_ERROR;
    snprintf(record->message, sizeof record->message, "reading results: %s", p->error);
    return;
  }
  record->error = verdict.error;
  record->bound = verdict.bound;
  if (!verdict.passed) {
    record->result = OUTCOME_FAIL;
    snprintf(record->message, sizeof record->message, "%s", verdict.message);
  }
}

typedef struct device_run {
  tsr_device *device;
  tsr_device_info info;
  tsr_queue *queue;
} device_run;

static void print_verbose(const case_record *r) {
  progress_clear();
  printf("%-5s %s %s %s #%d [%s]",
         r->result == OUTCOME_PASS    ? "PASS"
         : r->result == OUTCOME_FAIL  ? "FAIL"
         : r->result == OUTCOME_ERROR ? "ERROR"
                                      : "SKIP",
         r->device, tsr_op_name(r->op), tsr_dtype_name(r->dtype), r->case_index, r->description);
  if (r->result == OUTCOME_PASS)
    printf(" error %.3g (bound %.3g) %.2f ms", r->error, r->bound, r->seconds * 1e3);
  else
    printf(": %s", r->message);
  printf("\n");
  fflush(stdout);
}

/* ---- reports ---- */

typedef struct tally {
  int passed, failed, errors, skipped;
} tally;

static void count(tally *t, outcome o) {
  switch (o) {
  case OUTCOME_PASS:
    t->passed++;
    break;
  case OUTCOME_FAIL:
    t->failed++;
    break;
  case OUTCOME_ERROR:
    t->errors++;
    break;
  default:
    t->skipped++;
  }
}

/* Distinct device names in the order they first appear. */
static int collect_devices(const record_list *records, const char **names, int capacity) {
  int n = 0;
  for (size_t i = 0; i < records->count; i++) {
    int j = 0;
    while (j < n && strcmp(names[j], records->items[i].device) != 0)
      j++;
    if (j == n && n < capacity)
      names[n++] = records->items[i].device;
  }
  return n;
}

static void print_matrix(const record_list *records) {
  const char *devices[2 * MAX_SELECTED_DEVICES];
  int device_count = collect_devices(records, devices, 2 * MAX_SELECTED_DEVICES);
  int name_width = 8;
  for (int d = 0; d < device_count; d++)
    if ((int)strlen(devices[d]) > name_width)
      name_width = (int)strlen(devices[d]);
  bool used[TSR_OP_COUNT_] = {false};
  for (size_t i = 0; i < records->count; i++)
    used[records->items[i].op] = true;

  printf("\n%-*s", name_width, "device");
  for (int op = 0; op < TSR_OP_COUNT_; op++)
    if (used[op])
      printf("  %-13s", tsr_op_name((tsr_op)op));
  printf("\n");
  for (int d = 0; d < device_count; d++) {
    printf("%-*s", name_width, devices[d]);
    for (int op = 0; op < TSR_OP_COUNT_; op++) {
      if (!used[op])
        continue;
      tally t = {0, 0, 0, 0};
      for (size_t i = 0; i < records->count; i++)
        if (records->items[i].op == (tsr_op)op && strcmp(records->items[i].device, devices[d]) == 0)
          count(&t, records->items[i].result);
      int ran = t.passed + t.failed + t.errors;
      char cell[32];
      if (ran == 0)
        snprintf(cell, sizeof cell, "-");
      else if (t.failed + t.errors == 0)
        snprintf(cell, sizeof cell, "%d PASS", t.passed);
      else
        snprintf(cell, sizeof cell, "%d/%d FAIL", t.failed + t.errors, ran);
      printf("  %-13s", cell);
    }
    printf("\n");
  }
  printf("(cells: cases passed, or failed/run; '-': not supported or not run)\n");
}

static bool write_json(const char *path, const record_list *records, const check_options *options,
                       const device_selection *selection, const tally *total) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("cannot write %s", path);
    return false;
  }
  json_report_head(f, "tessera check");
  fprintf(f, "  \"seed\": %llu,\n  \"quick\": %s,\n", (unsigned long long)options->seed,
          options->quick ? "true" : "false");
  fprintf(f, "  \"devices\": [");
  for (uint32_t d = 0; d < selection->count; d++) {
    fprintf(f, "%s\n    {", d ? "," : "");
    json_device_members(f, &selection->infos[d]);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ],\n");
  fprintf(f, "  \"summary\": {\"passed\": %d, \"failed\": %d, \"errors\": %d, \"skipped\": %d},\n",
          total->passed, total->failed, total->errors, total->skipped);
  fprintf(f, "  \"results\": [");
  for (size_t i = 0; i < records->count; i++) {
    const case_record *r = &records->items[i];
    fprintf(f, "%s\n    {\"device\": ", i ? "," : "");
    json_string(f, r->device);
    fprintf(f, ", \"op\": \"%s\", \"dtype\": \"%s\", \"case\": %d, \"description\": ",
            tsr_op_name(r->op), tsr_dtype_name(r->dtype), r->case_index);
    json_string(f, r->description);
    fprintf(f, ", \"status\": \"%s\", \"error\": ", outcome_name(r->result));
    json_number(f, r->result == OUTCOME_SKIP ? NAN : r->error);
    fprintf(f, ", \"bound\": ");
    json_number(f, r->result == OUTCOME_SKIP ? NAN : r->bound);
    fprintf(f, ", \"seconds\": ");
    json_number(f, r->seconds);
    fprintf(f, ", \"message\": ");
    json_string(f, r->message);
    fprintf(f, ", \"reproduce\": ");
    json_string(f, r->reproduce);
    fprintf(f, "}");
  }
  fprintf(f, "\n  ]\n}\n");
  bool ok = ferror(f) == 0;
  ok = fclose(f) == 0 && ok;
  if (!ok)
    cli_error("writing %s failed", path);
  return ok;
}

static bool write_junit(const char *path, const record_list *records, const tally *total,
                        double seconds) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("cannot write %s", path);
    return false;
  }
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(f,
          "<testsuites name=\"tessera check\" tests=\"%zu\" failures=\"%d\" errors=\"%d\" "
          "skipped=\"%d\" time=\"%.3f\">\n",
          records->count, total->failed, total->errors, total->skipped, seconds);
  const char *devices[2 * MAX_SELECTED_DEVICES];
  int device_count = collect_devices(records, devices, 2 * MAX_SELECTED_DEVICES);
  for (int d = 0; d < device_count; d++) {
    tally t = {0, 0, 0, 0};
    double suite_seconds = 0.0;
    for (size_t i = 0; i < records->count; i++) {
      if (strcmp(records->items[i].device, devices[d]) == 0) {
        count(&t, records->items[i].result);
        suite_seconds += records->items[i].seconds;
      }
    }
    fprintf(f, "  <testsuite name=\"");
    xml_escape(f, devices[d]);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
            t.passed + t.failed + t.errors + t.skipped, t.failed, t.errors, t.skipped,
            suite_seconds);
    for (size_t i = 0; i < records->count; i++) {
      const case_record *r = &records->items[i];
      if (strcmp(r->device, devices[d]) != 0)
        continue;
      fprintf(f, "    <testcase classname=\"");
      xml_escape(f, r->device);
      fprintf(f, ".%s\" name=\"%s case %d: ", tsr_op_name(r->op), tsr_dtype_name(r->dtype),
              r->case_index);
      xml_escape(f, r->description);
      fprintf(f, "\" time=\"%.4f\"", r->seconds);
      if (r->result == OUTCOME_PASS) {
        fprintf(f, "/>\n");
        continue;
      }
      const char *tag = r->result == OUTCOME_FAIL    ? "failure"
                        : r->result == OUTCOME_ERROR ? "error"
                                                     : "skipped";
      fprintf(f, ">\n      <%s message=\"", tag);
      xml_escape(f, r->message);
      fprintf(f, "\">");
      if (r->result != OUTCOME_SKIP) {
        fprintf(f, "reproduce: ");
        xml_escape(f, r->reproduce);
      }
      fprintf(f, "</%s>\n    </testcase>\n", tag);
    }
    fprintf(f, "  </testsuite>\n");
  }
  fprintf(f, "</testsuites>\n");
  bool ok = ferror(f) == 0;
  ok = fclose(f) == 0 && ok;
  if (!ok)
    cli_error("writing %s failed", path);
  return ok;
}

/* ---- the command ---- */

static int parse_check_options(int argc, char **argv, check_options *o) {
  memset(o, 0, sizeof *o);
  o->op = TSR_OP_COUNT_;
  o->dtype = TSR_DTYPE_INVALID;
  o->case_index = -1;
  o->seed = DEFAULT_SEED;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    const char *value = NULL;
    if (arg_value(&c, "--device", &value)) {
      if (o->selector_count == MAX_SELECTED_DEVICES) {
        cli_error("check: too many --device options");
        return EXIT_USAGE;
      }
      o->selectors[o->selector_count++] = value;
    } else if (arg_flag(&c, "--all")) {
      o->all = true;
    } else if (arg_value(&c, "--op", &value)) {
      o->op = parse_op(value);
      if (o->op == TSR_OP_COUNT_)
        return EXIT_USAGE;
    } else if (arg_value(&c, "--dtype", &value)) {
      o->dtype = parse_float_dtype(value);
      if (o->dtype == TSR_DTYPE_INVALID)
        return EXIT_USAGE;
    } else if (arg_value(&c, "--case", &value)) {
      int64_t n = 0;
      if (!parse_int64(value, &n) || n > 100000) {
        cli_error("check: --case needs a case number, got '%s'", value);
        return EXIT_USAGE;
      }
      o->case_index = (int)n;
    } else if (arg_flag(&c, "--quick")) {
      o->quick = true;
    } else if (arg_value(&c, "--json", &value)) {
      o->json_path = value;
    } else if (arg_value(&c, "--junit", &value)) {
      o->junit_path = value;
    } else if (arg_value(&c, "--compare", &value)) {
      o->compare = value;
    } else if (arg_value(&c, "--seed", &value)) {
      int64_t n = 0;
      if (!parse_int64(value, &n)) {
        cli_error("check: --seed needs a non-negative integer, got '%s'", value);
        return EXIT_USAGE;
      }
      o->seed = (uint64_t)n;
    } else if (arg_flag(&c, "--verbose") || arg_flag(&c, "-v")) {
      o->verbose = true;
    } else if (arg_flag(&c, "--list")) {
      o->list = true;
    } else if (arg_value(&c, "--jobs", &value)) {
      int64_t n = 0;
      if (!parse_int64(value, &n) || n < 1 || n > MAX_SELECTED_DEVICES) {
        cli_error("check: --jobs needs a count of devices from 1 to %d, got '%s'",
                  MAX_SELECTED_DEVICES, value);
        return EXIT_USAGE;
      }
      o->jobs = (int)n;
    } else {
      return arg_unknown(&c, "check");
    }
  }
  if (c.failed)
    return EXIT_USAGE;
  if (o->list && (o->json_path != NULL || o->junit_path != NULL)) {
    cli_error("check: --list runs nothing, so it writes no --json or --junit report");
    return EXIT_USAGE;
  }
  if (o->case_index >= 0) {
    if (o->op == TSR_OP_COUNT_) {
      cli_error("check: --case needs --op (case numbers are per op)");
      return EXIT_USAGE;
    }
    int n = 0;
    check_cases(o->op, &n);
    if (o->case_index >= n) {
      cli_error("check: %s has cases 0 to %d, not %d", tsr_op_name(o->op), n - 1, o->case_index);
      return EXIT_USAGE;
    }
  }
  if (o->compare != NULL && (o->all || o->selector_count > 0)) {
    cli_error("check: --compare A,B names its two devices; leave out --device and --all");
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

/* The cases the options select, as (op, index) pairs in table order. */
typedef struct case_ref {
  tsr_op op;
  int index;
} case_ref;

static int select_cases(const check_options *o, case_ref *out, int capacity) {
  int n = 0;
  for (int op = 0; op < TSR_OP_COUNT_; op++) {
    if (o->op != TSR_OP_COUNT_ && o->op != (tsr_op)op)
      continue;
    int count = 0;
    const check_case *cases = check_cases((tsr_op)op, &count);
    for (int i = 0; i < count && n < capacity; i++) {
      if (o->case_index >= 0 && i != o->case_index)
        continue;
      if (o->case_index < 0 && o->quick && !cases[i].quick)
        continue;
      out[n].op = (tsr_op)op;
      out[n].index = i;
      n++;
    }
  }
  return n;
}

/* The options that choose cases, as given, for "no case matched". */
static void describe_filters(const check_options *o, filter_text *filters) {
  memset(filters, 0, sizeof *filters);
  for (int i = 0; i < o->selector_count; i++)
    filter_add(filters, "--device", o->selectors[i]);
  if (o->all)
    filter_add(filters, "--all", NULL);
  if (o->compare != NULL)
    filter_add(filters, "--compare", o->compare);
  if (o->op != TSR_OP_COUNT_)
    filter_add(filters, "--op", tsr_op_name(o->op));
  if (o->dtype != TSR_DTYPE_INVALID)
    filter_add(filters, "--dtype", tsr_dtype_name(o->dtype));
  if (o->case_index >= 0) {
    char number[16];
    snprintf(number, sizeof number, "%d", o->case_index);
    filter_add(filters, "--case", number);
  }
  if (o->quick)
    filter_add(filters, "--quick", NULL);
}

/* --list: per device and op, the selected cases the device can run and in
 * which dtypes (with --verbose one line per case). Returns how many
 * (case, dtype) runs that makes on all devices; *why gets the first reason
 * a device cannot run an op or dtype. */
static int list_cases(const device_run *runs, uint32_t device_count, const case_ref *refs,
                      int case_count, const tsr_dtype *dtypes, int dtype_count, bool verbose,
                      char *why, size_t why_capacity) {
  int total = 0;
  for (uint32_t d = 0; d < device_count; d++) {
    const tsr_device_info *info = &runs[d].info;
    printf("%s%s (%s)\n", d ? "\n" : "", info->selector, info->name);
    for (int op = 0; op < TSR_OP_COUNT_; op++) {
      char dtype_list[32] = "", indexes[2048] = "";
      int runnable = 0, cases = 0, selected = 0;
      for (int c = 0; c < case_count; c++)
        selected += refs[c].op == (tsr_op)op;
      for (int t = 0; t < dtype_count && selected > 0; t++) {
        char reason[160];
        if (!device_can_run(info, (tsr_op)op, dtypes[t], reason, sizeof reason)) {
          if (why[0] == '\0')
            snprintf(why, why_capacity, "%s", reason);
          continue;
        }
        size_t used = strlen(dtype_list);
        snprintf(dtype_list + used, sizeof dtype_list - used, "%s%s", runnable ? "," : "",
                 tsr_dtype_name(dtypes[t]));
        runnable++;
      }
      for (int c = 0; c < case_count && runnable > 0; c++) {
        if (refs[c].op != (tsr_op)op)
          continue;
        cases++;
        size_t used = strlen(indexes);
        snprintf(indexes + used, sizeof indexes - used, " %d", refs[c].index);
        if (verbose) {
          int n = 0;
          char description[192];
          problem_describe(&check_cases(refs[c].op, &n)[refs[c].index].spec, description,
                           sizeof description);
          printf("  %-13s #%-3d %-12s [%s]\n", tsr_op_name((tsr_op)op), refs[c].index, dtype_list,
                 description);
        }
      }
      if (cases == 0)
        continue;
      total += cases * runnable;
      if (!verbose)
        printf("  %-13s %3d case%s x %-12s:%s\n", tsr_op_name((tsr_op)op), cases,
               cases == 1 ? " " : "s", dtype_list, indexes);
    }
  }
  return total;
}

static void fill_record_identity(case_record *r, const char *device, const problem_spec *spec,
                                 int index) {
  snprintf(r->device, sizeof r->device, "%s", device);
  r->op = spec->op;
  r->dtype = spec->dtype;
  r->case_index = index;
  problem_describe(spec, r->description, sizeof r->description);
}

/* ---- running the cases ---- */

/* What the jobs share: the progress line, and stdout for --verbose. */
typedef struct check_shared {
  pthread_mutex_t lock;
  int step, total_steps;
} check_shared;

typedef struct check_job {
  const check_options *options;
  device_run *runs; /* the job's device, or the compared pair */
  bool comparing;
  const case_ref *refs;
  int case_count;
  const tsr_dtype *dtypes;
  int dtype_count;
  check_shared *shared;
  record_list records;
  bool out_of_memory;
} check_job;

static void job_progress(check_job *job, const problem_spec *spec, int index) {
  check_shared *shared = job->shared;
  pthread_mutex_lock(&shared->lock);
  shared->step++;
  progress_update("check %s: %d/%d %s %s case %d",
                  job->comparing ? job->options->compare : job->runs[0].info.selector, shared->step,
                  shared->total_steps, tsr_op_name(spec->op), tsr_dtype_name(spec->dtype), index);
  pthread_mutex_unlock(&shared->lock);
}

static void job_print(check_job *job, const case_record *r) {
  if (!job->options->verbose)
    return;
  pthread_mutex_lock(&job->shared->lock);
  print_verbose(r);
  pthread_mutex_unlock(&job->shared->lock);
}

/* Every selected case and dtype on the job's device (or pair, compared). */
static void run_job(check_job *job) {
  const check_options *options = job->options;
  record_list *records = &job->records;
  for (int c = 0; c < job->case_count && !job->out_of_memory; c++) {
    int n = 0;
    const case_ref *ref = &job->refs[c];
    const check_case *table = check_cases(ref->op, &n);
    for (int t = 0; t < job->dtype_count; t++) {
      problem_spec spec = table[ref->index].spec;
      spec.dtype = job->dtypes[t];
      uint64_t seed = case_seed(options->seed, spec.op, ref->index, spec.dtype);
      job_progress(job, &spec, ref->index);
      int sides = job->comparing ? 2 : 1;
      problem problems[2];
      memset(problems, 0, sizeof problems);
      for (int s = 0; s < sides; s++) {
        device_run *run = &job->runs[s];
        case_record *r = new_record(records);
        if (r == NULL) {
          job->out_of_memory = true;
          break;
        }
        fill_record_identity(r, run->info.selector, &spec, ref->index);
        format_reproduce(r->reproduce, sizeof r->reproduce, options, run->info.selector, spec.op,
                         spec.dtype, ref->index, false);
        execute_case(run->device, &run->info, run->queue, &spec, seed, &problems[s], r);
        job_print(job, r);
      }
      if (job->comparing && !job->out_of_memory) {
        case_record *r = new_record(records);
        if (r == NULL) {
          job->out_of_memory = true;
        } else {
          /* new_record may have moved the array: find the sides again. */
          const case_record *side0 = &records->items[records->count - 3];
          const case_record *side1 = &records->items[records->count - 2];
          char pair_name[128];
          snprintf(pair_name, sizeof pair_name, "%s~%s", job->runs[0].info.selector,
                   job->runs[1].info.selector);
          fill_record_identity(r, pair_name, &spec, ref->index);
          format_reproduce(r->reproduce, sizeof r->reproduce, options, options->compare, spec.op,
                           spec.dtype, ref->index, true);
          if (side0->result == OUTCOME_PASS && side1->result == OUTCOME_PASS) {
            verify_result verdict;
            problem_compare(&problems[0], &problems[1], &verdict);
            r->result = verdict.passed ? OUTCOME_PASS : OUTCOME_FAIL;
            r->error = verdict.error;
            r->bound = verdict.bound;
            snprintf(r->message, sizeof r->message, "%s", verdict.message);
          } else {
            r->result = OUTCOME_SKIP;
            snprintf(r->message, sizeof r->message,
                     "not compared: a device did not pass this case on its own");
          }
          job_print(job, r);
        }
      }
      for (int s = 0; s < sides; s++)
        problem_destroy(&problems[s]);
      if (job->out_of_memory)
        break;
    }
  }
}

typedef struct job_pool {
  check_job *jobs;
  int count;
  atomic_int next;
} job_pool;

static void *pool_worker(void *arg) {
  job_pool *pool = arg;
  for (int j; (j = atomic_fetch_add(&pool->next, 1)) < pool->count;)
    run_job(&pool->jobs[j]);
  return NULL;
}

/* The jobs on up to `width` threads; on this one when width is 1 or a
 * thread cannot start. */
static void run_jobs(check_job *jobs, int count, int width) {
  job_pool pool = {jobs, count, 0};
  pthread_t threads[MAX_SELECTED_DEVICES];
  int started = 0;
  if (width > count)
    width = count;
  while (width > 1 && started < width - 1 &&
         pthread_create(&threads[started], NULL, pool_worker, &pool) == 0)
    started++;
  pool_worker(&pool);
  for (int t = 0; t < started; t++)
    pthread_join(threads[t], NULL);
}

int cmd_check(int argc, char **argv) {
  check_options o;
  int rc = parse_check_options(argc, argv, &o);
  if (rc != EXIT_OK)
    return rc;

  tsr_context *context = open_context();
  if (context == NULL)
    return EXIT_FAILED;

  device_selection selection;
  if (o.compare != NULL) {
    char pair[256];
    snprintf(pair, sizeof pair, "%s", o.compare);
    char *comma = strchr(pair, ',');
    if (comma == NULL || comma == pair || comma[1] == '\0' || strchr(comma + 1, ',') != NULL) {
      cli_error("check: --compare needs two devices as A,B (e.g. cpu:0,cuda:0)");
      tsr_context_destroy(context);
      return EXIT_USAGE;
    }
    *comma = '\0';
    const char *pair_selectors[2] = {pair, comma + 1};
    rc = select_devices(context, pair_selectors, 2, false, &selection);
    if (rc == EXIT_OK && selection.count != 2) {
      cli_error("check: --compare names the same device twice (%s)", selection.infos[0].selector);
      rc = EXIT_USAGE;
    }
  } else {
    rc = select_devices(context, o.selectors, o.selector_count, o.all, &selection);
  }
  filter_text filters;
  describe_filters(&o, &filters);
  if (rc != EXIT_OK) {
    report_no_case("check", &filters, NULL);
    tsr_context_destroy(context);
    return rc;
  }

  device_run runs[MAX_SELECTED_DEVICES];
  for (uint32_t d = 0; d < selection.count; d++) {
    runs[d].device = selection.devices[d];
    runs[d].info = selection.infos[d];
    tsr_status status = tsr_queue_create(runs[d].device, &runs[d].queue);
    if (status != TSR_OK) {
      cli_api_error("tsr_queue_create", status);
      for (uint32_t e = 0; e < d; e++)
        tsr_queue_destroy(runs[e].queue);
      tsr_context_destroy(context);
      return EXIT_FAILED;
    }
  }

  case_ref refs[1024];
  int case_count = select_cases(&o, refs, 1024);
  int dtype_count = o.dtype == TSR_DTYPE_INVALID ? 3 : 1;
  const tsr_dtype *dtypes = o.dtype == TSR_DTYPE_INVALID ? cli_float_dtypes : &o.dtype;
  bool comparing = o.compare != NULL;
  if (o.list) {
    char why[192] = "";
    int listed = list_cases(runs, selection.count, refs, case_count, dtypes, dtype_count, o.verbose,
                            why, sizeof why);
    if (listed > 0)
      printf("\ncheck --list: %d case runs on %u device%s (nothing run)\n", listed, selection.count,
             selection.count == 1 ? "" : "s");
    else
      report_no_case("check", &filters, why);
    for (uint32_t d = 0; d < selection.count; d++)
      tsr_queue_destroy(runs[d].queue);
    tsr_context_destroy(context);
    return listed > 0 ? EXIT_OK : EXIT_FAILED;
  }
  /* One job per device (or one for the compared pair), run side by side:
   * the devices are independent, and each keeps its own queue and records. */
  int job_count = comparing ? 1 : (int)selection.count;
  check_job jobs[MAX_SELECTED_DEVICES];
  check_shared shared;
  memset(&shared, 0, sizeof shared);
  pthread_mutex_init(&shared.lock, NULL);
  shared.total_steps = job_count * case_count * dtype_count;
  for (int j = 0; j < job_count; j++) {
    check_job *job = &jobs[j];
    memset(job, 0, sizeof *job);
    job->options = &o;
    job->runs = comparing ? runs : &runs[j];
    job->comparing = comparing;
    job->refs = refs;
    job->case_count = case_count;
    job->dtypes = dtypes;
    job->dtype_count = dtype_count;
    job->shared = &shared;
  }
  double started = now_seconds();
  run_jobs(jobs, job_count, o.jobs > 0 ? o.jobs : job_count);
  record_list records = {NULL, 0, 0};
  bool out_of_memory = false;
  for (int j = 0; j < job_count; j++) {
    out_of_memory = out_of_memory || jobs[j].out_of_memory;
    for (size_t i = 0; i < jobs[j].records.count && !out_of_memory; i++) {
      case_record *r = new_record(&records);
      if (r == NULL)
        out_of_memory = true;
      else
        *r = jobs[j].records.items[i];
    }
    free(jobs[j].records.items);
  }
  pthread_mutex_destroy(&shared.lock);
  progress_clear();
  double seconds = now_seconds() - started;

  tally total = {0, 0, 0, 0};
  for (size_t i = 0; i < records.count; i++)
    count(&total, records.items[i].result);

  print_matrix(&records);
  bool any_failure = total.failed + total.errors > 0;
  if (any_failure) {
    printf("\nfailures:\n");
    for (size_t i = 0; i < records.count; i++) {
      const case_record *r = &records.items[i];
      if (r->result != OUTCOME_FAIL && r->result != OUTCOME_ERROR)
        continue;
      printf("%s %s %s %s case %d [%s]: %s | reproduce: %s\n",
             r->result == OUTCOME_FAIL ? "FAIL" : "ERROR", r->device, tsr_op_name(r->op),
             tsr_dtype_name(r->dtype), r->case_index, r->description, r->message, r->reproduce);
    }
  }
  printf("\ncheck: %d passed, %d failed, %d errors, %d skipped in %.1f s (seed %llu%s)\n",
         total.passed, total.failed, total.errors, total.skipped, seconds,
         (unsigned long long)o.seed, o.quick ? ", quick" : "");
  /* Nothing verified is not a pass: say which filters left nothing and why
   * the first case was skipped. */
  bool none_ran = total.passed + total.failed + total.errors == 0;
  if (none_ran) {
    const char *why = NULL;
    for (size_t i = 0; i < records.count && why == NULL; i++)
      if (records.items[i].result == OUTCOME_SKIP)
        why = records.items[i].message;
    report_no_case("check", &filters, why);
  }
  if (out_of_memory)
    cli_error("check: out of host memory for results; stopped early");

  bool reports_ok = true;
  if (o.json_path != NULL)
    reports_ok = write_json(o.json_path, &records, &o, &selection, &total) && reports_ok;
  if (o.junit_path != NULL)
    reports_ok = write_junit(o.junit_path, &records, &total, seconds) && reports_ok;

  free(records.items);
  for (uint32_t d = 0; d < selection.count; d++)
    tsr_queue_destroy(runs[d].queue);
  tsr_context_destroy(context);
  return any_failure || none_ran || !reports_ok || out_of_memory ? EXIT_FAILED : EXIT_OK;
}
