/* SPDX-License-Identifier: Apache-2.0 */
/* Every kernel variant of a GPU plugin (CUDA's; HIP's with its selector as
 * the argument) against the fp64 reference:
 * `tessera check` runs the heuristic's pick, this runs each variant that
 * tsr_op_variants lists (every GEMM tile config, tf32, GEMV, the flash
 * kernels for each head-dim class, the generic attention kernel) on problems
 * chosen to reach their edges: both tile layouts of each operand, 16-byte
 * aligned rows (cp.async) and unaligned ones (element loads), partial tiles,
 * batches, the fused epilogue, empty groups, causal masks with Sq != Skv,
 * GQA, windows and lse; packed sequences (varlen, softcap). Exits 77 (skipped) without the device.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/reference.h"
#include "tessera/tessera.h"

enum { EXIT_SKIP = 77, MAX_TENSORS = 8 };

static int failures = 0, runs = 0;
static uint64_t random_state = 0x9e3779b97f4a7c15ull;

static double uniform(void) { /* [-1, 1) */
  random_state ^= random_state << 13;
  random_state ^= random_state >> 7;
  random_state ^= random_state << 17;
  return (double)(random_state >> 11) / (double)(1ull << 52) - 1.0;
}

/* A tensor in its own device buffer with a host copy of the buffer. */
typedef struct host_tensor {
  tsr_tensor view;
  void *host;
  size_t bytes;
} host_tensor;

typedef struct problem {
  tsr_device *device;
  tsr_queue *queue;
  host_tensor tensors[MAX_TENSORS];
  int count;
} problem;

static tsr_tensor make_tensor(problem *p, tsr_dtype dtype, int rank, const int64_t *storage,
                              double scale) {
  if (p->count == MAX_TENSORS) {
    fprintf(stderr, "more than %d tensors in one problem\n", MAX_TENSORS);
    exit(1);
  }
  host_tensor *t = &p->tensors[p->count++];
  int64_t elements = 1;
  for (int i = 0; i < rank; i++)
    elements *= storage[i];
  t->bytes = (size_t)elements * tsr_dtype_size(dtype);
  t->host = malloc(t->bytes);
  for (int64_t i = 0; i < elements; i++)
    tsr_store_from_f32(t->host, dtype, i, (float)(uniform() * scale));
  if (tsr_buffer_create(p->device, t->bytes, &t->view.buffer) != TSR_OK ||
      tsr_buffer_write(p->queue, t->view.buffer, 0, t->host, t->bytes) != TSR_OK) {
    fprintf(stderr, "cannot create a %zu-byte buffer: %s\n", t->bytes, tsr_last_error());
    exit(1);
  }
  t->view = tsr_tensor_make(t->view.buffer, 0, dtype, rank, storage);
  return t->view;
}

static const void *host_of(void *user, const tsr_buffer *buffer) {
  problem *p = user;
  for (int i = 0; i < p->count; i++)
    if (p->tensors[i].view.buffer == buffer)
      return p->tensors[i].host;
  return NULL;
}

static void release(problem *p) {
  for (int i = 0; i < p->count; i++) {
    tsr_buffer_destroy(p->tensors[i].view.buffer);
    free(p->tensors[i].host);
  }
  p->count = 0;
}

/* ||observed - reference|| / ||reference|| over a dense output. */
static double relative_error(problem *p, const tsr_tensor *out, const double *reference,
                             int64_t count) {
  size_t bytes = (size_t)count * tsr_dtype_size(out->dtype);
  void *observed = malloc(bytes);
  if (tsr_buffer_read(p->queue, out->buffer, out->offset, observed, bytes) != TSR_OK) {
    free(observed);
    return INFINITY;
  }
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < count; i++) {
    double v = tsr_load_as_f32(observed, out->dtype, i), r = reference[i];
    if (isinf(r) && v == r)
      continue;
    if (!isfinite(v)) {
      free(observed);
      return INFINITY;
    }
    diff += (v - r) * (v - r);
    norm += r * r;
  }
  free(observed);
  return sqrt(diff / (norm > 0.0 ? norm : 1.0));
}

