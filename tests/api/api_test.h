/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared helpers of the API test programs: checks that print file:line and
 * the values on failure, a fixture (context, CPU device, queue, buffers, a
 * buffer of another device) and a table runner for op validation cases.
 */
#ifndef TESSERA_API_TEST_H
#define TESSERA_API_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

/* ---- checks ---- */

/* Each returns whether it passed; a failure is printed and counted. */
bool api_check(bool passed, const char *file, int line, const char *expression);
bool api_check_status(tsr_status got, tsr_status want, const char *file, int line,
                      const char *expression);
bool api_check_int(long long got, long long want, const char *file, int line,
                   const char *expression);
bool api_check_str(const char *got, const char *want, const char *file, int line,
                   const char *expression);
/* tsr_last_error() starts with "<call>: " and contains `needle`. */
bool api_check_error(const char *call, const char *needle, const char *file, int line);

#define CHECK(cond) api_check((cond), __FILE__, __LINE__, #cond)
#define CHECK_STATUS(expr, want) api_check_status((expr), (want), __FILE__, __LINE__, #expr)
#define CHECK_INT(got, want)                                                                       \
  api_check_int((long long)(got), (long long)(want), __FILE__, __LINE__, #got)
#define CHECK_STR(got, want) api_check_str((got), (want), __FILE__, __LINE__, #got)
#define CHECK_ERROR(call, needle) api_check_error((call), (needle), __FILE__, __LINE__)

/* Stops the program (exit 1) when setup fails: later checks would mean nothing. */
void api_require(bool passed, const char *file, int line, const char *expression);
#define REQUIRE(cond) api_require((cond), __FILE__, __LINE__, #cond)
#define REQUIRE_OK(expr) api_require((expr) == TSR_OK, __FILE__, __LINE__, #expr " == TSR_OK")

/* Prints the tally; the program's exit status (0 only when nothing failed). */
int api_finish(const char *program);

/* ---- setup ---- */

tsr_context *api_context(void);
tsr_device *api_cpu_device(tsr_context *context);
/* Writes a byte pattern derived from `seed` over the whole buffer. */
void api_fill_pattern(tsr_queue *queue, tsr_buffer *buffer, size_t bytes, unsigned seed);

/* ---- validation fixture ---- */

#define API_BUFFERS 6
#define API_BUFFER_BYTES ((size_t)16384)

typedef struct api_fixture {
  tsr_context *context;
  tsr_device *device;
  tsr_queue *queue;
  tsr_buffer *buffers[API_BUFFERS];
  /* A second context's CPU device: its buffers belong to another device. */
  tsr_context *other_context;
  tsr_buffer *foreign;
  unsigned char *snapshots[API_BUFFERS];
} api_fixture;

void api_fixture_open(api_fixture *f);
void api_fixture_close(api_fixture *f);

/* One bad input: `edit` changes a copy of the op's good descriptor; the call
 * must fail with `status`, tsr_last_error() must start with the op's call name
 * and contain `mention`, and no buffer may change. A NULL `edit` passes a NULL
 * descriptor. */
typedef struct api_case {
  const char *what;
  tsr_status status;
  const char *mention;
  void (*edit)(const api_fixture *f, void *desc);
} api_case;

/* Defines an edit function `name` for descriptors of `desc_type`: the body
 * sees `f` (the fixture) and `d` (the descriptor copy). */
#define API_EDIT(desc_type, name)                                                                  \
  static void name##_body(__attribute__((unused)) const api_fixture *f, desc_type *d);             \
  static void name(const api_fixture *f, void *desc) {                                             \
    name##_body(f, desc);                                                                          \
  }                                                                                                \
  static void name##_body(__attribute__((unused)) const api_fixture *f, desc_type *d)

/* Calls the op's own entry point (tsr_gemm, tsr_attention, ...). */
tsr_status api_call_op(tsr_queue *queue, tsr_op op, const void *desc);

/* Runs `good` (it must succeed), snapshots every fixture buffer, then runs
 * each case through the op's entry point and through tsr_op_explain, checking
 * status, message and that the buffers are unchanged. */
void api_run_cases(api_fixture *f, tsr_op op, const void *good, size_t desc_size,
                   const api_case *cases, size_t count);

#define API_COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* A row-major tensor view of `rank` extents. */
tsr_tensor api_tensor(tsr_buffer *buffer, size_t offset, tsr_dtype dtype, int32_t rank, int64_t e0,
                      int64_t e1, int64_t e2, int64_t e3);

#endif /* TESSERA_API_TEST_H */
