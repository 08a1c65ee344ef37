/* SPDX-License-Identifier: Apache-2.0 */
/* Device faults of the OpenCL plugin's serving attention and kv_append, on
 * opencl:0 (exit 77, ctest's skip, without one). Each problem runs once with
 * valid indices (the baseline) and once per fault: tsr_queue_finish must
 * return TSR_ERROR_INVALID_VALUE with the sentence of the first kind at
 * fault (plugin_helper.h), the faulted sequence's rows must be NaN where
 * they can be located (and untouched where not), every other sequence must
 * match the baseline, and the next finish must be clean. Every kernel that
 * takes the problem runs it: the heuristic's pick, decode with and without
 * a key split, the flash tiles and the generic kernel. Index tensors sit at
 * 4-byte offsets with strides above 1 (a transposed block table).
 *   paged   dense q, paged k/v, seqlens_kv: block_table, seqlens_kv and
 *           max_seqlen_kv faults, and two at once (the lower kind reported)
 *   packed  packed q and k/v: cu_seqlens_q, cu_seqlens_kv, max_seqlen_q
 *   append  kv_append: a slot past the cache skips its row, negative ones
 *           skip silently */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

enum { EXIT_SKIP = 77 };
#define SENTINEL 12345.0f

static int failures = 0;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stdout, "FAIL: ");
  vfprintf(stdout, fmt, ap);
  fprintf(stdout, "\n");
  va_end(ap);
  failures++;
}

static tsr_device *device;
static tsr_queue *queue;

static float random_unit(uint32_t *seed) {
  *seed = *seed * 1664525u + 1013904223u;
  return (float)(*seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

/* A buffer of `bytes` holding `data`. */
static tsr_buffer *upload(const void *data, size_t bytes) {
  tsr_buffer *b = NULL;
  if (tsr_buffer_create(device, bytes, &b) != TSR_OK ||
      tsr_buffer_write(queue, b, 0, data, bytes) != TSR_OK)
    fail("a buffer of %zu bytes: %s", bytes, tsr_last_error());
  return b;
}

static tsr_tensor view(tsr_buffer *b, size_t offset, tsr_dtype dtype, int32_t rank,
                       const int64_t *shape, const int64_t *strides) {
  tsr_tensor t;
  memset(&t, 0, sizeof t);
  if (tsr_tensor_strided(b, offset, dtype, rank, shape, strides, &t) != TSR_OK)
    fail("a view: %s", tsr_last_error());
  return t;
}

static tsr_tensor random_tensor(int32_t rank, const int64_t *shape, uint32_t seed) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= shape[i];
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; i++)
    x[i] = random_unit(&seed);
  tsr_tensor t = view(upload(x, (size_t)n * sizeof *x), 0, TSR_DTYPE_F32, rank, shape, NULL);
  free(x);
  return t;
}

/* A float tensor filled with SENTINEL. */
static tsr_tensor sentinel_tensor(int32_t rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    n *= shape[i];
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; i++)
    x[i] = SENTINEL;
  tsr_tensor t = view(upload(x, (size_t)n * sizeof *x), 0, TSR_DTYPE_F32, rank, shape, NULL);
  free(x);
  return t;
}

static void reset(tsr_tensor *t, int64_t n) {
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; i < n; i++)
    x[i] = SENTINEL;
  tsr_buffer_write(queue, t->buffer, 0, x, (size_t)n * sizeof *x);
  free(x);
}

static void read_floats(const tsr_tensor *t, float *out, int64_t n) {
  if (tsr_buffer_read(queue, t->buffer, 0, out, (size_t)n * sizeof *out) != TSR_OK)
    fail("reading back: %s", tsr_last_error());
}

/* What a row of o (dim values) and its lse must hold. */
typedef enum expect { EXPECT_BASE, EXPECT_NAN, EXPECT_SENTINEL } expect;

static void check_row(const char *what, const float *o, const float *base_o, float lse,
                      float base_lse, int dim, expect e) {
  for (int d = 0; d <= dim; d++) {
    float got = d < dim ? o[d] : lse, want = d < dim ? base_o[d] : base_lse;
    bool ok = e == EXPECT_NAN ? isnan(got)
              : e == EXPECT_SENTINEL
                  ? got == SENTINEL
                  : (isnan(want) ? isnan(got) : fabsf(got - want) <= 1e-4f * (1 + fabsf(want)));
    if (!ok) {
      fail("%s: %s %d is %g, want %s %g", what, d < dim ? "column" : "lse", d, got,
           e == EXPECT_NAN        ? "NaN"
           : e == EXPECT_SENTINEL ? "untouched"
                                  : "the baseline's",
           want);
      return;
    }
  }
}