static double bound_for(tsr_dtype dtype, bool tf32) {
  if (tf32)
    return 4e-3;
  return dtype == TSR_DTYPE_BF16 ? 2e-2 : dtype == TSR_DTYPE_F16 ? 4e-3 : 2e-5;
}

static void report(const char *what, const char *variant, double error, double bound) {
  runs++;
  bool ok = error <= bound;
  if (!ok)
    failures++;
  printf("%s %-44s %-28s error %.3g (bound %.3g)\n", ok ? "ok  " : "FAIL", what, variant, error,
         bound);
}

/* Runs op with each listed variant; `out`/`count` name the output to compare
 * (and lse/lse_count for attention). */
static void run_variants(problem *p, tsr_op op, void *desc, const char **variant_field,
                         const char *what, const tsr_tensor *out, int64_t count,
                         const tsr_tensor *lse, int64_t lse_count, double bound) {
  tsr_variant_list list;
  memset(&list, 0, sizeof list);
  list.struct_size = sizeof list;
  if (tsr_op_variants(p->device, op, desc, &list) != TSR_OK || list.count == 0) {
    printf("FAIL %s: no variants: %s\n", what, tsr_last_error());
    failures++;
    return;
  }
  union {
    tsr_gemm_args gemm;
    tsr_grouped_gemm_args grouped;
    tsr_attention_args attention;
  } args;
  if (tsr_reference_prepare(p->device, op, desc, host_of, p, &args, sizeof args) != TSR_OK) {
    printf("FAIL %s: tsr_reference_prepare: %s\n", what, tsr_last_error());
    failures++;
    return;
  }
  double *reference = calloc((size_t)count, sizeof(double));
  double *reference_lse = lse ? calloc((size_t)lse_count, sizeof(double)) : NULL;
  tsr_status status = op == TSR_OP_GEMM ? tsr_reference_gemm(&args.gemm, reference)
                      : op == TSR_OP_GROUPED_GEMM
                          ? tsr_reference_grouped_gemm(&args.grouped, reference)
                          : tsr_reference_attention(&args.attention, reference, reference_lse);
  if (status != TSR_OK) {
    printf("FAIL %s: reference: %s\n", what, tsr_last_error());
    failures++;
  }
  for (uint32_t v = 0; v < list.count && status == TSR_OK; v++) {
    *variant_field = list.names[v];
    tsr_status run = tsr_op_run(p->queue, op, desc);
    if (run == TSR_OK)
      run = tsr_queue_finish(p->queue);
    if (run != TSR_OK) {
      printf("FAIL %s %s: %s: %s\n", what, list.names[v], tsr_status_name(run), tsr_last_error());
      failures++;
      runs++;
      continue;
    }
    report(what, list.names[v], relative_error(p, out, reference, count), bound);
    if (lse)
      report(what, "  (lse)", relative_error(p, lse, reference_lse, lse_count), 1e-3);
  }
  *variant_field = NULL;
  free(reference);
  free(reference_lse);
}

static void gemm_case(problem *p, tsr_dtype dtype, bool tf32, int64_t batch, int64_t m, int64_t n,
                      int64_t k, bool trans_a, bool trans_b, bool epilogue) {
  int64_t a_storage[3] = {batch, trans_a ? k : m, trans_a ? m : k};
  int64_t b_storage[3] = {batch, trans_b ? n : k, trans_b ? k : n};
  int64_t d_shape[3] = {batch, m, n};
  tsr_gemm_desc desc = TSR_GEMM_DESC_INIT;
  desc.a = make_tensor(p, dtype, 3, a_storage, 1.0);
  desc.b = make_tensor(p, dtype, 3, b_storage, 1.0);
  if (trans_a)
    desc.a = tsr_tensor_transpose(desc.a, 1, 2);
  if (trans_b)
    desc.b = tsr_tensor_transpose(desc.b, 1, 2);
  desc.d = make_tensor(p, dtype, 3, d_shape, 1.0);
  if (epilogue) {
    desc.c = make_tensor(p, dtype, 3, d_shape, 1.0);
    desc.bias = make_tensor(p, dtype, 1, &n, 1.0);
    desc.alpha = 0.75f;
    desc.beta = 0.5f;
    desc.activation = TSR_ACT_GELU_TANH;
  }
  desc.compute = tf32 ? TSR_COMPUTE_TF32 : TSR_COMPUTE_STRICT;
  char what[96];
  snprintf(what, sizeof what, "gemm %s %lldx%lldx%lldx%lld %s%s%s",
           tf32 ? "tf32" : tsr_dtype_name(dtype), (long long)batch, (long long)m, (long long)n,
           (long long)k, trans_a ? "T" : "N", trans_b ? "T" : "N", epilogue ? " c+bias+gelu" : "");
  run_variants(p, TSR_OP_GEMM, &desc, &desc.variant, what, &desc.d, batch * m * n, NULL, 0,
               bound_for(dtype, tf32));
  release(p);
}

