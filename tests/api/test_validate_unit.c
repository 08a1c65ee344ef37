/* SPDX-License-Identifier: Apache-2.0 */
/* core/validate.c on its own: what a plugin receives after validation
 * (normalised ranks, broadcast batch strides, resolved defaults, converted
 * tensors). Built from the source file with hand-made devices and buffers, so
 * no plugin is involved. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api_test.h"
#include "internal.h"

/* validate.c reports through tsr__fail, which libtessera keeps internal. */
static char failure[1024];

tsr_status tsr__fail(tsr_status status, const char *call, const char *fmt, ...) {
  int n = snprintf(failure, sizeof failure, "%s: ", call);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(failure + n, sizeof failure - (size_t)n, fmt, ap);
  va_end(ap);
  return status;
}

static struct tsr_device device;
static struct tsr_buffer buffers[4];
static char handles[4]; /* the plugin handles are their addresses */

static void setup(void) {
  memset(&device, 0, sizeof device);
  snprintf(device.info.selector, sizeof device.info.selector, "cpu:0");
  for (int i = 0; i < 4; i++) {
    memset(&buffers[i], 0, sizeof buffers[i]);
    buffers[i].device = &device;
    buffers[i].handle = &handles[i];
    buffers[i].size = 1 << 16;
    buffers[i].state = TSR__BUFFER_LIVE; /* validation refuses destroyed buffers */
  }
}

static bool all_zero(const void *data, size_t bytes) {
  const unsigned char *p = data;
  for (size_t i = 0; i < bytes; i++)
    if (p[i])
      return false;
  return true;
}

/* Checks one converted tensor against the expected rank, extents and strides. */
static void check_tensor(const char *label, const tsr_plugin_tensor *got, void *handle,
                         uint64_t offset, int32_t dtype, int32_t rank, const int64_t *shape,
                         const int64_t *strides) {
  char what[160];
  snprintf(what, sizeof what, "%s: buffer is the plugin handle", label);
  api_check(got->buffer == handle, __FILE__, __LINE__, what);
  snprintf(what, sizeof what, "%s: offset", label);
  api_check_int((long long)got->offset, (long long)offset, __FILE__, __LINE__, what);
  snprintf(what, sizeof what, "%s: dtype", label);
  api_check_int(got->dtype, dtype, __FILE__, __LINE__, what);
  snprintf(what, sizeof what, "%s: rank", label);
  api_check_int(got->rank, rank, __FILE__, __LINE__, what);
  for (int32_t d = 0; d < rank; d++) {
    snprintf(what, sizeof what, "%s: shape[%d]", label, d);
    api_check_int(got->shape[d], shape[d], __FILE__, __LINE__, what);
    snprintf(what, sizeof what, "%s: strides[%d]", label, d);
    api_check_int(got->strides[d], strides[d], __FILE__, __LINE__, what);
  }
  for (int32_t d = rank; d < TSR_MAX_RANK; d++) {
    snprintf(what, sizeof what, "%s: unused dimension %d is zero", label, d);
    api_check(got->shape[d] == 0 && got->strides[d] == 0, __FILE__, __LINE__, what);
  }
}

