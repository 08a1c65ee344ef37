/* SPDX-License-Identifier: Apache-2.0 */
/* Cooperative-matrix pipelines. The coopmat shaders (gemm_coopmat.comp,
 * attention_coopmat.comp) are compiled by glslc with GL_NV_cooperative_matrix
 * (Debian 12's glslang has no GL_KHR_cooperative_matrix); on the H100 the
 * NVIDIA driver runs the NV extension at FMA speed, so where the device lists
 * the 16x8x16 shape under VK_KHR_cooperative_matrix the SPIR-V is rewritten
 * here to SPV_KHR_cooperative_matrix at load time (once per process) and the
 * pipeline built from the rewritten words. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "configs.h"
#include "vulkan_internal.h"

/* SPIR-V opcodes and enumerants the rewrite touches. */
enum {
  SPV_OP_EXTENSION = 10,
  SPV_OP_CAPABILITY = 17,
  SPV_OP_TYPE_INT = 21,
  SPV_OP_TYPE_FLOAT = 22,
  SPV_OP_CONSTANT_TRUE = 41,
  SPV_OP_CONSTANT_FALSE = 42,
  SPV_OP_CONSTANT = 43,
  SPV_CAP_COOPMAT_NV = 5357,
  SPV_CAP_COOPMAT_KHR = 6022,
  SPV_OP_TYPE_COOPMAT_NV = 5358,
  SPV_OP_LOAD_NV = 5359,
  SPV_OP_STORE_NV = 5360,
  SPV_OP_MULADD_NV = 5361,
  SPV_OP_LENGTH_NV = 5362,
  SPV_OP_TYPE_COOPMAT_KHR = 4456,
  SPV_OP_LOAD_KHR = 4457,
  SPV_OP_STORE_KHR = 4458,
  SPV_OP_MULADD_KHR = 4459,
  SPV_OP_LENGTH_KHR = 4460
};

static uint32_t spv_word(uint32_t op, uint32_t count) {
  return count << 16 | op;
}

/* Rewrites the SPIR-V of gemm_coopmat.comp (GL_NV_cooperative_matrix) into
 * SPV_KHR_cooperative_matrix: capability and extension renamed, each NV
 * matrix type given the KHR use its shape implies (f32: accumulator; f16
 * 16 columns: A, 8 columns: B, which is why the shader multiplies 16x8x16),
 * loads and stores with a layout constant in place of the column-major bool
 * (and their operands reordered), multiply-add and length renumbered. The
 * instructions are otherwise the same, so one glslc build serves both
 * extensions. Returns a malloc'd module, or NULL for anything it does not
 * map. */
static uint32_t *coopmat_nv_to_khr(const uint32_t *in, size_t words, size_t *out_words) {
  if (words < 5 || in[0] != 0x07230203u)
    return NULL;
  uint32_t bound = in[3];
  /* Values of 32-bit integer constants, widths of float types, bool
   * constants (1 true, 2 false), indexed by id. */
  uint32_t *value = calloc(bound, sizeof *value);
  uint8_t *kind = calloc(bound, 1);
  /* The rewrite adds three constants (12 words) and a word per matrix type. */
  size_t types = 0;
  for (size_t i = 5; i < words && in[i] >> 16; i += in[i] >> 16)
    types += (in[i] & 0xffffu) == SPV_OP_TYPE_COOPMAT_NV;
  uint32_t *out = malloc((words + 12 + types) * sizeof *out);
  if (!value || !kind || !out) {
    free(value);
    free(kind);
    free(out);
    return NULL;
  }
  enum { KIND_CONST = 1, KIND_TRUE, KIND_FALSE, KIND_F16, KIND_F32 };
  uint32_t uint_type = 0;
  for (size_t i = 5; i < words;) {
    uint32_t op = in[i] & 0xffffu, n = in[i] >> 16;
    if (n == 0 || i + n > words)
      goto fail;
    if (op == SPV_OP_TYPE_INT && n == 4 && in[i + 2] == 32 && in[i + 3] == 0 && !uint_type)
      uint_type = in[i + 1];
    else if (op == SPV_OP_TYPE_FLOAT && n == 3 && in[i + 1] < bound)
      kind[in[i + 1]] = in[i + 2] == 16 ? KIND_F16 : in[i + 2] == 32 ? KIND_F32 : 0;
    else if (op == SPV_OP_CONSTANT && n == 4 && in[i + 2] < bound) {
      kind[in[i + 2]] = KIND_CONST;
      value[in[i + 2]] = in[i + 3];
    } else if ((op == SPV_OP_CONSTANT_TRUE || op == SPV_OP_CONSTANT_FALSE) && n == 3 &&
               in[i + 2] < bound)
      kind[in[i + 2]] = op == SPV_OP_CONSTANT_TRUE ? KIND_TRUE : KIND_FALSE;
    i += n;
  }
  if (!uint_type)
    goto fail;
  /* Three new constants: 0, 1, 2 (row-major / matrix A, column-major /
   * matrix B, accumulator). */
  uint32_t c[3] = {bound, bound + 1, bound + 2};
  memcpy(out, in, 5 * sizeof *out);
  out[3] = bound + 3;
  size_t o = 5;
  bool constants_out = false;
  for (size_t i = 5; i < words;) {
    uint32_t op = in[i] & 0xffffu, n = in[i] >> 16;
    const uint32_t *w = in + i;
    i += n;
    if (op == SPV_OP_CAPABILITY && n == 2 && w[1] == SPV_CAP_COOPMAT_NV) {
      out[o++] = w[0];
      out[o++] = SPV_CAP_COOPMAT_KHR;
    } else if (op == SPV_OP_EXTENSION && n == 8 &&
               memcmp(w + 1, "SPV_NV_cooperative_matrix", 26) == 0) {
      out[o++] = w[0];
      memset(out + o, 0, 7 * sizeof *out);
      memcpy(out + o, "SPV_KHR_cooperative_matrix", 27);
      o += 7;
    } else if (op == SPV_OP_TYPE_COOPMAT_NV && n == 6) {
      if (!constants_out) {
        for (uint32_t k = 0; k < 3; k++) {
          out[o++] = spv_word(SPV_OP_CONSTANT, 4);
          out[o++] = uint_type;
          out[o++] = c[k];
          out[o++] = k;
        }
        constants_out = true;
      }
      uint32_t component = w[2], rows = w[4], cols = w[5];
      if (component >= bound || rows >= bound || cols >= bound || kind[rows] != KIND_CONST ||
          kind[cols] != KIND_CONST || value[rows] != 16)
        goto fail;
      uint32_t use;
      if (kind[component] == KIND_F32)
        use = 2;
      else if (kind[component] == KIND_F16 && value[cols] == 16)
        use = 0;
      else if (kind[component] == KIND_F16 && value[cols] == 8)
        use = 1;
      else
        goto fail;
      out[o++] = spv_word(SPV_OP_TYPE_COOPMAT_KHR, 7);
      memcpy(out + o, w + 1, 5 * sizeof *out);
      o += 5;
      out[o++] = c[use];
    } else if ((op == SPV_OP_LOAD_NV && n >= 6) || (op == SPV_OP_STORE_NV && n >= 5)) {
      /* load: type result pointer stride colmajor [access...];
       * store: pointer object stride colmajor [access...]. KHR: the layout
       * before the stride. */
      size_t at = op == SPV_OP_LOAD_NV ? 4 : 3;
      uint32_t stride = w[at], major = w[at + 1];
      if (major >= bound || (kind[major] != KIND_TRUE && kind[major] != KIND_FALSE))
        goto fail;
      out[o++] = spv_word(op == SPV_OP_LOAD_NV ? SPV_OP_LOAD_KHR : SPV_OP_STORE_KHR, n);
      memcpy(out + o, w + 1, (at - 1) * sizeof *out);
      o += at - 1;
      out[o++] = c[kind[major] == KIND_TRUE ? 1 : 0];
      out[o++] = stride;
      memcpy(out + o, w + at + 2, (n - at - 2) * sizeof *out);
      o += n - at - 2;
    } else if (op == SPV_OP_MULADD_NV || op == SPV_OP_LENGTH_NV) {
      out[o++] = spv_word(op == SPV_OP_MULADD_NV ? SPV_OP_MULADD_KHR : SPV_OP_LENGTH_KHR, n);
      memcpy(out + o, w + 1, (n - 1) * sizeof *out);
      o += n - 1;
    } else {
      memcpy(out + o, w, n * sizeof *out);
      o += n;
    }
  }
  free(value);
  free(kind);
  *out_words = o;
  return out;
fail:
  free(value);
  free(kind);
  free(out);
  return NULL;
}

