/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the API test programs (see api_test.h). */
#include "api_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks_run;
static int checks_failed;

static const char *last_error_or_empty(void) {
  const char *message = tsr_last_error();
  return message ? message : "(null)";
}

bool api_check(bool passed, const char *file, int line, const char *expression) {
  checks_run++;
  if (!passed) {
    checks_failed++;
    fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, expression);
  }
  return passed;
}

bool api_check_status(tsr_status got, tsr_status want, const char *file, int line,
                      const char *expression) {
  checks_run++;
  if (got == want)
    return true;
  checks_failed++;
  fprintf(stderr, "%s:%d: FAILED: %s returned %s, expected %s (last error: \"%s\")\n", file, line,
          expression, tsr_status_name(got), tsr_status_name(want), last_error_or_empty());
  return false;
}

bool api_check_int(long long got, long long want, const char *file, int line,
                   const char *expression) {
  checks_run++;
  if (got == want)
    return true;
  checks_failed++;
  fprintf(stderr, "%s:%d: FAILED: %s = %lld, expected %lld\n", file, line, expression, got, want);
  return false;
}

bool api_check_str(const char *got, const char *want, const char *file, int line,
                   const char *expression) {
  checks_run++;
  if (got != NULL && want != NULL && strcmp(got, want) == 0)
    return true;
  checks_failed++;
  fprintf(stderr, "%s:%d: FAILED: %s = \"%s\", expected \"%s\"\n", file, line, expression,
          got ? got : "(null)", want ? want : "(null)");
  return false;
}

bool api_check_error(const char *call, const char *needle, const char *file, int line) {
  checks_run++;
  const char *message = last_error_or_empty();
  size_t call_length = strlen(call);
  bool prefixed = strncmp(message, call, call_length) == 0 && message[call_length] == ':' &&
                  message[call_length + 1] == ' ';
  bool mentions = needle == NULL || strstr(message + (prefixed ? call_length + 2 : 0), needle);
  if (prefixed && mentions)
    return true;
  checks_failed++;
  fprintf(stderr,
          "%s:%d: FAILED: last error \"%s\" should start with \"%s: \" and mention \"%s\"\n", file,
          line, message, call, needle ? needle : "");
  return false;
}

void api_require(bool passed, const char *file, int line, const char *expression) {
  if (passed)
    return;
  fprintf(stderr, "%s:%d: SETUP FAILED: %s (last error: \"%s\")\n", file, line, expression,
          last_error_or_empty());
  exit(1);
}

int api_finish(const char *program) {
  printf("%s: %d checks, %d failed\n", program, checks_run, checks_failed);
  return checks_failed == 0 && checks_run > 0 ? 0 : 1;
}

tsr_context *api_context(void) {
  tsr_context *context = NULL;
  REQUIRE_OK(tsr_context_create(NULL, &context));
  REQUIRE(context != NULL);
  return context;
}

tsr_device *api_cpu_device(tsr_context *context) {
  tsr_device *device = NULL;
  REQUIRE_OK(tsr_device_open(context, "cpu", &device));
  REQUIRE(device != NULL);
  return device;
}

void api_fill_pattern(tsr_queue *queue, tsr_buffer *buffer, size_t bytes, unsigned seed) {
  unsigned char *pattern = malloc(bytes);
  REQUIRE(pattern != NULL);
  for (size_t i = 0; i < bytes; i++)
    pattern[i] = (unsigned char)((i * 131u + seed * 29u + 7u) >> 1);
  REQUIRE_OK(tsr_buffer_write(queue, buffer, 0, pattern, bytes));
  free(pattern);
}

void api_fixture_open(api_fixture *f) {
  memset(f, 0, sizeof *f);
  f->context = api_context();
  f->device = api_cpu_device(f->context);
  REQUIRE_OK(tsr_queue_create(f->device, &f->queue));
  for (int i = 0; i < API_BUFFERS; i++) {
    REQUIRE_OK(tsr_buffer_create(f->device, API_BUFFER_BYTES, &f->buffers[i]));
    /* Finite small floats everywhere, so a good run computes real numbers. */
    float *values = malloc(API_BUFFER_BYTES);
    REQUIRE(values != NULL);
    for (size_t j = 0; j < API_BUFFER_BYTES / sizeof(float); j++)
      values[j] = (float)((int)((j * 37u + (unsigned)i * 11u) % 17u) - 8) / 8.0f;
    REQUIRE_OK(tsr_buffer_write(f->queue, f->buffers[i], 0, values, API_BUFFER_BYTES));
    free(values);
    f->snapshots[i] = malloc(API_BUFFER_BYTES);
    REQUIRE(f->snapshots[i] != NULL);
  }
  f->other_context = api_context();
  tsr_device *other = api_cpu_device(f->other_context);
  REQUIRE(other != f->device);
  REQUIRE_OK(tsr_buffer_create(other, API_BUFFER_BYTES, &f->foreign));
}

void api_fixture_close(api_fixture *f) {
  for (int i = 0; i < API_BUFFERS; i++) {
    tsr_buffer_destroy(f->buffers[i]);
    free(f->snapshots[i]);
  }
  tsr_queue_destroy(f->queue);
  tsr_context_destroy(f->context);
  tsr_buffer_destroy(f->foreign);
  tsr_context_destroy(f->other_context);
  memset(f, 0, sizeof *f);
}