static void grouped_case(problem *p, tsr_dtype dtype, bool tf32, const int64_t *sizes,
                         int64_t groups, int64_t n, int64_t k) {
  int64_t total = 0;
  for (int64_t g = 0; g < groups; g++)
    total += sizes[g];
  int64_t a_shape[2] = {total, k}, b_shape[3] = {groups, k, n}, d_shape[2] = {total, n},
          bias_shape[2] = {groups, n};
  tsr_grouped_gemm_desc desc = TSR_GROUPED_GEMM_DESC_INIT;
  desc.a = make_tensor(p, dtype, 2, a_shape, 1.0);
  desc.b = make_tensor(p, dtype, 3, b_shape, 1.0);
  desc.bias = make_tensor(p, dtype, 2, bias_shape, 1.0);
  desc.d = make_tensor(p, dtype, 2, d_shape, 1.0);
  desc.group_sizes = sizes;
  desc.group_count = groups;
  desc.activation = TSR_ACT_SILU;
  desc.compute = tf32 ? TSR_COMPUTE_TF32 : TSR_COMPUTE_STRICT;
  char what[96];
  snprintf(what, sizeof what, "grouped %s G=%lld T=%lld N=%lld K=%lld",
           tf32 ? "tf32" : tsr_dtype_name(dtype), (long long)groups, (long long)total, (long long)n,
           (long long)k);
  run_variants(p, TSR_OP_GROUPED_GEMM, &desc, &desc.variant, what, &desc.d, total * n, NULL, 0,
               bound_for(dtype, tf32));
  release(p);
}

static void attention_case(problem *p, tsr_dtype dtype, int64_t b, int64_t hq, int64_t hkv,
                           int64_t sq, int64_t skv, int64_t d, bool causal, int64_t window_left) {
  int64_t q_shape[4] = {b, sq, hq, d}, kv_shape[4] = {b, skv, hkv, d}, lse_shape[3] = {b, hq, sq};
  tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
  desc.q = make_tensor(p, dtype, 4, q_shape, 2.0);
  desc.k = make_tensor(p, dtype, 4, kv_shape, 1.0);
  desc.v = make_tensor(p, dtype, 4, kv_shape, 1.0);
  desc.o = make_tensor(p, dtype, 4, q_shape, 1.0);
  desc.lse = make_tensor(p, TSR_DTYPE_F32, 3, lse_shape, 1.0);
  desc.causal = causal;
  desc.window_right = causal ? 0 : -1;
  desc.window_left = window_left;
  char what[96];
  snprintf(what, sizeof what, "attention %s b%lld hq%lld hkv%lld sq%lld skv%lld d%lld%s%s",
           tsr_dtype_name(dtype), (long long)b, (long long)hq, (long long)hkv, (long long)sq,
           (long long)skv, (long long)d, causal ? " causal" : "",
           window_left >= 0 ? " window" : "");
  run_variants(p, TSR_OP_ATTENTION, &desc, &desc.variant, what, &desc.o, b * sq * hq * d, &desc.lse,
               b * hq * sq, bound_for(dtype, false) * 2.0);
  release(p);
}

/* An i32 tensor holding `values` (cu_seqlens). */
static tsr_tensor make_i32(problem *p, int64_t count, const int32_t *values) {
  tsr_tensor t = make_tensor(p, TSR_DTYPE_I32, 1, &count, 0.0);
  host_tensor *h = &p->tensors[p->count - 1];
  memcpy(h->host, values, (size_t)count * sizeof(int32_t));
  if (tsr_buffer_write(p->queue, t.buffer, 0, h->host, h->bytes) != TSR_OK) {
    fprintf(stderr, "cannot write cu_seqlens: %s\n", tsr_last_error());
    exit(1);
  }
  return t;
}

