/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the loader test cases: see loader_faults.c for how a case runs. */
#ifndef TESSERA_TESTS_LOADER_TEST_H
#define TESSERA_TESTS_LOADER_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tessera/tessera.h>

#ifndef LOADER_TEST_CPU_MANIFEST
#error "the build passes the fixture paths (see tests/loader/CMakeLists.txt)"
#endif

extern int loader_failures;

#define CHECK(condition, ...)                                                                      \
  do {                                                                                             \
    if (!(condition)) {                                                                            \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      loader_failures++;                                                                           \
    }                                                                                              \
  } while (0)

typedef struct loader_case {
  const char *name;
  void (*run)(void);
} loader_case;

/* The cases of loader_hardening.c. */
extern const loader_case loader_hardening_cases[];
extern const size_t loader_hardening_case_count;
/* The cases of loader_rules.c. */
extern const loader_case loader_rules_cases[];
extern const size_t loader_rules_case_count;
/* The cases of loader_names.c. */
extern const loader_case loader_names_cases[];
extern const size_t loader_names_case_count;

/* ---- files and directories of a case (under case_root) ---- */

extern char case_root[512];
void path_in_case(char *out, size_t capacity, const char *relative);
void make_case_root(void);
void remove_case_root(void);
void make_dir(const char *relative);
void write_bytes(const char *relative, const void *bytes, size_t count);
void write_text(const char *relative, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void read_file(const char *path, char *out, size_t capacity);
void add_cpu_manifest(const char *dir);
void write_manifest(const char *dir, const char *name, const char *library, const char *arch);
void make_plugins_dir(const char *dir);

/* ---- environment ---- */

void isolate_environment(const char *plugin_path);
void search_dirs(const char *first, const char *second);
bool marker_written(void);

/* ---- context, reports and devices ---- */

const char *state_name(tsr_plugin_state state);
tsr_context *open_context(const tsr_context_options *options);
bool find_report(tsr_context *context, const char *name, const char *manifest_part,
                 tsr_plugin_report *out);
void expect_report(tsr_context *context, const char *name, tsr_plugin_state state, ...);
uint32_t devices_of(tsr_context *context, const char *backend);
void expect_cpu_device(tsr_context *context);
void run_single_broken(const char *name, ...);

/* ---- stderr of the library ---- */

/* Sends stderr to <case_root>/<name> until capture_stderr_end, which returns
 * what was written (a static buffer, valid until the next capture). */
void capture_stderr_begin(const char *name);
const char *capture_stderr_end(void);
/* Sends both stdout and stderr to files in the case root until
 * capture_output_end, which copies what each received into `out` and `err`
 * (and prints them afterwards). */
void capture_output_begin(void);
void capture_output_end(char *out, size_t out_capacity, char *err, size_t err_capacity);
/* Occurrences of `needle` in `text`. */
int count_occurrences(const char *text, const char *needle);

#endif /* TESSERA_TESTS_LOADER_TEST_H */