/* Runs the problem with `variant` (NULL: the heuristic's) into o and lse
 * reset to the sentinel; false when the variant does not take it. Sets
 * *status to what queue_finish returned and copies its sentence. */
static bool run_attention(tsr_attention_desc *desc, const char *variant, tsr_status *status,
                          char *sentence, size_t capacity) {
  reset(&desc->o, tsr_tensor_numel(&desc->o));
  reset(&desc->lse, tsr_tensor_numel(&desc->lse));
  desc->variant = variant;
  tsr_status s = tsr_attention(queue, desc);
  if (s == TSR_ERROR_NOT_FOUND && variant)
    return false;
  if (s != TSR_OK) {
    fail("tsr_attention (%s): %s", variant ? variant : "heuristic", tsr_last_error());
    return false;
  }
  *status = tsr_queue_finish(queue);
  snprintf(sentence, capacity, "%s", *status == TSR_OK ? "" : tsr_last_error());
  return true;
}

/* A faulted run's finish: TSR_ERROR_INVALID_VALUE with `want` in its
 * sentence, reported once (a second finish is clean). */
static void expect_fault_reported(const char *what, tsr_status status, const char *sentence,
                                  const char *want) {
  if (status != TSR_ERROR_INVALID_VALUE || !strstr(sentence, want))
    fail("%s: finish gave %s '%s', want '%s'", what, tsr_status_name(status), sentence, want);
  if (tsr_queue_finish(queue) != TSR_OK)
    fail("%s: a second finish reported again: %s", what, tsr_last_error());
}

static void destroy_tensors(tsr_tensor *tensors, int count) {
  for (int i = 0; i < count; i++)
    tsr_buffer_destroy(tensors[i].buffer);
}

static const char *const variants[] = {
    NULL,          "decode_split_auto", "decode_split1",   "decode_split2", "decode_split4",
    "generic_t64", "flash_d64_q32_k32", "flash_d64_q8_k32"};
enum { VARIANTS = sizeof variants / sizeof variants[0] };

/* ---- paged: dense q [B, SQ, HQ, D], paged k/v, seqlens_kv ---- */

enum { B = 3, HQ = 4, HKV = 2, D = 64 };
enum { SQ = 2, BS = 16, BLOCKS = 50, MAX_BLOCKS = 20 }; /* keys enough for 4 ranges */

typedef struct paged_indices {
  int32_t table[B][MAX_BLOCKS];
  int32_t lens[B];
  int64_t max_kv;
} paged_indices;

/* Sequences of 40, 250 and 320 keys in shuffled blocks, the first with
 * entries past its keys that are no block (never read, never checked). */
static paged_indices paged_valid(void) {
  paged_indices x;
  memset(&x, 0, sizeof x);
  const int32_t lens[B] = {40, 250, 320};
  for (int b = 0; b < B; b++) {
    x.lens[b] = lens[b];
    for (int j = 0; j < MAX_BLOCKS; j++)
      x.table[b][j] = j * BS < lens[b] ? (j * 17 + b * 7) % BLOCKS : -1;
  }
  return x;
}

/* The block table transposed (element (b, j) at j * B + b) after one int
 * of padding; seqlens at a stride of 2 after two. */
static void paged_upload(const paged_indices *x, tsr_tensor *table, tsr_tensor *lens) {
  int32_t t[1 + B * MAX_BLOCKS], l[2 + 2 * B];
  memset(t, 0, sizeof t);
  memset(l, 0, sizeof l);
  for (int b = 0; b < B; b++) {
    for (int j = 0; j < MAX_BLOCKS; j++)
      t[1 + j * B + b] = x->table[b][j];
    l[2 + 2 * b] = x->lens[b];
  }
  int64_t table_shape[2] = {B, MAX_BLOCKS}, table_strides[2] = {1, B};
  int64_t lens_shape[1] = {B}, lens_strides[1] = {2};
  *table = view(upload(t, sizeof t), 4, TSR_DTYPE_I32, 2, table_shape, table_strides);
  *lens = view(upload(l, sizeof l), 8, TSR_DTYPE_I32, 1, lens_shape, lens_strides);
}

typedef struct paged_fault {
  const char *name;
  paged_indices indices;
  const char *sentence; /* what the error must say */
  bool bad[B];          /* sequences at fault */
} paged_fault;