/* Packed sequences (q [total_q, Hq, D], k and v [total_kv, Hkv, D]) with
 * lengths from q_lens / kv_lens, empty ones included: every serving and
 * varlen flash variant, the decode kernels where the query rows are few. */
static void packed_attention_case(problem *p, tsr_dtype dtype, int64_t b, const int32_t *q_lens,
                                  const int32_t *kv_lens, int64_t hq, int64_t hkv, int64_t d,
                                  bool causal, float softcap) {
  int32_t cu_q[9] = {0}, cu_kv[9] = {0};
  int64_t max_q = 0, max_kv = 0;
  for (int64_t i = 0; i < b; i++) {
    cu_q[i + 1] = cu_q[i] + q_lens[i];
    cu_kv[i + 1] = cu_kv[i] + kv_lens[i];
    max_q = q_lens[i] > max_q ? q_lens[i] : max_q;
    max_kv = kv_lens[i] > max_kv ? kv_lens[i] : max_kv;
  }
  int64_t q_shape[3] = {cu_q[b], hq, d}, kv_shape[3] = {cu_kv[b], hkv, d};
  int64_t lse_shape[2] = {hq, cu_q[b]};
  tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
  desc.q = make_tensor(p, dtype, 3, q_shape, 2.0);
  desc.k = make_tensor(p, dtype, 3, kv_shape, 1.0);
  desc.v = make_tensor(p, dtype, 3, kv_shape, 1.0);
  desc.o = make_tensor(p, dtype, 3, q_shape, 1.0);
  desc.lse = make_tensor(p, TSR_DTYPE_F32, 2, lse_shape, 1.0);
  desc.cu_seqlens_q = make_i32(p, b + 1, cu_q);
  desc.cu_seqlens_kv = make_i32(p, b + 1, cu_kv);
  desc.max_seqlen_q = max_q;
  desc.max_seqlen_kv = max_kv;
  desc.causal = causal;
  desc.window_right = causal ? 0 : -1;
  desc.softcap = softcap;
  char what[96];
  snprintf(what, sizeof what, "attention %s packed b%lld hq%lld hkv%lld max %lldx%lld d%lld%s%s",
           tsr_dtype_name(dtype), (long long)b, (long long)hq, (long long)hkv, (long long)max_q,
           (long long)max_kv, (long long)d, causal ? " causal" : "", softcap > 0 ? " softcap" : "");
  run_variants(p, TSR_OP_ATTENTION, &desc, &desc.variant, what, &desc.o, cu_q[b] * hq * d,
               &desc.lse, hq * cu_q[b], bound_for(dtype, false) * 2.0);
  release(p);
}

