/* SPDX-License-Identifier: Apache-2.0 */
/*
 * serving: the attention of an LLM server, one layer, on tessera.
 *
 * Three requests with prompts of different lengths share one paged KV cache
 * (blocks of BLOCK keys, handed out from a free list in no particular order).
 * 1. Prefill: the prompts' queries, keys and values packed back to back
 *    ([total, H, D], cu_seqlens offsets) run causal attention in one call,
 *    and tsr_kv_append writes their keys and values into the cache.
 * 2. Decode: each step appends one new key/value row per request and runs
 *    one query per request against the paged cache (block_table,
 *    seqlens_kv): the split-KV decode path where the device has one.
 * The last step's output is compared with a plain float loop on the host.
 *
 *   usage: tessera-serving-example [STEPS]      (default 4)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

enum { REQUESTS = 3, HQ = 8, HKV = 2, D = 64, BLOCK = 16, BLOCKS = 32, MAX_BLOCKS = 8 };

static float next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return (float)(*state >> 40) / (float)(1u << 23) - 1.0f;
}

static int fail(const char *what, tsr_status status) {
  fprintf(stderr, "serving example: %s failed: %s: %s\n", what, tsr_status_name(status),
          tsr_last_error());
  return 1;
}

#define TRY(what, call)                                                                            \
  do {                                                                                             \
    tsr_status status_ = (call);                                                                   \
    if (status_ != TSR_OK)                                                                         \
      return fail(what, status_);                                                                  \
  } while (0)

/* A device buffer holding `count` floats (or int32s) copied from `host`. */
static tsr_status upload(tsr_device *device, tsr_queue *queue, const void *host, size_t bytes,
                         tsr_buffer **out) {
  tsr_status status = tsr_buffer_create(device, bytes, out);
  if (status == TSR_OK && host)
    status = tsr_buffer_write(queue, *out, 0, host, bytes);
  return status;
}

/* Host attention of one query row (head h) over a sequence's cached keys. */
static void host_attend(const float *q, const float *k_cache, const float *v_cache,
                        const int32_t *table, int length, int h, float *out) {
  const int kv_head = h / (HQ / HKV);
  double scores[MAX_BLOCKS * BLOCK], peak = -INFINITY, sum = 0.0;
  for (int j = 0; j < length; j++) {
    const float *key =
        k_cache + (((size_t)table[j / BLOCK] * BLOCK + j % BLOCK) * HKV + kv_head) * D;
    double dot = 0.0;
    for (int c = 0; c < D; c++)
      dot += (double)q[c] * key[c];
    scores[j] = dot / sqrt((double)D);
    peak = scores[j] > peak ? scores[j] : peak;
  }
  double acc[D] = {0};
  for (int j = 0; j < length; j++) {
    const double w = exp(scores[j] - peak);
    const float *value =
        v_cache + (((size_t)table[j / BLOCK] * BLOCK + j % BLOCK) * HKV + kv_head) * D;
    sum += w;
    for (int c = 0; c < D; c++)
      acc[c] += w * value[c];
  }
  for (int c = 0; c < D; c++)
    out[c] = (float)(acc[c] / sum);
}