static void test_paged(void) {
  int64_t q_shape[4] = {B, SQ, HQ, D}, kv_shape[4] = {BLOCKS, BS, HKV, D},
          lse_shape[3] = {B, HQ, SQ};
  tsr_tensor q = random_tensor(4, q_shape, 1), k = random_tensor(4, kv_shape, 2),
             v = random_tensor(4, kv_shape, 3);
  tsr_tensor o = sentinel_tensor(4, q_shape), lse = sentinel_tensor(3, lse_shape);
  enum { O_N = B * SQ * HQ * D, LSE_N = B * HQ * SQ };
  static float base_o[O_N], base_lse[LSE_N], got_o[O_N], got_lse[LSE_N];

  const paged_indices valid = paged_valid();
  paged_fault faults[4] = {
      {"block_table", valid, "block_table row 1", {false, true, false}},
      {"seqlens_kv", valid, "seqlens_kv[2]", {false, false, true}},
      {"max_seqlen_kv", valid, "sequence 1 has more keys", {false, true, true}},
      {"two faults", valid, "seqlens_kv[2]", {true, false, true}}};
  faults[0].indices.table[1][12] = BLOCKS;
  faults[1].indices.lens[2] = BS * MAX_BLOCKS + 1;
  faults[2].indices.max_kv = 200;
  faults[3].indices.lens[2] = -1;
  faults[3].indices.table[0][1] = -5;

  for (int vi = 0; vi < VARIANTS; vi++) {
    tsr_tensor table, lens;
    paged_upload(&valid, &table, &lens);
    tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
    desc.q = q;
    desc.k = k;
    desc.v = v;
    desc.o = o;
    desc.lse = lse;
    desc.causal = 1;
    desc.block_table = table;
    desc.seqlens_kv = lens;
    tsr_status status;
    char sentence[512];
    bool ran = run_attention(&desc, variants[vi], &status, sentence, sizeof sentence);
    tsr_buffer_destroy(table.buffer);
    tsr_buffer_destroy(lens.buffer);
    if (!ran)
      continue;
    const char *name = variants[vi] ? variants[vi] : "heuristic";
    if (status != TSR_OK) {
      fail("paged %s: valid indices gave %s", name, sentence);
      continue;
    }
    read_floats(&o, base_o, O_N);
    read_floats(&lse, base_lse, LSE_N);
    int checked = 0;
    for (int f = 0; f < 4; f++) {
      paged_upload(&faults[f].indices, &table, &lens);
      desc.block_table = table;
      desc.seqlens_kv = lens;
      desc.max_seqlen_kv = faults[f].indices.max_kv;
      ran = run_attention(&desc, variants[vi], &status, sentence, sizeof sentence);
      desc.max_seqlen_kv = 0;
      tsr_buffer_destroy(table.buffer);
      tsr_buffer_destroy(lens.buffer);
      if (!ran)
        continue;
      checked++;
      char what[160];
      snprintf(what, sizeof what, "paged %s, %s", name, faults[f].name);
      expect_fault_reported(what, status, sentence, faults[f].sentence);
      read_floats(&o, got_o, O_N);
      read_floats(&lse, got_lse, LSE_N);
      for (int b = 0; b < B; b++)
        for (int i = 0; i < SQ; i++)
          for (int h = 0; h < HQ; h++) {
            char row[200];
            snprintf(row, sizeof row, "%s: sequence %d row %d head %d", what, b, i, h);
            int at = ((b * SQ + i) * HQ + h) * D, lat = (b * HQ + h) * SQ + i;
            check_row(row, got_o + at, base_o + at, got_lse[lat], base_lse[lat], D,
                      faults[f].bad[b] ? EXPECT_NAN : EXPECT_BASE);
          }
    }
    if (checked == 0)
      fail("paged %s: no fault ran", name);
    printf("paged %s: %d faults\n", name, checked);
  }
  destroy_tensors((tsr_tensor[]){q, k, v, o, lse}, 5);
}

/* ---- packed: q [TQ, HQ, D], k/v [TKV, HKV, D] ---- */

enum { TQ = 12, TKV = 300 };

typedef struct packed_indices {
  int32_t cu_q[B + 1], cu_kv[B + 1];
  int64_t max_q;
} packed_indices;

static const packed_indices packed_valid = {{0, 3, 7, 12}, {0, 70, 200, 300}, 0};