int main(int argc, char **argv) {
  /* The device: cuda:0, or another GPU plugin's (tests/hip runs hip:0). */
  const char *selector = argc > 1 ? argv[1] : "cuda:0";
  tsr_context *context = NULL;
  if (tsr_context_create(NULL, &context) != TSR_OK) {
    fprintf(stderr, "tsr_context_create: %s\n", tsr_last_error());
    return 1;
  }
  problem p;
  memset(&p, 0, sizeof p);
  if (tsr_device_open(context, selector, &p.device) != TSR_OK) {
    printf("no %s here: skipped\n", selector);
    tsr_context_destroy(context);
    return EXIT_SKIP;
  }
  if (tsr_queue_create(p.device, &p.queue) != TSR_OK) {
    fprintf(stderr, "tsr_queue_create: %s\n", tsr_last_error());
    return 1;
  }
  const tsr_dtype dtypes[3] = {TSR_DTYPE_BF16, TSR_DTYPE_F16, TSR_DTYPE_F32};
  for (int di = 0; di < 3; di++) {
    tsr_dtype dt = dtypes[di];
    bool tf32 = dt == TSR_DTYPE_F32;
    for (int layout = 0; layout < 4; layout++) {
      /* K multiple of 8: 16-byte rows (cp.async); odd sizes: element loads. */
      gemm_case(&p, dt, tf32, 1, 200, 264, 136, layout & 1, layout & 2, false);
      gemm_case(&p, dt, tf32, 2, 77, 131, 95, layout & 1, layout & 2, layout == 3);
    }
    gemm_case(&p, dt, tf32, 1, 300, 520, 64, false, false, true);
    if (!tf32) {
      /* 16-byte multiples everywhere (the TMA-fed wgmma kernels on sm_90):
       * partial tiles, a K tail, each layout, batches. */
      for (int layout = 0; layout < 4; layout++)
        gemm_case(&p, dt, false, 2, 328, 392, 200, layout & 1, layout & 2, layout == 1);
      gemm_case(&p, dt, false, 1, 1793, 264, 520, false, false, true); /* awkward M */
      gemm_case(&p, dt, false, 1, 17, 1800, 72, false, true, false);   /* few rows */
      /* More tiles than SMs: each persistent block walks several, its
       * stage ring wrapping across tiles. */
      gemm_case(&p, dt, false, 2, 2056, 2048, 136, false, false, true);
      /* Several tiles a block and K much deeper than the stage ring: the
       * second tile's first slice is many ring laps after the first's (the
       * ping-pong config's consumers take turns there). */
      gemm_case(&p, dt, false, 1, 2048, 2304, 1088, false, true, false);
    }
    if (!tf32) {
      /* Decode (M <= 16, 16-byte rows): both B layouts, K and N tails, rows
       * past 8, batches, K split across blocks, the fused epilogue. */
      gemm_case(&p, dt, false, 2, 16, 264, 1064, false, false, true);
      gemm_case(&p, dt, false, 1, 9, 200, 4096, false, true, true);
      gemm_case(&p, dt, false, 1, 5, 40, 2056, false, false, false);
      gemm_case(&p, dt, false, 3, 1, 72, 8200, false, true, false);
    }
    gemm_case(&p, dt, false, 1, 1, 264, 520, false, true, false);  /* GEMV, K-contiguous B */
    gemm_case(&p, dt, false, 3, 13, 300, 777, false, false, true); /* GEMV, N-contiguous B */
    static const int64_t sizes[6] = {0, 37, 130, 1, 0, 64};
    grouped_case(&p, dt, tf32, sizes, 6, 96, 72);
    grouped_case(&p, dt, tf32, sizes, 6, 33, 45);
    static const int64_t many[12] = {300, 0, 129, 640, 1, 77, 256, 0, 513, 64, 1000, 8};
    grouped_case(&p, dt, tf32, many, 12, 520, 264);
  }
  for (int di = 0; di < 3; di++) {
    tsr_dtype dt = dtypes[di];
    attention_case(&p, dt, 2, 4, 2, 100, 130, 64, true, -1);
    attention_case(&p, dt, 1, 4, 1, 70, 70, 128, false, -1);
    attention_case(&p, dt, 1, 2, 2, 129, 129, 200, true, 33);
    attention_case(&p, dt, 1, 2, 1, 1, 257, 40, true, -1);
  }
  /* Packed sequences: prefill (q as long as keys, an empty one, one of a
   * row, lengths off every tile) and few rows against longer keys. */
  static const int32_t prefill[4] = {130, 0, 1, 267}, few_q[4] = {3, 0, 16, 1};
  static const int32_t few_kv[4] = {100, 5, 16, 1029};
  for (int di = 0; di < 2; di++) {
    tsr_dtype dt = dtypes[di];
    packed_attention_case(&p, dt, 4, prefill, prefill, 4, 2, 128, true, 0.0f);
    packed_attention_case(&p, dt, 4, prefill, prefill, 8, 1, 64, false, 0.0f);
    packed_attention_case(&p, dt, 4, prefill, prefill, 4, 4, 96, true, 20.0f);
    packed_attention_case(&p, dt, 4, few_q, few_kv, 8, 2, 128, true, 0.0f);
  }
  printf("%d passed, %d failed\n", runs - failures, failures);
  tsr_queue_destroy(p.queue);
  tsr_context_destroy(context);
  return failures ? 1 : 0;
}
