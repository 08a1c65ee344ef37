/* SPDX-License-Identifier: Apache-2.0 */
/* One op problem on one device: the tensors it needs laid out in their own
 * buffers (optionally between poisoned guard bands), random inputs rounded to
 * the dtype, the public descriptor that runs it, the fp64 reference of its
 * outputs and the comparison of a device's outputs with that reference.
 * `check`, `bench`, `tune` and `explain` all build their problems here. */
#ifndef TESSERA_TOOLS_PROBLEM_H
#define TESSERA_TOOLS_PROBLEM_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"

#define PROBLEM_MAX_GROUPS 64
#define PROBLEM_MAX_TENSORS 10
#define PROBLEM_MAX_SEQS 64

/* ---- what a problem is: the parameters of each op ---- */

typedef struct gemm_spec {
  int64_t batch; /* 0 or 1: plain 2-D tensors; > 1: rank-3 tensors */
  int64_t m, n, k;
  bool trans_a; /* a is stored [K, M] and viewed transposed */
  bool trans_b; /* b is stored [N, K] and viewed transposed */
  bool share_b; /* one b for the whole batch (batch stride 0) */
  bool has_c;
  bool c_in_place; /* c is d itself (in-place residual) */
  bool has_bias;
  bool out_f32; /* d, c and bias in f32 for f16/bf16 inputs */
  float alpha, beta;
  tsr_activation activation;
  tsr_compute_mode compute; /* f32: strict or tf32 allowed */
} gemm_spec;

typedef struct grouped_gemm_spec {
  int64_t group_count, n, k;
  int64_t group_sizes[PROBLEM_MAX_GROUPS];
  bool has_bias;
  bool out_f32;
  float alpha;
  tsr_activation activation;
} grouped_gemm_spec;

typedef enum attention_kv_layout { KV_DENSE = 0, KV_PACKED = 1, KV_PAGED = 2 } attention_kv_layout;

/* Device-data faults a case plants (the op must fail at tsr_queue_finish
 * naming them, and still be right elsewhere). */
typedef enum planted_fault {
  FAULT_NONE = 0,
  FAULT_BLOCK_TABLE,   /* block_table[1, 0] = the pool's size */
  FAULT_CU_SEQLENS_Q,  /* cu_seqlens_q[2] past total_q: sequences 1 and 2 */
  FAULT_CU_SEQLENS_KV, /* cu_seqlens_kv[1] = -3: sequences 0 and 1 */
  FAULT_SEQLENS_KV,    /* seqlens_kv[0] one past what the layout holds */
  FAULT_MAX_SEQLEN_KV, /* max_seqlen_kv one short of the longest */
  FAULT_KV_SLOT        /* kv_append: slots[3] = num_blocks * block_size */
} planted_fault;

typedef struct kv_append_spec {
  int64_t rows, heads, head_dim; /* k_new [rows, heads, D] */
  int64_t blocks, block_size;    /* the cache [blocks, block_size, heads, D] */
  bool values;                   /* v_new and v_cache too */
  bool strided_new;              /* k_new, v_new as [heads, rows, D] storage (permuted) */
  int64_t skip_every;            /* every n-th slot is -1 (padding); 0: none */
  planted_fault fault;           /* FAULT_NONE or FAULT_KV_SLOT */
} kv_append_spec;

typedef struct attention_spec {
  int64_t batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
  bool bhsd; /* q, k, v, o stored [B, H, S, D]: a BSHD view with permuted strides */
  bool causal;
  int64_t window_left, window_right; /* -1: unbounded */
  bool has_lse;
  float scale; /* 0: 1/sqrt(D) */
  /* Serving forms. Each of the `batch` sequences has its own lengths when
   * packed or given seqlens: q_lens (packed q) and kv_lens (packed or paged
   * keys, or dense keys with seqlens_kv); seq_q / seq_kv are then the
   * dense extents or the longest lengths. */
  bool packed_q;                     /* q, o [total_q, Hq, D] with cu_seqlens_q */
  attention_kv_layout kv_layout;     /* dense, packed (cu_seqlens_kv) or paged */
  bool seqlens_kv;                   /* pass seqlens_kv (always when paged) */
  int64_t q_lens[PROBLEM_MAX_SEQS];  /* packed q */
  int64_t kv_lens[PROBLEM_MAX_SEQS]; /* packed, paged or seqlens_kv */
  int64_t block_size;                /* paged */
  int64_t spare_blocks;              /* paged: blocks of the pool no sequence uses */
  int64_t shared_blocks;             /* paged: every sequence's first blocks are sequence 0's */
  int64_t table_slack;               /* paged: block-table columns past the longest need */
  bool hint_lengths;                 /* pass max_seqlen_q / max_seqlen_kv (else 0) */
  float softcap;
  int64_t lens_lo, lens_hi; /* lengths drawn by attention_skewed_lengths (SHAPE lens=LO-HI) */
  planted_fault fault;
} attention_spec;