/* cu_seqlens_q after one int of padding, cu_seqlens_kv at a stride of 3. */
static void packed_upload(const packed_indices *x, tsr_tensor *cu_q, tsr_tensor *cu_kv) {
  int32_t q[1 + B + 1], kv[3 * (B + 1)];
  memset(kv, 0, sizeof kv);
  q[0] = 0;
  for (int b = 0; b <= B; b++) {
    q[1 + b] = x->cu_q[b];
    kv[3 * b] = x->cu_kv[b];
  }
  int64_t shape[1] = {B + 1}, stride3[1] = {3};
  *cu_q = view(upload(q, sizeof q), 4, TSR_DTYPE_I32, 1, shape, NULL);
  *cu_kv = view(upload(kv, sizeof kv), 0, TSR_DTYPE_I32, 1, shape, stride3);
}

typedef struct packed_fault {
  const char *name;
  packed_indices indices;
  const char *sentence;
  expect rows[TQ]; /* per packed row */
} packed_fault;

static void test_packed(void) {
  int64_t q_shape[3] = {TQ, HQ, D}, kv_shape[3] = {TKV, HKV, D}, lse_shape[2] = {HQ, TQ};
  tsr_tensor q = random_tensor(3, q_shape, 4), k = random_tensor(3, kv_shape, 5),
             v = random_tensor(3, kv_shape, 6);
  tsr_tensor o = sentinel_tensor(3, q_shape), lse = sentinel_tensor(2, lse_shape);
  enum { O_N = TQ * HQ * D, LSE_N = HQ * TQ };
  static float base_o[O_N], base_lse[LSE_N], got_o[O_N], got_lse[LSE_N];

  packed_fault faults[3] = {{"cu_seqlens_q", packed_valid, "cu_seqlens_q[1]", {0}},
                            {"cu_seqlens_kv", packed_valid, "cu_seqlens_kv[2]", {0}},
                            {"max_seqlen_q", packed_valid, "sequence 2 has more query rows", {0}}};
  faults[0].indices.cu_q[2] = TQ + 1; /* sequences 1 and 2 at fault, rows not located */
  for (int r = 3; r < TQ; r++)
    faults[0].rows[r] = EXPECT_SENTINEL;
  faults[1].indices.cu_kv[3] = TKV + 1;
  for (int r = 7; r < TQ; r++)
    faults[1].rows[r] = EXPECT_NAN;
  faults[2].indices.max_q = 4; /* sequence 2 has 5 rows: the grid covers 4 */
  for (int r = 7; r < 11; r++)
    faults[2].rows[r] = EXPECT_NAN;
  faults[2].rows[11] = EXPECT_SENTINEL;

  for (int vi = 0; vi < VARIANTS; vi++) {
    tsr_tensor cu_q, cu_kv;
    packed_upload(&packed_valid, &cu_q, &cu_kv);
    tsr_attention_desc desc = TSR_ATTENTION_DESC_INIT;
    desc.q = q;
    desc.k = k;
    desc.v = v;
    desc.o = o;
    desc.lse = lse;
    desc.causal = 1;
    desc.cu_seqlens_q = cu_q;
    desc.cu_seqlens_kv = cu_kv;
    tsr_status status;
    char sentence[512];
    bool ran = run_attention(&desc, variants[vi], &status, sentence, sizeof sentence);
    tsr_buffer_destroy(cu_q.buffer);
    tsr_buffer_destroy(cu_kv.buffer);
    if (!ran)
      continue;
    const char *name = variants[vi] ? variants[vi] : "heuristic";
    if (status != TSR_OK) {
      fail("packed %s: valid indices gave %s", name, sentence);
      continue;
    }
    read_floats(&o, base_o, O_N);
    read_floats(&lse, base_lse, LSE_N);
    int checked = 0;
    for (int f = 0; f < 3; f++) {
      packed_upload(&faults[f].indices, &cu_q, &cu_kv);
      desc.cu_seqlens_q = cu_q;
      desc.cu_seqlens_kv = cu_kv;
      desc.max_seqlen_q = faults[f].indices.max_q;
      ran = run_attention(&desc, variants[vi], &status, sentence, sizeof sentence);
      desc.max_seqlen_q = 0;
      tsr_buffer_destroy(cu_q.buffer);
      tsr_buffer_destroy(cu_kv.buffer);
      if (!ran)
        continue;
      checked++;
      char what[160];
      snprintf(what, sizeof what, "packed %s, %s", name, faults[f].name);
      expect_fault_reported(what, status, sentence, faults[f].sentence);
      read_floats(&o, got_o, O_N);
      read_floats(&lse, got_lse, LSE_N);
      for (int r = 0; r < TQ; r++)
        for (int h = 0; h < HQ; h++) {
          char row[200];
          snprintf(row, sizeof row, "%s: row %d head %d", what, r, h);
          int at = (r * HQ + h) * D, lat = h * TQ + r;
          check_row(row, got_o + at, base_o + at, got_lse[lat], base_lse[lat], D,
                    faults[f].rows[r]);
        }
    }
    if (checked == 0)
      fail("packed %s: no fault ran", name);
    printf("packed %s: %d faults\n", name, checked);
  }
  destroy_tensors((tsr_tensor[]){q, k, v, o, lse}, 5);
}