/* The KHR forms of the coopmat builds, rewritten once per process and kept
 * (a few hundred KB at most; the blobs they come from live as long). */
typedef struct khr_code {
  struct khr_code *next;
  char name[64]; /* the pipeline cache key: "<embedded name>_khr" */
  uint32_t *code;
  size_t words;
} khr_code;

static khr_code *khr_codes;
static pthread_mutex_t khr_codes_lock = PTHREAD_MUTEX_INITIALIZER;

/* The KHR form of embedded shader `name` with specialisation constants
 * spec[0..n). */
static tsr_status matrix_pipeline_khr(vulkan_device *device, const char *name, const uint32_t *spec,
                                      uint32_t n_spec, const vulkan_pipeline **out) {
  pthread_mutex_lock(&khr_codes_lock);
  khr_code *found = NULL;
  for (khr_code *e = khr_codes; e && !found; e = e->next)
    if (strncmp(e->name, name, strlen(name)) == 0 && strcmp(e->name + strlen(name), "_khr") == 0)
      found = e;
  if (!found) {
    const vulkan_shader_blob *blob = vulkan_shader_find(name);
    size_t words = 0;
    uint32_t *code = blob ? coopmat_nv_to_khr(blob->code, blob->bytes / 4, &words) : NULL;
    found = code ? calloc(1, sizeof *found) : NULL;
    if (found) {
      snprintf(found->name, sizeof found->name, "%s_khr", name);
      found->code = code;
      found->words = words;
      found->next = khr_codes;
      khr_codes = found;
    } else {
      free(code);
    }
  }
  pthread_mutex_unlock(&khr_codes_lock);
  if (!found) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BACKEND,
                           "%s: no KHR cooperative-matrix form", name);
  }
  vulkan_shader_blob blob = {found->name, found->code, found->words * 4};
  return vulkan_pipeline_get_code(device, &blob, spec, n_spec, 0, out);
}

/* A coopmat build's pipeline on the device's route: the KHR form where the
 * device lists the shape there (TESSERA_VULKAN_COOPMAT_NV keeps the NV
 * build), else the NV build in subgroups of 32. */
tsr_status vulkan_coopmat_pipeline(vulkan_device *device, const char *name, const uint32_t *spec,
                                   uint32_t n_spec, const vulkan_pipeline **out) {
  const vulkan_device_props *props = device->props;
  if (vulkan_coopmat_route_of(props) == VULKAN_COOPMAT_KHR && !device->coopmat_force_nv)
    return matrix_pipeline_khr(device, name, spec, n_spec, out);
  return vulkan_pipeline_get(device, name, spec, n_spec,
                             props->subgroup_min != props->subgroup_max ? 32 : 0, out);
}
