/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin rules R26 to R28 (docs/PLUGINS.md) for the CUDA plugin, asked
 * through its own ABI 2 table (dlopen, no core in between, so no cache
 * hides an answer) and the stand-in driver (fake_libcuda.c: one H100-like
 * device, so the sm_90 tables and the wgmma rows are in play; nothing runs):
 * - R26: op_select(NULL) answers the variant op_variants names as its
 *   heuristic; every listed name selects; a name the plugin lacks, or one
 *   that cannot run the problem, is TSR_ERROR_NOT_FOUND with a sentence;
 * - R27: problems of one signature (offsets of one alignment, other group
 *   sizes, another RoPE position) get the same list and the same config,
 *   and op_run takes the config to either of them.
 * usage: cuda_select <libtessera-cuda.so>; TESSERA_CUDA_DRIVER names the
 * stand-in driver. Exit 77 when the plugin sees no device. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/plugin.h"

static int failures;
static char last_error[512];

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, " (plugin error: %s)\n", last_error);                                        \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static void host_log(void *handle, int level, const char *fmt, ...) {
  (void)handle, (void)level, (void)fmt;
}

static void host_set_error(void *handle, const char *fmt, ...) {
  (void)handle;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
}

static const char *host_get_env(const char *name) {
  return getenv(name);
}

static const tsr_plugin_v2 *table;
static void *device, *queue, *buffer;

/* A row-major tensor at `offset` bytes of the test's one buffer. */
static tsr_plugin_tensor tensor(uint64_t offset, tsr_dtype dtype, int rank, const int64_t *shape) {
  tsr_plugin_tensor t;
  memset(&t, 0, sizeof t);
  t.buffer = buffer;
  t.offset = offset;
  t.dtype = dtype;
  t.rank = rank;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    t.strides[d] = shape[d] > 0 ? stride : 0;
    stride *= shape[d] > 1 ? shape[d] : 1;
  }
  return t;
}

/* R26 for one problem; its list into `list`, its config returned. */
static const void *check_pick(const char *what, tsr_op op, const void *args,
                              tsr_plugin_variant_list *list) {
  memset(list, 0, sizeof *list);
  list->struct_size = sizeof *list;
  CHECK(table->op_supported(device, op, args) == TSR_OK, "%s: op_supported", what);
  CHECK(table->op_variants(device, op, args, list) == TSR_OK && list->count > 0 &&
            list->heuristic >= 0 && (uint32_t)list->heuristic < list->count,
        "%s: op_variants (%u, heuristic %d)", what, list->count, list->heuristic);
  tsr_plugin_selection pick = {sizeof pick, NULL, NULL};
  CHECK(table->op_select(device, op, args, NULL, &pick) == TSR_OK && pick.config && pick.name,
        "%s: op_select(NULL)", what);
  if (!pick.name || list->count == 0)
    return NULL;
  CHECK(strcmp(pick.name, list->variants[list->heuristic].name) == 0,
        "%s: op_select(NULL) is %s, op_variants' heuristic %s", what, pick.name,
        list->variants[list->heuristic].name);
  for (uint32_t i = 0; i < list->count; i++) {
    tsr_plugin_selection named = {sizeof named, NULL, NULL};
    CHECK(table->op_select(device, op, args, list->variants[i].name, &named) == TSR_OK &&
              named.name && strcmp(named.name, list->variants[i].name) == 0,
          "%s: op_select(%s)", what, list->variants[i].name);
  }
  tsr_plugin_selection none = {sizeof none, NULL, NULL};
  last_error[0] = '\0';
  CHECK(table->op_select(device, op, args, "no_such_variant", &none) == TSR_ERROR_NOT_FOUND &&
            strncmp(last_error, "cuda: ", 6) == 0,
        "%s: an unknown variant", what);
  return pick.config;
}

