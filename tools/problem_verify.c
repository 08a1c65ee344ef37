/* SPDX-License-Identifier: Apache-2.0 */
/* A built problem's fp64 reference, the error bound of each output, and the
 * comparison of what a device wrote (and of two devices' outputs) with it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "problem_internal.h"
#include "tessera/reference.h"

/* "name[i,j,k]" for the linear index of a view. */
static void format_index(char *buf, size_t capacity, const char *name, const tsr_tensor *view,
                         int64_t linear) {
  int64_t index[TSR_MAX_RANK] = {0};
  for (int32_t i = view->rank - 1; i >= 0; i--) {
    index[i] = linear % view->shape[i];
    linear /= view->shape[i];
  }
  snprintf(buf, capacity, "%s[", name);
  for (int32_t i = 0; i < view->rank; i++)
    problem_append(buf, capacity, "%s%lld", i ? "," : "", (long long)index[i]);
  problem_append(buf, capacity, "]");
}

/* ------------------------------------------------------------------------ */
/* Reference and error bounds                                                */
/* ------------------------------------------------------------------------ */

/* The host copy of a buffer's whole contents: the image of the tensor that
 * owns it (aliases share their owner's buffer). */
static const void *host_copy_of(void *user, const tsr_buffer *buffer) {
  const problem *p = user;
  for (int i = 0; i < p->tensor_count; i++)
    if (p->tensors[i].alias < 0 && p->tensors[i].view.buffer == buffer)
      return p->tensors[i].image;
  return NULL;
}

static double *reference_of(problem *p, const char *name) {
  int i = problem_find_tensor(p, name);
  return i < 0 ? NULL : p->tensors[i].reference;
}

/* The core normalises the descriptor (tsr_reference_prepare), so the oracle
 * sees exactly the problem the plugin sees. */
tsr_status problem_reference(problem *p) {
  if (p->tensor_count == 0 || p->tensors[0].image == NULL)
    return TSR_ERROR_INVALID_VALUE; /* built without keep_images */
  tsr_device *device;
  tsr_status status = tsr_buffer_device(p->tensors[0].view.buffer, &device);
  if (status != TSR_OK)
    return status;
  union {
    tsr_gemm_args gemm;
    tsr_grouped_gemm_args grouped;
    tsr_attention_args attention;
    tsr_rmsnorm_args rmsnorm;
    tsr_layernorm_args layernorm;
    tsr_softmax_args softmax;
    tsr_rope_args rope;
    tsr_swiglu_args swiglu;
    tsr_gelu_args gelu;
    tsr_cross_entropy_args cross_entropy;
    tsr_kv_append_args kv_append;
  } args;
  status = tsr_reference_prepare(device, p->spec.op, problem_descriptor(p), host_copy_of, p, &args,
                                 sizeof args);
  if (status != TSR_OK)
    return status;
  switch (p->spec.op) {
  case TSR_OP_GEMM:
    return tsr_reference_gemm(&args.gemm, reference_of(p, "d"));
  case TSR_OP_GROUPED_GEMM:
    return tsr_reference_grouped_gemm(&args.grouped, reference_of(p, "d"));
  case TSR_OP_ATTENTION: {
    /* Rows no sequence owns (or whose offsets are at fault) keep the NaN the
     * outputs start with. */
    for (int i = 0; i < p->tensor_count; i++)
      if (p->tensors[i].reference)
        for (int64_t e = 0; e < p->tensors[i].numel; e++)
          p->tensors[i].reference[e] = NAN;
    return tsr_reference_attention(&args.attention, reference_of(p, "o"), reference_of(p, "lse"));
  }
  case TSR_OP_RMSNORM:
    return tsr_reference_rmsnorm(&args.rmsnorm, reference_of(p, "y"),
                                 reference_of(p, "residual_out"));
  case TSR_OP_LAYERNORM:
    return tsr_reference_layernorm(&args.layernorm, reference_of(p, "y"));
  case TSR_OP_SOFTMAX:
    return tsr_reference_softmax(&args.softmax, reference_of(p, "y"));
  case TSR_OP_ROPE:
    return tsr_reference_rope(&args.rope, reference_of(p, p->spec.rope.in_place ? "x" : "y"));
  case TSR_OP_SWIGLU:
    return tsr_reference_swiglu(&args.swiglu, reference_of(p, "y"));
  case TSR_OP_GELU:
    return tsr_reference_gelu(&args.gelu, reference_of(p, "y"));
  case TSR_OP_CROSS_ENTROPY:
    return tsr_reference_cross_entropy(&args.cross_entropy, reference_of(p, "loss"),
                                       reference_of(p, "lse"));
  case TSR_OP_KV_APPEND: {
    tsr_status status = tsr_reference_kv_append(&args.kv_append, reference_of(p, "k_cache"),
                                                reference_of(p, "v_cache"));
    return status == TSR_ERROR_INVALID_VALUE && p->spec.kv_append.fault ? TSR_OK : status;
  }
  default:
    return TSR_ERROR_INVALID_VALUE;
  }
}