int main(int argc, char **argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 4;
  const int prompt[REQUESTS] = {21, 5, 40};
  if (steps < 1 || steps > MAX_BLOCKS * BLOCK - 40) {
    fprintf(stderr, "usage: tessera-serving-example [STEPS (1..%d)]\n", MAX_BLOCKS * BLOCK - 40);
    return 2;
  }
  tsr_context *context;
  tsr_device *device;
  tsr_queue *queue;
  TRY("tsr_context_create", tsr_context_create(NULL, &context));
  TRY("tsr_device_open", tsr_device_open(context, NULL, &device));
  TRY("tsr_queue_create", tsr_queue_create(device, &queue));
  tsr_device_info info = {.struct_size = sizeof info};
  TRY("tsr_device_get_info", tsr_device_get_info(device, &info));

  /* The block table: each request's blocks from a free list taken from the
   * back, so neighbouring keys live in unrelated blocks. */
  int32_t table[REQUESTS][MAX_BLOCKS], next_free = BLOCKS - 1;
  for (int r = 0; r < REQUESTS; r++)
    for (int j = 0; j < MAX_BLOCKS; j++)
      table[r][j] = j * BLOCK < prompt[r] + steps ? next_free-- : 0;

  /* ---- prefill: packed prompts ---- */
  int32_t cu[REQUESTS + 1] = {0};
  for (int r = 0; r < REQUESTS; r++)
    cu[r + 1] = cu[r] + prompt[r];
  const int total = cu[REQUESTS];
  uint64_t seed = 0x5eed;
  float *q = malloc(sizeof(float) * (size_t)total * HQ * D);
  float *kv = malloc(sizeof(float) * (size_t)total * HKV * D * 2);
  for (size_t i = 0; i < (size_t)total * HQ * D; i++)
    q[i] = next_random(&seed);
  for (size_t i = 0; i < (size_t)total * HKV * D * 2; i++)
    kv[i] = next_random(&seed);
  int32_t slots[64 * REQUESTS];
  for (int r = 0; r < REQUESTS; r++)
    for (int j = 0; j < prompt[r]; j++)
      slots[cu[r] + j] = table[r][j / BLOCK] * BLOCK + j % BLOCK;

  const size_t cache_floats = (size_t)BLOCKS * BLOCK * HKV * D;
  tsr_buffer *bq, *bk, *bv, *bo, *bcu, *bslots, *bkc, *bvc, *btable, *blens;
  const size_t kv_bytes = sizeof(float) * (size_t)total * HKV * D;
  TRY("upload q", upload(device, queue, q, sizeof(float) * (size_t)total * HQ * D, &bq));
  TRY("upload k", upload(device, queue, kv, kv_bytes, &bk));
  TRY("upload v", upload(device, queue, kv + (size_t)total * HKV * D, kv_bytes, &bv));
  TRY("alloc o", upload(device, queue, NULL, sizeof(float) * (size_t)total * HQ * D, &bo));
  TRY("upload cu_seqlens", upload(device, queue, cu, sizeof cu, &bcu));
  TRY("upload slots", upload(device, queue, slots, sizeof slots, &bslots));
  TRY("alloc k cache", upload(device, queue, NULL, sizeof(float) * cache_floats, &bkc));
  TRY("alloc v cache", upload(device, queue, NULL, sizeof(float) * cache_floats, &bvc));
  TRY("upload block_table", upload(device, queue, table, sizeof table, &btable));
  TRY("alloc seqlens", upload(device, queue, NULL, sizeof(int32_t) * REQUESTS, &blens));

  tsr_attention_desc prefill = TSR_ATTENTION_DESC_INIT;
  prefill.q = tsr_tensor_make(bq, 0, TSR_DTYPE_F32, 3, (int64_t[]){total, HQ, D});
  prefill.k = tsr_tensor_make(bk, 0, TSR_DTYPE_F32, 3, (int64_t[]){total, HKV, D});
  prefill.v = tsr_tensor_make(bv, 0, TSR_DTYPE_F32, 3, (int64_t[]){total, HKV, D});
  prefill.o = tsr_tensor_make(bo, 0, TSR_DTYPE_F32, 3, (int64_t[]){total, HQ, D});
  prefill.cu_seqlens_q = tsr_tensor_make(bcu, 0, TSR_DTYPE_I32, 1, (int64_t[]){REQUESTS + 1});
  prefill.cu_seqlens_kv = prefill.cu_seqlens_q;
  prefill.max_seqlen_q = prefill.max_seqlen_kv = 40;
  prefill.causal = 1;
  TRY("prefill attention", tsr_attention(queue, &prefill));

  const int64_t cache_shape[4] = {BLOCKS, BLOCK, HKV, D};
  tsr_kv_append_desc append = TSR_KV_APPEND_DESC_INIT;
  append.k_new = prefill.k;
  append.v_new = prefill.v;
  append.k_cache = tsr_tensor_make(bkc, 0, TSR_DTYPE_F32, 4, cache_shape);
  append.v_cache = tsr_tensor_make(bvc, 0, TSR_DTYPE_F32, 4, cache_shape);
  append.slots = tsr_tensor_make(bslots, 0, TSR_DTYPE_I32, 1, (int64_t[]){total});
  TRY("prefill kv_append", tsr_kv_append(queue, &append));

  /* ---- decode: one new row per request per step ---- */
  tsr_buffer *bstep_q, *bstep_kv, *bstep_o;
  float step_q[REQUESTS * HQ * D], step_kv[2 * REQUESTS * HKV * D], step_o[REQUESTS * HQ * D];
  TRY("alloc step q", upload(device, queue, NULL, sizeof step_q, &bstep_q));
  TRY("alloc step kv", upload(device, queue, NULL, sizeof step_kv, &bstep_kv));
  TRY("alloc step o", upload(device, queue, NULL, sizeof step_o, &bstep_o));
  tsr_attention_desc decode = TSR_ATTENTION_DESC_INIT;
  decode.q = tsr_tensor_make(bstep_q, 0, TSR_DTYPE_F32, 4, (int64_t[]){REQUESTS, 1, HQ, D});
  decode.o = tsr_tensor_make(bstep_o, 0, TSR_DTYPE_F32, 4, (int64_t[]){REQUESTS, 1, HQ, D});
  decode.k = append.k_cache;
  decode.v = append.v_cache;
  decode.block_table =
      tsr_tensor_make(btable, 0, TSR_DTYPE_I32, 2, (int64_t[]){REQUESTS, MAX_BLOCKS});
  decode.seqlens_kv = tsr_tensor_make(blens, 0, TSR_DTYPE_I32, 1, (int64_t[]){REQUESTS});
  tsr_kv_append_desc step_append = append;
  step_append.k_new = tsr_tensor_make(bstep_kv, 0, TSR_DTYPE_F32, 3, (int64_t[]){REQUESTS, HKV, D});
  step_append.v_new = step_append.k_new;
  step_append.v_new.offset = sizeof(float) * REQUESTS * HKV * D;
  step_append.slots = tsr_tensor_make(bslots, 0, TSR_DTYPE_I32, 1, (int64_t[]){REQUESTS});

  int32_t lengths[REQUESTS];
  for (int r = 0; r < REQUESTS; r++)
    lengths[r] = prompt[r];
  for (int step = 0; step < steps; step++) {
    int32_t step_slots[REQUESTS];
    for (int r = 0; r < REQUESTS; r++) {
      step_slots[r] = table[r][lengths[r] / BLOCK] * BLOCK + lengths[r] % BLOCK;
      lengths[r]++;
    }
    for (size_t i = 0; i < sizeof step_q / sizeof step_q[0]; i++)
      step_q[i] = next_random(&seed);
    for (size_t i = 0; i < sizeof step_kv / sizeof step_kv[0]; i++)
      step_kv[i] = next_random(&seed);
    TRY("write step", tsr_buffer_write(queue, bstep_q, 0, step_q, sizeof step_q));
    TRY("write step", tsr_buffer_write(queue, bstep_kv, 0, step_kv, sizeof step_kv));
    TRY("write slots", tsr_buffer_write(queue, bslots, 0, step_slots, sizeof step_slots));
    TRY("write lengths", tsr_buffer_write(queue, blens, 0, lengths, sizeof lengths));
    TRY("decode kv_append", tsr_kv_append(queue, &step_append));
    decode.max_seqlen_kv = prompt[2] + step + 1; /* the longest request */
    TRY("decode attention", tsr_attention(queue, &decode));
  }
  TRY("read o", tsr_buffer_read(queue, bstep_o, 0, step_o, sizeof step_o));
  float *k_cache = malloc(sizeof(float) * cache_floats),
        *v_cache = malloc(sizeof(float) * cache_floats);
  TRY("read k cache", tsr_buffer_read(queue, bkc, 0, k_cache, sizeof(float) * cache_floats));
  TRY("read v cache", tsr_buffer_read(queue, bvc, 0, v_cache, sizeof(float) * cache_floats));
  TRY("tsr_queue_finish", tsr_queue_finish(queue));

  double worst = 0.0;
  for (int r = 0; r < REQUESTS; r++)
    for (int h = 0; h < HQ; h++) {
      float want[D];
      host_attend(step_q + (r * HQ + h) * D, k_cache, v_cache, table[r], lengths[r], h, want);
      for (int c = 0; c < D; c++)
        worst = fmax(worst, fabs((double)want[c] - step_o[(r * HQ + h) * D + c]));
    }
  const int ok = worst < 1e-4;
  printf("serving on %s: %d requests, prompts %d/%d/%d, %d decode steps; max error = %.3g (%s)\n",
         info.selector, REQUESTS, prompt[0], prompt[1], prompt[2], steps, worst,
         ok ? "ok" : "too large");
  free(q);
  free(kv);
  free(k_cache);
  free(v_cache);
  tsr_context_destroy(context);
  return ok ? 0 : 1;
}