/* R27: two problems of one signature; op_run takes either config to either. */
static void check_same(const char *what, tsr_op op, const void *one, const void *other) {
  static tsr_plugin_variant_list a, b;
  const void *config_a = check_pick(what, op, one, &a);
  const void *config_b = check_pick(what, op, other, &b);
  CHECK(a.count == b.count && a.heuristic == b.heuristic, "%s: %u/%d against %u/%d", what, a.count,
        a.heuristic, b.count, b.heuristic);
  for (uint32_t i = 0; i < a.count && i < b.count; i++)
    CHECK(strcmp(a.variants[i].name, b.variants[i].name) == 0, "%s: variant %u: %s against %s",
          what, i, a.variants[i].name, b.variants[i].name);
  CHECK(config_a == config_b, "%s: two configs for one signature", what);
  if (config_a)
    CHECK(table->op_run(queue, op, other, config_a) == TSR_OK &&
              table->op_run(queue, op, one, config_a) == TSR_OK,
          "%s: op_run", what);
}

static tsr_gemm_args gemm(tsr_dtype dtype, int64_t m, int64_t n, int64_t k, uint64_t offset) {
  tsr_gemm_args g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  g.a = tensor(offset, dtype, 3, (int64_t[]){1, m, k});
  g.b = tensor(offset + (256u << 20), dtype, 3, (int64_t[]){1, k, n});
  g.d = tensor(offset + (512u << 20), dtype, 3, (int64_t[]){1, m, n});
  g.alpha = 1.0f;
  return g;
}

static void gemms(void) {
  static const int64_t shapes[][3] = {
      {16, 4096, 4096}, {1, 8192, 8192}, {4096, 4096, 4096}, {1793, 1793, 1793}, {64, 64, 64}};
  const tsr_dtype dtypes[] = {TSR_DTYPE_BF16, TSR_DTYPE_F16, TSR_DTYPE_F32};
  tsr_plugin_variant_list list;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
      char what[96];
      snprintf(what, sizeof what, "gemm dtype %d %lldx%lldx%lld", (int)dtypes[d],
               (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2]);
      tsr_gemm_args one = gemm(dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], 0);
      tsr_gemm_args other = gemm(dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], 4096);
      check_same(what, TSR_OP_GEMM, &one, &other);
      if (dtypes[d] == TSR_DTYPE_F32) {
        one.compute = other.compute = TSR_COMPUTE_TF32;
        check_same(what, TSR_OP_GEMM, &one, &other);
      }
      /* 4-byte aligned operands: another signature, R26 still */
      tsr_gemm_args odd = gemm(dtypes[d], shapes[s][0], shapes[s][1], shapes[s][2], 4);
      check_pick(what, TSR_OP_GEMM, &odd, &list);
    }
  }
  /* A listed name that cannot run this problem: GEMV needs M <= 16. */
  tsr_gemm_args big = gemm(TSR_DTYPE_BF16, 4096, 4096, 4096, 0);
  tsr_plugin_selection pick = {sizeof pick, NULL, NULL};
  CHECK(table->op_select(device, TSR_OP_GEMM, &big, "gemv_splitk", &pick) == TSR_ERROR_NOT_FOUND,
        "gemv_splitk for 4096^3");
}

static void grouped(void) {
  const int64_t even[4] = {512, 512, 512, 512}, skewed[4] = {0, 1000, 48, 1000};
  tsr_grouped_gemm_args one;
  memset(&one, 0, sizeof one);
  one.struct_size = sizeof one;
  one.a = tensor(0, TSR_DTYPE_BF16, 2, (int64_t[]){2048, 512});
  one.b = tensor(256u << 20, TSR_DTYPE_BF16, 3, (int64_t[]){4, 512, 1024});
  one.d = tensor(512u << 20, TSR_DTYPE_BF16, 2, (int64_t[]){2048, 1024});
  one.group_sizes = even;
  one.group_count = 4;
  one.alpha = 1.0f;
  tsr_grouped_gemm_args other = one;
  other.group_sizes = skewed;
  check_same("grouped gemm, other group sizes", TSR_OP_GROUPED_GEMM, &one, &other);
  /* Few rows, an empty group: where a pick from the sizes would differ. */
  const int64_t few[4] = {5, 0, 17, 1}, spread[4] = {6, 6, 6, 5};
  one.a = tensor(0, TSR_DTYPE_F16, 2, (int64_t[]){23, 33});
  one.b = tensor(256u << 20, TSR_DTYPE_F16, 3, (int64_t[]){4, 33, 17});
  one.d = tensor(512u << 20, TSR_DTYPE_F16, 2, (int64_t[]){23, 17});
  one.group_sizes = few;
  other = one;
  other.group_sizes = spread;
  check_same("grouped gemm, few rows", TSR_OP_GROUPED_GEMM, &one, &other);
}