/* Error bounds. A correct kernel's normwise relative error comes from
 * rounding its output (a few u_out, including intermediates rounded to the
 * dtype such as attention probabilities), from f32 accumulation over K terms
 * (grows like sqrt(K) for random data), and from single-precision
 * transcendental functions (exp, tanh, erf, rsqrt: a few ulp, also fast
 * hardware versions). The constants leave a margin of several times what a
 * correct kernel shows, while a wrong mask, a missing bias or an off-by-one
 * position changes results by far more (tessera check's self-test shows
 * both sides). */
#define BOUND_OUTPUT 6.0
#define BOUND_ACCUMULATION 8.0
#define BOUND_TRANSCENDENTAL 16.0
/* Elementwise, a value may differ from the reference by this many bounds
 * times (|reference| + rms of the output): catches one wrong edge element
 * that the normwise error of a large output would dilute. */
#define BOUND_ELEMENTWISE 16.0

static double bound_for(tsr_dtype out, double accumulation, bool transcendental, double extra) {
  const double u32 = ldexp(1.0, -24);
  return BOUND_OUTPUT * dtype_unit_roundoff(out) + BOUND_ACCUMULATION * u32 * sqrt(accumulation) +
         (transcendental ? BOUND_TRANSCENDENTAL * ldexp(1.0, -22) : 0.0) + extra;
}

static bool activation_transcendental(tsr_activation activation) {
  return activation == TSR_ACT_GELU_TANH || activation == TSR_ACT_GELU_ERF ||
         activation == TSR_ACT_SILU;
}

static double output_bound(const problem *p, const problem_tensor *t) {
  tsr_dtype dt = p->spec.dtype;
  switch (p->spec.op) {
  case TSR_OP_GEMM:
    return bound_for(t->view.dtype, (double)p->spec.gemm.k,
                     activation_transcendental(p->spec.gemm.activation), 0.0);
  case TSR_OP_GROUPED_GEMM:
    return bound_for(t->view.dtype, (double)p->spec.grouped.k,
                     activation_transcendental(p->spec.grouped.activation), 0.0);
  case TSR_OP_ATTENTION: {
    const attention_spec *a = &p->spec.attention;
    if (strcmp(t->name, "lse") == 0) {
      /* Kernels may fold the scale into q in the input dtype before the
       * product, so lse is held to the dtype's precision, not f32's. */
      return bound_for(dt, (double)a->head_dim, true, 0.0);
    }
    /* softcap's tanh is one more transcendental step on each score */
    return bound_for(dt, (double)(a->seq_kv + a->head_dim), true, 0.0) *
           (a->softcap != 0.0f ? 2.0 : 1.0);
  }
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX: {
    if (strcmp(t->name, "residual_out") == 0)
      return bound_for(dt, 1.0, false, 0.0);
    const rows_spec *r = &p->spec.rows;
    return bound_for(dt, (double)r->shape[r->rank - 1], true, 0.0);
  }
  case TSR_OP_ROPE: {
    /* Angles are position * theta^(-2i/d) in f32: their absolute error grows
     * with the position, and so does the output's. */
    const rope_spec *r = &p->spec.rope;
    double max_position = (double)(r->position_offset + r->seq);
    return bound_for(dt, 1.0, true, 8.0 * ldexp(1.0, -24) * max_position);
  }
  case TSR_OP_SWIGLU:
  case TSR_OP_GELU:
    return bound_for(dt, 1.0, true, 0.0);
  case TSR_OP_CROSS_ENTROPY:
    return bound_for(TSR_DTYPE_F32, (double)p->spec.cross_entropy.vocab, true, 0.0);
  case TSR_OP_KV_APPEND:
    return ldexp(1.0, -60); /* a copy: exact (a bound above 0 keeps ratios finite) */
  default:
    return 0.0;
  }
}

/* ------------------------------------------------------------------------ */
/* Verification                                                              */
/* ------------------------------------------------------------------------ */