static void test_gemm_rank2(void) {
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = api_tensor(&buffers[0], 64, TSR_DTYPE_BF16, 2, 4, 8, 0, 0);
  desc.b = tsr_tensor_transpose(api_tensor(&buffers[1], 0, TSR_DTYPE_BF16, 2, 5, 8, 0, 0), 0, 1);
  desc.bias = api_tensor(&buffers[2], 0, TSR_DTYPE_F32, 1, 5, 0, 0, 0);
  desc.d = api_tensor(&buffers[3], 128, TSR_DTYPE_F32, 2, 4, 5, 0, 0);
  desc.alpha = 0.5f;
  desc.beta = 0.7f; /* ignored without c */
  desc.activation = TSR_ACT_GELU_ERF;
  desc.variant = "some-variant";
  tsr__op_args out;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_GEMM, &desc, "tsr_gemm", &out), TSR_OK);
  CHECK_INT(out.op, TSR_OP_GEMM);
  CHECK(out.variant == desc.variant);
  const tsr_gemm_args *g = &out.u.gemm;
  CHECK(tsr__op_args_pointer(&out) == g);
  CHECK_INT(g->struct_size, sizeof(tsr_gemm_args));
  check_tensor("gemm a", &g->a, &handles[0], 64, TSR_DTYPE_BF16, 3, (int64_t[]){1, 4, 8},
               (int64_t[]){0, 8, 1});
  check_tensor("gemm b (transposed)", &g->b, &handles[1], 0, TSR_DTYPE_BF16, 3,
               (int64_t[]){1, 8, 5}, (int64_t[]){0, 1, 8});
  check_tensor("gemm bias", &g->bias, &handles[2], 0, TSR_DTYPE_F32, 1, (int64_t[]){5},
               (int64_t[]){1});
  check_tensor("gemm d", &g->d, &handles[3], 128, TSR_DTYPE_F32, 3, (int64_t[]){1, 4, 5},
               (int64_t[]){0, 5, 1});
  CHECK(all_zero(&g->c, sizeof g->c));
  CHECK(g->alpha == 0.5f);
  CHECK(g->beta == 0.0f);
  CHECK_INT(g->activation, TSR_ACT_GELU_ERF);
  CHECK_INT(g->compute, TSR_COMPUTE_STRICT);
}

static void test_gemm_batched(void) {
  /* d [3, 4, 5]; a [4, 8] shared; b [1, 8, 5] with a non-zero batch stride
   * (broadcast); c [3, 4, 5]. */
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = api_tensor(&buffers[0], 0, TSR_DTYPE_F32, 2, 4, 8, 0, 0);
  desc.b = api_tensor(&buffers[1], 0, TSR_DTYPE_F32, 3, 1, 8, 5, 0);
  desc.c = api_tensor(&buffers[2], 0, TSR_DTYPE_F32, 3, 3, 4, 5, 0);
  desc.d = api_tensor(&buffers[3], 0, TSR_DTYPE_F32, 3, 3, 4, 5, 0);
  desc.beta = 0.25f;
  desc.compute = TSR_COMPUTE_TF32;
  tsr__op_args out;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_GEMM, &desc, "tsr_gemm", &out), TSR_OK);
  const tsr_gemm_args *g = &out.u.gemm;
  check_tensor("batched a", &g->a, &handles[0], 0, TSR_DTYPE_F32, 3, (int64_t[]){3, 4, 8},
               (int64_t[]){0, 8, 1});
  check_tensor("batched b", &g->b, &handles[1], 0, TSR_DTYPE_F32, 3, (int64_t[]){3, 8, 5},
               (int64_t[]){0, 5, 1});
  check_tensor("batched c", &g->c, &handles[2], 0, TSR_DTYPE_F32, 3, (int64_t[]){3, 4, 5},
               (int64_t[]){20, 5, 1});
  check_tensor("batched d", &g->d, &handles[3], 0, TSR_DTYPE_F32, 3, (int64_t[]){3, 4, 5},
               (int64_t[]){20, 5, 1});
  CHECK(g->beta == 0.25f);
  CHECK_INT(g->compute, TSR_COMPUTE_TF32);
  CHECK(out.variant == NULL);

  /* In place: c is d (rank 2 c against a rank-3 d of batch 1 is the same view). */
  desc.a = api_tensor(&buffers[0], 0, TSR_DTYPE_F32, 2, 4, 8, 0, 0);
  desc.b = api_tensor(&buffers[1], 0, TSR_DTYPE_F32, 2, 8, 5, 0, 0);
  desc.d = api_tensor(&buffers[3], 0, TSR_DTYPE_F32, 3, 1, 4, 5, 0);
  desc.c = api_tensor(&buffers[3], 0, TSR_DTYPE_F32, 2, 4, 5, 0, 0);
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_GEMM, &desc, "tsr_gemm", &out), TSR_OK);
  check_tensor("in-place c", &out.u.gemm.c, &handles[3], 0, TSR_DTYPE_F32, 3, (int64_t[]){1, 4, 5},
               (int64_t[]){0, 5, 1});
}