static void attention(void) {
  const tsr_dtype dtypes[] = {TSR_DTYPE_BF16, TSR_DTYPE_F32};
  const int64_t dims[] = {64, 128, 80};
  for (size_t d = 0; d < 2; d++) {
    for (size_t h = 0; h < 3; h++) {
      int64_t shape[4] = {1, 256, 8, dims[h]};
      tsr_attention_args one;
      memset(&one, 0, sizeof one);
      one.struct_size = sizeof one;
      one.q = tensor(0, dtypes[d], 4, shape);
      one.k = tensor(128u << 20, dtypes[d], 4, shape);
      one.v = tensor(256u << 20, dtypes[d], 4, shape);
      one.o = tensor(384u << 20, dtypes[d], 4, shape);
      one.scale = 0.125f;
      one.causal = 1;
      one.window_left = -1;
      one.window_right = 0;
      tsr_attention_args other = one;
      other.q.offset += 1024;
      other.o.offset += 2048;
      check_same("attention", TSR_OP_ATTENTION, &one, &other);
    }
  }
}

static void rows(void) {
  tsr_rmsnorm_args one;
  memset(&one, 0, sizeof one);
  one.struct_size = sizeof one;
  one.x = tensor(0, TSR_DTYPE_BF16, 2, (int64_t[]){16, 4096});
  one.y = tensor(1u << 20, TSR_DTYPE_BF16, 2, (int64_t[]){16, 4096});
  one.weight = tensor(2u << 20, TSR_DTYPE_BF16, 1, (int64_t[]){4096});
  one.eps = 1e-6f;
  tsr_rmsnorm_args other = one;
  other.x.offset += 256;
  check_same("rmsnorm", TSR_OP_RMSNORM, &one, &other);
  tsr_rope_args rope;
  memset(&rope, 0, sizeof rope);
  rope.struct_size = sizeof rope;
  rope.x = tensor(0, TSR_DTYPE_BF16, 4, (int64_t[]){1, 64, 8, 128});
  rope.y = tensor(1u << 20, TSR_DTYPE_BF16, 4, (int64_t[]){1, 64, 8, 128});
  rope.theta = 10000.0f;
  rope.rotary_dim = 128;
  tsr_rope_args later = rope;
  later.position_offset = 77;
  check_same("rope, another position", TSR_OP_ROPE, &rope, &later);
}

int main(int argc, char **argv) {
  void *library = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  tsr_plugin_negotiate_fn negotiate =
      library ? (tsr_plugin_negotiate_fn)dlsym(library, TSR_PLUGIN_NEGOTIATE_SYMBOL) : NULL;
  tsr_plugin_entry_fn entry =
      library ? (tsr_plugin_entry_fn)dlsym(library, TSR_PLUGIN_ENTRY_SYMBOL) : NULL;
  if (!negotiate || !entry || negotiate(2) != 2 || !(table = entry(2))) {
    fprintf(stderr, "FAIL: %s does not speak ABI 2\n", argc > 1 ? argv[1] : "(no plugin)");
    return 1;
  }
  tsr_host_services_v2 host = {sizeof host, 2, host_log, host_set_error, host_get_env, NULL};
  void *plugin = NULL;
  char reason[256] = "";
  if (table->init(&host, &plugin, reason, sizeof reason) != TSR_OK ||
      table->device_count(plugin) == 0) {
    fprintf(stderr, "skipped: no CUDA device (%s)\n", reason);
    return 77;
  }
  if (table->device_open(plugin, 0, &device) != TSR_OK ||
      table->queue_create(device, &queue) != TSR_OK ||
      table->buffer_alloc(device, (uint64_t)1 << 30, &buffer) != TSR_OK) {
    fprintf(stderr, "FAIL: device, queue or buffer: %s\n", last_error);
    return 1;
  }
  gemms();
  grouped();
  attention();
  rows();
  CHECK(table->queue_finish(queue) == TSR_OK, "queue_finish");
  table->buffer_free(device, buffer);
  table->queue_destroy(queue);
  table->device_close(device);
  table->shutdown(plugin);
  if (failures)
    fprintf(stderr, "cuda_select: %d failure(s)\n", failures);
  else
    printf("cuda_select: all checks passed\n");
  return failures ? 1 : 0;
}