/* ---- kv_append ---- */

static void test_append(void) {
  enum { T = 4, AH = 2, AD = 16, AB = 3, ABS = 8, SLOTS = AB * ABS };
  int64_t new_shape[3] = {T, AH, AD}, cache_shape[4] = {AB, ABS, AH, AD};
  tsr_tensor k_new = random_tensor(3, new_shape, 7), v_new = random_tensor(3, new_shape, 8);
  tsr_tensor k_cache = sentinel_tensor(4, cache_shape), v_cache = sentinel_tensor(4, cache_shape);
  int32_t slot_values[2 * T] = {0, 5, 0, SLOTS, 0, -1, 0, SLOTS - 1}; /* stride 2 */
  int64_t slots_shape[1] = {T}, slots_strides[1] = {2};
  tsr_tensor slots = view(upload(slot_values, sizeof slot_values), 4, TSR_DTYPE_I32, 1, slots_shape,
                          slots_strides);
  tsr_kv_append_desc desc = TSR_KV_APPEND_DESC_INIT;
  desc.k_new = k_new;
  desc.v_new = v_new;
  desc.k_cache = k_cache;
  desc.v_cache = v_cache;
  desc.slots = slots;
  tsr_status status = tsr_kv_append(queue, &desc);
  if (status != TSR_OK) {
    fail("tsr_kv_append: %s", tsr_last_error());
    return;
  }
  status = tsr_queue_finish(queue);
  if (status != TSR_ERROR_INVALID_VALUE || !strstr(tsr_last_error(), "slots[1]"))
    fail("kv_append: finish gave %s '%s', want slots[1]", tsr_status_name(status),
         tsr_last_error());
  if (tsr_queue_finish(queue) != TSR_OK)
    fail("kv_append: a second finish reported again: %s", tsr_last_error());
  static float kn[T * AH * AD], vn[T * AH * AD], kc[SLOTS * AH * AD], vc[SLOTS * AH * AD];
  read_floats(&k_new, kn, T * AH * AD);
  read_floats(&v_new, vn, T * AH * AD);
  read_floats(&k_cache, kc, SLOTS * AH * AD);
  read_floats(&v_cache, vc, SLOTS * AH * AD);
  for (int s = 0; s < SLOTS; s++) {
    int from = s == 5 ? 0 : s == SLOTS - 1 ? 3 : -1;
    for (int e = 0; e < AH * AD; e++) {
      float want_k = from < 0 ? SENTINEL : kn[from * AH * AD + e];
      float want_v = from < 0 ? SENTINEL : vn[from * AH * AD + e];
      if (kc[s * AH * AD + e] != want_k || vc[s * AH * AD + e] != want_v) {
        fail("kv_append: slot %d element %d is %g/%g, want %g/%g", s, e, kc[s * AH * AD + e],
             vc[s * AH * AD + e], want_k, want_v);
        break;
      }
    }
  }
  printf("append: checked\n");
  tsr_buffer_destroy(k_new.buffer);
  tsr_buffer_destroy(v_new.buffer);
  tsr_buffer_destroy(k_cache.buffer);
  tsr_buffer_destroy(v_cache.buffer);
  tsr_buffer_destroy(slots.buffer);
}

int main(int argc, char **argv) {
  const char *which = argc > 1 ? argv[1] : "";
  tsr_context *context = NULL;
  if (tsr_context_create(NULL, &context) != TSR_OK)
    return EXIT_SKIP;
  if (tsr_device_open(context, "opencl:0", &device) != TSR_OK) {
    printf("no opencl:0: skipped\n");
    tsr_context_destroy(context);
    return EXIT_SKIP;
  }
  if (tsr_queue_create(device, &queue) != TSR_OK) {
    fail("tsr_queue_create: %s", tsr_last_error());
    tsr_context_destroy(context);
    return 1;
  }
  if (!strcmp(which, "paged"))
    test_paged();
  else if (!strcmp(which, "packed"))
    test_packed();
  else if (!strcmp(which, "append"))
    test_append();
  else
    fail("usage: opencl_faults_test paged|packed|append");
  tsr_queue_destroy(queue);
  tsr_context_destroy(context);
  printf("%s: %d failures\n", which, failures);
  return failures ? 1 : 0;
}