static void test_grouped_gemm(void) {
  static const int64_t sizes[] = {3, 1};
  tsr_grouped_gemm_desc desc = TSR_GROUPED_GEMM_DESC_INIT;
  desc.a = api_tensor(&buffers[0], 0, TSR_DTYPE_F16, 2, 4, 8, 0, 0);
  desc.b = api_tensor(&buffers[1], 0, TSR_DTYPE_F16, 3, 2, 8, 6, 0);
  desc.d = api_tensor(&buffers[3], 0, TSR_DTYPE_F16, 2, 4, 6, 0, 0);
  desc.group_sizes = sizes;
  desc.group_count = 2;
  desc.alpha = 2.0f;
  desc.activation = TSR_ACT_RELU;
  tsr__op_args out;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_GROUPED_GEMM, &desc, "tsr_grouped_gemm", &out),
               TSR_OK);
  const tsr_grouped_gemm_args *g = &out.u.grouped_gemm;
  CHECK(tsr__op_args_pointer(&out) == g);
  CHECK_INT(g->struct_size, sizeof(tsr_grouped_gemm_args));
  check_tensor("grouped b", &g->b, &handles[1], 0, TSR_DTYPE_F16, 3, (int64_t[]){2, 8, 6},
               (int64_t[]){48, 6, 1});
  CHECK(g->group_sizes == sizes);
  CHECK_INT(g->group_count, 2);
  CHECK(g->alpha == 2.0f);
  CHECK_INT(g->activation, TSR_ACT_RELU);
  CHECK(all_zero(&g->bias, sizeof g->bias));
}

static void test_attention(void) {
  tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
  desc.q = api_tensor(&buffers[0], 0, TSR_DTYPE_F32, 4, 1, 3, 4, 16);
  desc.k = api_tensor(&buffers[1], 0, TSR_DTYPE_F32, 4, 1, 6, 1, 16);
  desc.v = api_tensor(&buffers[2], 0, TSR_DTYPE_F32, 4, 1, 6, 1, 16);
  desc.o = api_tensor(&buffers[3], 0, TSR_DTYPE_F32, 4, 1, 3, 4, 16);
  desc.causal = 7;
  desc.window_left = 3;
  tsr__op_args out;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ATTENTION, &desc, "tsr_attention", &out), TSR_OK);
  const tsr_attention_args *g = &out.u.attention;
  CHECK(tsr__op_args_pointer(&out) == g);
  CHECK_INT(g->struct_size, sizeof(tsr_attention_args));
  CHECK(fabsf(g->scale - 0.25f) < 1e-7f);
  CHECK_INT(g->causal, 1);
  CHECK_INT(g->window_left, 3);
  CHECK_INT(g->window_right, 0);
  CHECK(all_zero(&g->lse, sizeof g->lse));
  check_tensor("attention k", &g->k, &handles[1], 0, TSR_DTYPE_F32, 4, (int64_t[]){1, 6, 1, 16},
               (int64_t[]){96, 16, 16, 1});

  desc.causal = 0;
  desc.scale = 0.3f;
  desc.window_right = 2;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ATTENTION, &desc, "tsr_attention", &out), TSR_OK);
  CHECK(out.u.attention.scale == 0.3f);
  CHECK_INT(out.u.attention.causal, 0);
  CHECK_INT(out.u.attention.window_right, 2);

  /* Windows that reach past every key are unbounded (-1), so no plugin
   * computes i + window near INT64_MAX, and what a plugin gets fits int32
   * when the sequences do: window_left >= Skv (6) and window_right >= Sq (3)
   * become -1; smaller ones pass unchanged. */
  const int64_t huge[] = {INT64_MAX, INT64_MAX - 1, INT32_MAX, (int64_t)INT32_MAX + 3, 6};
  for (int i = 0; i < (int)(sizeof huge / sizeof huge[0]); i++) {
    desc.causal = 0;
    desc.window_left = huge[i];
    desc.window_right = huge[i];
    CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ATTENTION, &desc, "tsr_attention", &out), TSR_OK);
    CHECK_INT(out.u.attention.window_left, -1);
    CHECK_INT(out.u.attention.window_right, -1);
    desc.causal = 1;
    desc.window_right = -1;
    CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ATTENTION, &desc, "tsr_attention", &out), TSR_OK);
    CHECK_INT(out.u.attention.window_left, -1);
    CHECK_INT(out.u.attention.window_right, 0);
  }
  desc.causal = 0;
  desc.window_left = 5;
  desc.window_right = 3;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ATTENTION, &desc, "tsr_attention", &out), TSR_OK);
  CHECK_INT(out.u.attention.window_left, 5);
  CHECK_INT(out.u.attention.window_right, -1);
  desc.window_left = 6;
  desc.window_right = 2;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ATTENTION, &desc, "tsr_attention", &out), TSR_OK);
  CHECK_INT(out.u.attention.window_left, -1);
  CHECK_INT(out.u.attention.window_right, 2);
  desc.window_left = -7; /* any negative window is unbounded, passed as -1 */
  desc.window_right = INT64_MIN;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ATTENTION, &desc, "tsr_attention", &out), TSR_OK);
  CHECK_INT(out.u.attention.window_left, -1);
  CHECK_INT(out.u.attention.window_right, -1);
}