/* Describes a changed byte outside the outputs' elements. */
static void describe_stray_write(const problem_tensor *t, size_t guard, size_t byte,
                                 unsigned char before, unsigned char after, char *buf,
                                 size_t capacity) {
  size_t data_end = t->buffer_bytes - guard;
  if (byte < guard)
    snprintf(buf, capacity, "guard band before %s overwritten at byte -%zu (0x%02x -> 0x%02x)",
             t->name, guard - byte, before, after);
  else if (byte >= data_end)
    snprintf(buf, capacity, "guard band after %s overwritten at byte +%zu (0x%02x -> 0x%02x)",
             t->name, byte - data_end, before, after);
  else if (t->role == ROLE_INPUT)
    snprintf(buf, capacity, "input %s modified at byte %zu of its data (0x%02x -> 0x%02x)", t->name,
             byte - guard, before, after);
  else
    snprintf(buf, capacity, "padding between elements of %s overwritten at byte %zu", t->name,
             byte - guard);
}

/* Normwise and elementwise error of `observed` against the reference over
 * its finite elements; an infinite reference value must be matched exactly,
 * a NaN one by a NaN where the case expects NaN outputs (else the case is
 * broken), and any other non-finite value fails. */
static bool output_error(const problem_tensor *t, const double *observed, bool nan_outputs,
                         double *error, char *message, size_t capacity) {
  double diff2 = 0.0, ref2 = 0.0;
  int64_t finite = 0;
  for (int64_t e = 0; e < t->numel; e++) {
    double r = t->reference[e], o = observed[e];
    char where[96];
    if (isnan(r)) {
      if (nan_outputs && isnan(o))
        continue;
      format_index(where, sizeof where, t->name, &t->view, e);
      if (nan_outputs)
        snprintf(message, capacity, "%s = %.6g, expected NaN", where, o);
      else
        snprintf(message, capacity,
                 "the reference of %s is NaN but the case expects no NaN outputs (a broken "
                 "case)",
                 where);
      *error = INFINITY;
      return false;
    }
    if (isinf(r)) {
      if (o != r) {
        format_index(where, sizeof where, t->name, &t->view, e);
        snprintf(message, capacity, "%s = %.6g, expected %.6g", where, o, r);
        *error = INFINITY;
        return false;
      }
      continue;
    }
    if (!isfinite(o)) {
      format_index(where, sizeof where, t->name, &t->view, e);
      snprintf(message, capacity, "%s = %.6g (not finite), expected %.6g", where, o, r);
      *error = INFINITY;
      return false;
    }
    diff2 += (o - r) * (o - r);
    ref2 += r * r;
    finite++;
  }
  *error = ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(diff2);
  if (*error > t->bound) {
    snprintf(message, capacity, "%s: relative error %.3g > bound %.3g", t->name, *error, t->bound);
    /* Name the worst element too: it usually points at the bug. */
    double worst = -1.0;
    int64_t worst_index = 0;
    for (int64_t e = 0; e < t->numel; e++) {
      double d = fabs(observed[e] - t->reference[e]);
      if (isfinite(t->reference[e]) && d > worst) {
        worst = d;
        worst_index = e;
      }
    }
    char where[96];
    format_index(where, sizeof where, t->name, &t->view, worst_index);
    problem_append(message, capacity, "; worst %s = %.6g, expected %.6g", where,
                   observed[worst_index], t->reference[worst_index]);
    return false;
  }
  double rms = finite > 0 ? sqrt(ref2 / (double)finite) : 0.0;
  for (int64_t e = 0; e < t->numel; e++) {
    double r = t->reference[e];
    if (!isfinite(r))
      continue;
    if (fabs(observed[e] - r) > BOUND_ELEMENTWISE * t->bound * (fabs(r) + rms)) {
      char where[96];
      format_index(where, sizeof where, t->name, &t->view, e);
      snprintf(message, capacity,
               "%s = %.6g, expected %.6g (elementwise error beyond %.0f x bound; normwise "
               "%.3g within %.3g)",
               where, observed[e], r, BOUND_ELEMENTWISE, *error, t->bound);
      return false;
    }
  }
  return true;
}

static bool reference_has_nan(const problem *p) {
  for (int i = 0; i < p->tensor_count; i++) {
    const problem_tensor *t = &p->tensors[i];
    for (int64_t e = 0; t->role != ROLE_INPUT && t->reference && e < t->numel; e++)
      if (isnan(t->reference[e]))
        return true;
  }
  return false;
}