tsr_status api_call_op(tsr_queue *queue, tsr_op op, const void *desc) {
  switch (op) {
  case TSR_OP_GEMM:
    return tsr_gemm(queue, desc);
  case TSR_OP_GROUPED_GEMM:
    return tsr_grouped_gemm(queue, desc);
  case TSR_OP_ATTENTION:
    return tsr_attention(queue, desc);
  case TSR_OP_RMSNORM:
    return tsr_rmsnorm(queue, desc);
  case TSR_OP_LAYERNORM:
    return tsr_layernorm(queue, desc);
  case TSR_OP_SOFTMAX:
    return tsr_softmax(queue, desc);
  case TSR_OP_ROPE:
    return tsr_rope(queue, desc);
  case TSR_OP_SWIGLU:
    return tsr_swiglu(queue, desc);
  case TSR_OP_GELU:
    return tsr_gelu(queue, desc);
  case TSR_OP_CROSS_ENTROPY:
    return tsr_cross_entropy(queue, desc);
  case TSR_OP_KV_APPEND:
    return tsr_kv_append(queue, desc);
  case TSR_OP_COUNT_:
    break;
  }
  return tsr_op_run(queue, op, desc);
}

static void snapshot_buffers(api_fixture *f) {
  REQUIRE_OK(tsr_queue_finish(f->queue));
  for (int i = 0; i < API_BUFFERS; i++)
    REQUIRE_OK(tsr_buffer_read(f->queue, f->buffers[i], 0, f->snapshots[i], API_BUFFER_BYTES));
}

/* Reports the first changed byte of each buffer that differs from its snapshot. */
static void check_buffers_unchanged(const api_fixture *f, const char *op_name, const char *what) {
  static unsigned char now[API_BUFFER_BYTES];
  CHECK_STATUS(tsr_queue_finish(f->queue), TSR_OK);
  for (int i = 0; i < API_BUFFERS; i++) {
    REQUIRE_OK(tsr_buffer_read(f->queue, f->buffers[i], 0, now, API_BUFFER_BYTES));
    size_t first = API_BUFFER_BYTES;
    for (size_t j = 0; j < API_BUFFER_BYTES; j++) {
      if (now[j] != f->snapshots[i][j]) {
        first = j;
        break;
      }
    }
    char label[256];
    snprintf(label, sizeof label, "%s [%s]: buffer %d unchanged (first changed byte %zu)", op_name,
             what, i, first);
    api_check(first == API_BUFFER_BYTES, __FILE__, __LINE__, label);
  }
}

void api_run_cases(api_fixture *f, tsr_op op, const void *good, size_t desc_size,
                   const api_case *cases, size_t count) {
  _Alignas(max_align_t) unsigned char copy[2048];
  REQUIRE(desc_size <= sizeof copy);
  const char *op_name = tsr_op_name(op);
  REQUIRE(op_name != NULL);
  char call[64];
  snprintf(call, sizeof call, "tsr_%s", op_name);

  char label[320];
  snprintf(label, sizeof label, "%s(good descriptor)", call);
  api_check_status(api_call_op(f->queue, op, good), TSR_OK, __FILE__, __LINE__, label);
  snprintf(label, sizeof label, "tsr_queue_finish after %s(good descriptor)", call);
  api_check_status(tsr_queue_finish(f->queue), TSR_OK, __FILE__, __LINE__, label);
  snapshot_buffers(f);

  for (size_t i = 0; i < count; i++) {
    const api_case *c = &cases[i];
    memcpy(copy, good, desc_size);
    const void *desc = NULL;
    if (c->edit != NULL) {
      c->edit(f, copy);
      desc = copy;
    }
    snprintf(label, sizeof label, "%s [%s]", call, c->what);
    if (api_check_status(api_call_op(f->queue, op, desc), c->status, __FILE__, __LINE__, label)) {
      if (!api_check_error(call, c->mention, __FILE__, __LINE__))
        fprintf(stderr, "  (case: %s)\n", label);
    }
    check_buffers_unchanged(f, call, c->what);

    /* tsr_op_explain validates the descriptor the same way. */
    tsr_choice choice;
    memset(&choice, 0, sizeof choice);
    choice.struct_size = sizeof choice;
    snprintf(label, sizeof label, "tsr_op_explain(%s) [%s]", op_name, c->what);
    if (api_check_status(tsr_op_explain(f->device, op, desc, &choice), c->status, __FILE__,
                         __LINE__, label)) {
      if (!api_check_error("tsr_op_explain", c->mention, __FILE__, __LINE__))
        fprintf(stderr, "  (case: %s)\n", label);
    }
  }
}

tsr_tensor api_tensor(tsr_buffer *buffer, size_t offset, tsr_dtype dtype, int32_t rank, int64_t e0,
                      int64_t e1, int64_t e2, int64_t e3) {
  /* Built by hand rather than with tsr_tensor_make, which test_context checks. */
  const int64_t extents[TSR_MAX_RANK] = {e0, e1, e2, e3};
  tsr_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer = buffer;
  t.offset = offset;
  t.dtype = dtype;
  t.rank = rank;
  int64_t stride = 1;
  for (int32_t i = rank - 1; i >= 0; i--) {
    t.shape[i] = extents[i];
    t.strides[i] = stride;
    stride *= extents[i];
  }
  return t;
}