static void test_row_ops(void) {
  tsr__op_args out;
  tsr_rmsnorm_desc rms = TSR_RMSNORM_DESC_INIT;
  rms.x = api_tensor(&buffers[0], 0, TSR_DTYPE_BF16, 3, 2, 3, 8, 0);
  rms.weight = api_tensor(&buffers[1], 0, TSR_DTYPE_F32, 1, 8, 0, 0, 0);
  rms.y = rms.x;
  rms.eps = 0.125f;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_RMSNORM, &rms, "tsr_rmsnorm", &out), TSR_OK);
  CHECK(tsr__op_args_pointer(&out) == &out.u.rmsnorm);
  CHECK_INT(out.u.rmsnorm.struct_size, sizeof(tsr_rmsnorm_args));
  CHECK(out.u.rmsnorm.eps == 0.125f);
  CHECK(all_zero(&out.u.rmsnorm.residual, sizeof out.u.rmsnorm.residual));
  CHECK(all_zero(&out.u.rmsnorm.residual_out, sizeof out.u.rmsnorm.residual_out));
  check_tensor("rmsnorm y", &out.u.rmsnorm.y, &handles[0], 0, TSR_DTYPE_BF16, 3,
               (int64_t[]){2, 3, 8}, (int64_t[]){24, 8, 1});

  tsr_layernorm_desc ln = TSR_LAYERNORM_DESC_INIT;
  ln.x = api_tensor(&buffers[0], 0, TSR_DTYPE_F32, 1, 8, 0, 0, 0);
  ln.y = api_tensor(&buffers[1], 0, TSR_DTYPE_F32, 1, 8, 0, 0, 0);
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_LAYERNORM, &ln, "tsr_layernorm", &out), TSR_OK);
  CHECK(tsr__op_args_pointer(&out) == &out.u.layernorm);
  CHECK(out.u.layernorm.eps == 1e-5f);
  CHECK(all_zero(&out.u.layernorm.weight, sizeof out.u.layernorm.weight));

  tsr_softmax_desc sm = TSR_SOFTMAX_DESC_INIT;
  sm.x = api_tensor(&buffers[0], 0, TSR_DTYPE_F16, 2, 3, 8, 0, 0);
  sm.y = api_tensor(&buffers[1], 0, TSR_DTYPE_F16, 2, 3, 8, 0, 0);
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_SOFTMAX, &sm, "tsr_softmax", &out), TSR_OK);
  CHECK(tsr__op_args_pointer(&out) == &out.u.softmax);
  CHECK(out.u.softmax.scale == 1.0f);
  sm.scale = 0.5f;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_SOFTMAX, &sm, "tsr_softmax", &out), TSR_OK);
  CHECK(out.u.softmax.scale == 0.5f);

  tsr_rope_desc rope = TSR_ROPE_DESC_INIT;
  rope.x = api_tensor(&buffers[0], 0, TSR_DTYPE_F32, 4, 1, 2, 2, 12);
  rope.y = rope.x;
  rope.position_offset = 40;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ROPE, &rope, "tsr_rope", &out), TSR_OK);
  CHECK(tsr__op_args_pointer(&out) == &out.u.rope);
  CHECK(out.u.rope.theta == 10000.0f);
  CHECK_INT(out.u.rope.rotary_dim, 12);
  CHECK_INT(out.u.rope.position_offset, 40);
  CHECK_INT(out.u.rope.style, TSR_ROPE_NEOX);
  rope.theta = 500000.0f;
  rope.rotary_dim = 6;
  rope.style = TSR_ROPE_GPTJ;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_ROPE, &rope, "tsr_rope", &out), TSR_OK);
  CHECK(out.u.rope.theta == 500000.0f);
  CHECK_INT(out.u.rope.rotary_dim, 6);
  CHECK_INT(out.u.rope.style, TSR_ROPE_GPTJ);

  tsr_swiglu_desc sw = TSR_SWIGLU_DESC_INIT;
  sw.gate = api_tensor(&buffers[0], 0, TSR_DTYPE_F32, 1, 8, 0, 0, 0);
  sw.up = api_tensor(&buffers[1], 0, TSR_DTYPE_F32, 1, 8, 0, 0, 0);
  sw.y = sw.gate;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_SWIGLU, &sw, "tsr_swiglu", &out), TSR_OK);
  CHECK(tsr__op_args_pointer(&out) == &out.u.swiglu);
  CHECK_INT(out.u.swiglu.struct_size, sizeof(tsr_swiglu_args));

  tsr_gelu_desc gelu = TSR_GELU_DESC_INIT;
  gelu.x = api_tensor(&buffers[0], 0, TSR_DTYPE_F32, 1, 8, 0, 0, 0);
  gelu.y = api_tensor(&buffers[1], 0, TSR_DTYPE_F32, 1, 8, 0, 0, 0);
  gelu.approximate = TSR_GELU_TANH;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_GELU, &gelu, "tsr_gelu", &out), TSR_OK);
  CHECK(tsr__op_args_pointer(&out) == &out.u.gelu);
  CHECK_INT(out.u.gelu.approximate, TSR_GELU_TANH);

  tsr_cross_entropy_desc ce = TSR_CROSS_ENTROPY_DESC_INIT;
  ce.logits = api_tensor(&buffers[0], 0, TSR_DTYPE_BF16, 2, 3, 50, 0, 0);
  ce.targets = api_tensor(&buffers[1], 0, TSR_DTYPE_I32, 1, 3, 0, 0, 0);
  ce.loss = api_tensor(&buffers[2], 0, TSR_DTYPE_F32, 1, 3, 0, 0, 0);
  ce.ignore_index = 7;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_CROSS_ENTROPY, &ce, "tsr_cross_entropy", &out),
               TSR_OK);
  CHECK(tsr__op_args_pointer(&out) == &out.u.cross_entropy);
  CHECK_INT(out.u.cross_entropy.ignore_index, 7);
  CHECK(all_zero(&out.u.cross_entropy.lse, sizeof out.u.cross_entropy.lse));
}