tsr_status problem_verify(problem *p, tsr_queue *queue, verify_result *result) {
  memset(result, 0, sizeof *result);
  result->passed = true;
  if (p->tensor_count == 0 || p->tensors[0].image == NULL) {
    snprintf(p->error, sizeof p->error, "problem_verify needs a problem built with keep_images");
    return TSR_ERROR_INVALID_VALUE;
  }
  size_t guard = p->tensors[0].view.offset;
  double worst_ratio = -1.0;
  for (int i = 0; i < p->tensor_count; i++) {
    problem_tensor *t = &p->tensors[i];
    unsigned char *after = malloc(t->buffer_bytes);
    if (after == NULL) {
      snprintf(p->error, sizeof p->error, "out of host memory reading %s back", t->name);
      return TSR_ERROR_OUT_OF_MEMORY;
    }
    tsr_status status = tsr_buffer_read(queue, t->view.buffer, 0, after, t->buffer_bytes);
    if (status != TSR_OK) {
      free(after);
      return problem_fail(p, status, "tsr_buffer_read");
    }
    /* Every byte that is not an output element must be as written. */
    for (size_t b = 0; b < t->buffer_bytes && result->passed; b++) {
      if ((t->output_mask == NULL || !t->output_mask[b]) && after[b] != t->image[b]) {
        describe_stray_write(t, guard, b, t->image[b], after[b], result->message,
                             sizeof result->message);
        result->passed = false;
        result->error = INFINITY;
      }
    }
    if (t->role != ROLE_INPUT) {
      for (int64_t e = 0; e < t->numel; e++)
        t->observed[e] = dtype_load(after + guard, t->view.dtype, problem_view_offset(&t->view, e));
      t->bound = output_bound(p, t);
      if (result->passed) {
        double error = 0.0;
        bool ok = output_error(t, t->observed, p->spec.nan_outputs, &error, result->message,
                               sizeof result->message);
        double ratio = error / t->bound;
        if (!ok || ratio > worst_ratio) {
          worst_ratio = ratio;
          result->error = error;
          result->bound = t->bound;
        }
        if (!ok)
          result->passed = false;
      }
    }
    free(after);
  }
  if (p->spec.nan_outputs && result->passed && !reference_has_nan(p)) {
    snprintf(result->message, sizeof result->message,
             "the case expects NaN outputs but the reference has none (its special inputs "
             "missed)");
    result->passed = false;
    result->error = INFINITY;
  }
  return TSR_OK;
}

void problem_compare(const problem *a, const problem *b, verify_result *result) {
  memset(result, 0, sizeof *result);
  result->passed = true;
  double worst_ratio = -1.0;
  for (int i = 0; i < a->tensor_count && i < b->tensor_count; i++) {
    const problem_tensor *ta = &a->tensors[i], *tb = &b->tensors[i];
    if (ta->role == ROLE_INPUT || ta->observed == NULL || tb->observed == NULL)
      continue;
    /* The difference between the devices, on the reference's scale. */
    double diff2 = 0.0, ref2 = 0.0, worst = -1.0;
    int64_t worst_index = 0;
    bool mismatch = false;
    for (int64_t e = 0; e < ta->numel; e++) {
      double x = ta->observed[e], y = tb->observed[e];
      if (x == y)
        continue; /* includes equal infinities */
      if (isnan(x) && isnan(y) && isnan(ta->reference[e]))
        continue; /* both NaN where NaN is right (verify checked that it is expected) */
      if (!isfinite(x) || !isfinite(y)) {
        mismatch = true;
        worst_index = e;
        break;
      }
      diff2 += (x - y) * (x - y);
      if (fabs(x - y) > worst) {
        worst = fabs(x - y);
        worst_index = e;
      }
    }
    for (int64_t e = 0; e < ta->numel; e++)
      if (isfinite(ta->reference[e]))
        ref2 += ta->reference[e] * ta->reference[e];
    double error = mismatch ? INFINITY : (ref2 > 0.0 ? sqrt(diff2 / ref2) : sqrt(diff2));
    if (error / ta->bound > worst_ratio) {
      worst_ratio = error / ta->bound;
      result->error = error;
      result->bound = ta->bound;
    }
    if (result->passed && error > ta->bound) {
      char where[96];
      format_index(where, sizeof where, ta->name, &ta->view, worst_index);
      snprintf(result->message, sizeof result->message,
               "devices disagree on %s: relative difference %.3g > bound %.3g; worst %s = %.6g "
               "vs %.6g (reference %.6g)",
               ta->name, error, ta->bound, where, ta->observed[worst_index],
               tb->observed[worst_index], ta->reference[worst_index]);
      result->passed = false;
    }
  }
}