/* rmsnorm, layernorm, softmax, swiglu, gelu: tensors of `rank` extents whose
 * last dimension is the row; `pad` extra elements per row in the stride of
 * the second-to-last dimension (padded rows, inputs and outputs alike). */
typedef struct rows_spec {
  int32_t rank;
  int64_t shape[TSR_MAX_RANK];
  int64_t pad;
  bool has_residual, has_residual_out; /* rmsnorm */
  bool has_weight, has_bias;           /* rmsnorm: weight; layernorm: both */
  bool weight_f32;                     /* weight (and bias) in f32 */
  float eps;                           /* norms; 0: the descriptor's default */
  float scale;                         /* softmax; 0: 1 */
  bool masked;                         /* softmax: some -inf inputs, one row all -inf */
  tsr_gelu_approx approximate;         /* gelu */
} rows_spec;

typedef struct rope_spec {
  int64_t batch, seq, heads, head_dim;
  int32_t rotary_dim; /* 0: head_dim */
  tsr_rope_style style;
  int64_t position_offset;
  float theta; /* 0: 10000 */
  bool in_place;
  bool bhsd;
} rope_spec;

typedef struct cross_entropy_spec {
  int64_t rows, vocab, pad;
  int64_t ignore_index;
  int64_t ignore_every; /* every n-th row's target is ignore_index; 0: none */
  bool has_lse;
} cross_entropy_spec;

/* Numeric edge cases among the inputs; where each op puts them is
 * problem.c's special_input. */
typedef enum special_inputs {
  SPECIAL_NONE = 0,
  SPECIAL_NON_FINITE, /* NaN, +inf and -inf at chosen elements */
  SPECIAL_LARGE,      /* large magnitudes: up to 1e30 (3e4 in f16, whose range ends at 65504) */
} special_inputs;

typedef struct problem_spec {
  tsr_op op;
  tsr_dtype dtype;
  special_inputs special;
  /* The case expects NaN outputs: wherever the reference is NaN the device
   * must give NaN too (and elsewhere what it always must). Without this a
   * NaN in the reference fails the case as a broken case; with it, a
   * reference without any NaN does (the special inputs missed). */
  bool nan_outputs;
  union {
    gemm_spec gemm;
    grouped_gemm_spec grouped;
    attention_spec attention;
    rows_spec rows;
    rope_spec rope;
    cross_entropy_spec cross_entropy;
    kv_append_spec kv_append;
  };
} problem_spec;

/* A one-line description of the problem ("1793x17x127 trans_b bias+relu"). */
void problem_describe(const problem_spec *spec, char *buf, size_t capacity);

/* The problem's extents in SHAPE syntax ("1x8x8x1024x1024x64 causal"). */
void problem_format_shape(const problem_spec *spec, char *buf, size_t capacity);

/* Fills `spec` from a SHAPE argument (syntax in problem_shape_help()).
 * Prints the error and returns false when it does not fit the op. */
bool problem_spec_from_shape(problem_spec *spec, tsr_op op, tsr_dtype dtype, const char *shape,
                             bool causal);
/* The same, quiet: why it does not fit goes to `why`. */
bool problem_spec_parse(problem_spec *spec, tsr_op op, tsr_dtype dtype, const char *shape,
                        bool causal, char *why, size_t capacity);
/* Help text on SHAPE syntax, one line per op. */
const char *problem_shape_help(void);

/* Whether an attention problem uses a serving form; the sequences' lengths. */
bool attention_is_serving(const attention_spec *a);
int64_t attention_q_len(const attention_spec *a, int64_t b);
int64_t attention_kv_len(const attention_spec *a, int64_t b);
/* Paged: blocks of the pool, block-table columns, and the block holding
 * block j of sequence b (unused columns hold an out-of-range value). */
int64_t attention_pool_blocks(const attention_spec *a);
int64_t attention_table_columns(const attention_spec *a);
int64_t attention_block_of(const attention_spec *a, int64_t b, int64_t j);
/* Parses the serving options after a SHAPE's extents (":paged=16:lens=512-8192");
 * false with `why` when one does not fit. Appends them in the same syntax. */
bool attention_parse_options(attention_spec *a, const char *options, char *why, size_t capacity);
void attention_format_options(const attention_spec *a, char *buf, size_t capacity);
/* Query/key pairs the masks let through, summed over the sequences (per head). */
double attention_visible_pairs_total(const attention_spec *a);
/* Fills lens[0..count) with a skewed spread over [lo, hi] (a quarter of them
 * long), the same for the same arguments. */
void attention_skewed_lengths(int64_t *lens, int64_t count, int64_t lo, int64_t hi);

/* What tsr_queue_finish's error must say for a planted fault; NULL when the
 * spec plants none. */
const char *problem_expected_fault(const problem_spec *spec, char *buf, size_t capacity);

/* Floating-point operations (multiply-add = 2) of the problem; 0 for ops
 * that are bound by memory. */
double problem_flops(const problem_spec *spec);
/* Bytes an ideal implementation reads and writes. */
double problem_bytes(const problem_spec *spec);