static void test_entry_arguments(void) {
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  tsr__op_args out;
  failure[0] = '\0';
  CHECK_STATUS(tsr__validate_op(NULL, TSR_OP_GEMM, &desc, "tsr_gemm", &out),
               TSR_ERROR_NULL_ARGUMENT);
  CHECK(strncmp(failure, "tsr_gemm: ", 10) == 0 && strstr(failure, "device"));
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_COUNT_, &desc, "tsr_op_run", &out),
               TSR_ERROR_INVALID_VALUE);
  CHECK(strncmp(failure, "tsr_op_run: ", 12) == 0 && strstr(failure, "op = 11"));
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_GEMM, &desc, "tsr_gemm", NULL),
               TSR_ERROR_NULL_ARGUMENT);
  /* Only struct_size is read from a descriptor too small for the version. */
  size_t tiny = 4;
  CHECK_STATUS(tsr__validate_op(&device, TSR_OP_GEMM, &tiny, "tsr_gemm", &out),
               TSR_ERROR_STRUCT_SIZE);
  CHECK(strstr(failure, "struct_size = 4") != NULL);
  out.op = TSR_OP_COUNT_;
  CHECK(tsr__op_args_pointer(&out) == NULL);
  CHECK(tsr__op_args_pointer(NULL) == NULL);
}

int main(void) {
  setup();
  test_gemm_rank2();
  test_gemm_batched();
  test_grouped_gemm();
  test_attention();
  test_row_ops();
  test_entry_arguments();
  return api_finish("test_validate_unit");
}