/* ---- a built problem ---- */

typedef enum tensor_role { ROLE_INPUT, ROLE_OUTPUT, ROLE_INOUT } tensor_role;

typedef struct problem_tensor {
  const char *name;
  tensor_role role;
  tsr_tensor view;            /* view.buffer set once allocated */
  int alias;                  /* index of the tensor whose buffer this one is; -1: own */
  size_t buffer_bytes;        /* guard + data + guard */
  unsigned char *image;       /* the buffer's initial contents (owned when alias < 0) */
  unsigned char *output_mask; /* bytes an output may change (own buffers) */
  int64_t numel;
  double *reference;       /* outputs: fp64 reference, dense row-major */
  double *observed;        /* outputs: what the device wrote, after problem_verify */
  double bound;            /* outputs: allowed relative error */
  uint64_t device_address; /* the buffer's device address, when an allocator gave it; else 0 */
  const struct problem_allocator *allocator; /* that allocator (frees the memory) */
} problem_tensor;

typedef union problem_desc {
  tsr_gemm_desc gemm;
  tsr_grouped_gemm_desc grouped;
  tsr_attention_desc attention;
  tsr_rmsnorm_desc rmsnorm;
  tsr_layernorm_desc layernorm;
  tsr_softmax_desc softmax;
  tsr_rope_desc rope;
  tsr_swiglu_desc swiglu;
  tsr_gelu_desc gelu;
  tsr_cross_entropy_desc cross_entropy;
  tsr_kv_append_desc kv_append;
} problem_desc;

typedef struct problem {
  problem_spec spec;
  int tensor_count;
  problem_tensor tensors[PROBLEM_MAX_TENSORS];
  problem_desc desc;
  int64_t group_sizes[PROBLEM_MAX_GROUPS]; /* the grouped descriptor points here */
  char error[512];                         /* why build/verify failed */
} problem;

/* Device memory that the caller allocates itself and wraps as tessera
 * buffers (bench: so that a vendor library can run on the very same
 * buffers). create returns a wrapped buffer and its device address;
 * release frees the memory after the wrapper is gone. */
typedef struct problem_allocator {
  tsr_status (*create)(void *user, tsr_device *device, size_t bytes, tsr_buffer **buffer,
                       uint64_t *address);
  void (*release)(void *user, uint64_t address);
  void *user;
} problem_allocator;

typedef struct problem_build_options {
  size_t guard_bytes;                 /* poisoned bytes before and after each tensor */
  bool keep_images;                   /* false: free host copies after upload (bench) */
  const problem_allocator *allocator; /* NULL: tsr_buffer_create */
} problem_build_options;

/* Lays the problem out, allocates its buffers on `device`, fills the inputs
 * from `seed` and uploads everything through `queue` (finished on return).
 * On failure the error is in p->error (and tsr_last_error()); call
 * problem_destroy either way. */
tsr_status problem_build(problem *p, const problem_spec *spec, tsr_device *device, tsr_queue *queue,
                         uint64_t seed, const problem_build_options *options);
/* The same layout and the same input values as problem_build with `seed`,
 * held in host memory only (no device, no guard bands): for timing another
 * library on exactly the inputs a device was timed on, in another process.
 * Call problem_destroy when done. */
tsr_status problem_build_host(problem *p, const problem_spec *spec, uint64_t seed);
/* Where tensor `name`'s elements live in host memory: the host image when
 * the problem has one, else its mapped buffer (host-visible devices, after
 * the queue finished); *bytes covers every element the view reaches. False
 * when there is no such tensor or the buffer cannot be mapped. */
bool problem_host_data(problem *p, const char *name, void **data, size_t *bytes);
/* Computes the fp64 reference of every output (needs keep_images). */
tsr_status problem_reference(problem *p);
/* Queues the op through the public API (variant may be NULL: automatic). */
tsr_status problem_run(problem *p, tsr_queue *queue, const char *variant);
/* Writes the initial contents back (outputs NaN again), finished on return. */
tsr_status problem_reset(problem *p, tsr_queue *queue);
/* The descriptor for tsr_op_variants / explain / tuning (variant NULL). */
const void *problem_descriptor(problem *p);

typedef struct verify_result {
  bool passed;
  double error;      /* largest normwise relative error over the outputs */
  double bound;      /* the bound of the output with the largest error/bound ratio */
  char message[512]; /* the first problem found; "" when passed */
} verify_result;

/* Reads every buffer back and checks guard bands, untouched inputs and
 * padding, finiteness and the error of each output against its reference.
 * Keeps what the device wrote in tensors[].observed. */
tsr_status problem_verify(problem *p, tsr_queue *queue, verify_result *result);
/* Compares the observed outputs of two verified problems of the same spec
 * with each other, relative to the reference, against the same bounds. */
void problem_compare(const problem *a, const problem *b, verify_result *result);

void problem_destroy(problem *p);

#endif /* TESSERA_TOOLS_PROBLEM_H */
