/* SPDX-License-Identifier: Apache-2.0 */
/* Tuning-database keys (shape class, dtype, device key) and writing rows
 * (choose.c reads them through tuning_db.c). The database is plain text, one
 * row per line:
 *     device-key  op  dtype  shape-class  variant
 * '#' starts a comment; a shape-class of '*' matches every problem. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Smallest power of two >= x: problems of similar size share a row. */
static long long bucket(int64_t x) {
  long long b = 1;
  while (b < x && b < (1LL << 40))
    b <<= 1;
  return b;
}

static int64_t numel(const tsr_plugin_tensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++)
    n *= t->shape[i];
  return n;
}

void tsr__shape_class(const tsr__op_args *args, char *buf, size_t capacity) {
  switch (args->op) {
  case TSR_OP_GEMM: {
    const tsr_gemm_args *g = &args->u.gemm;
    snprintf(buf, capacity, "m%lldn%lldk%lld", bucket(g->d.shape[1]), bucket(g->d.shape[2]),
             bucket(g->a.shape[2]));
    break;
  }
  case TSR_OP_GROUPED_GEMM: {
    const tsr_grouped_gemm_args *g = &args->u.grouped_gemm;
    int64_t per_group = g->group_count ? g->a.shape[0] / g->group_count : 0;
    snprintf(buf, capacity, "g%lldm%lldn%lldk%lld", bucket(g->group_count), bucket(per_group),
             bucket(g->d.shape[1]), bucket(g->a.shape[1]));
    break;
  }
  case TSR_OP_ATTENTION: {
    const tsr_attention_args *a = &args->u.attention;
    if (tsr_plugin_attention_is_serving(a)) {
      /* the layout (packed q, packed or paged keys with the block size), the
       * length bounds and the batch: decode and prefill fall apart */
      const int32_t qd = a->q.rank - 1;
      char keys[24] = "";
      if (a->block_table.buffer)
        snprintf(keys, sizeof keys, "p%lld", (long long)a->k.shape[1]);
      else if (a->cu_seqlens_kv.buffer)
        snprintf(keys, sizeof keys, "v");
      snprintf(buf, capacity, "d%lldb%lldsq%lldskv%lld%s%s%s%s", (long long)a->q.shape[qd],
               bucket(a->batch), bucket(a->max_seqlen_q), bucket(a->max_seqlen_kv),
               a->cu_seqlens_q.buffer ? "v" : "", keys, a->causal ? "c" : "",
               a->softcap != 0.0f ? "s" : "");
      break;
    }
    snprintf(buf, capacity, "d%lldsq%lldskv%lld%s", (long long)a->q.shape[3], bucket(a->q.shape[1]),
             bucket(a->k.shape[1]), a->causal ? "c" : "");
    break;
  }
  case TSR_OP_RMSNORM:
  case TSR_OP_LAYERNORM:
  case TSR_OP_SOFTMAX:
  case TSR_OP_CROSS_ENTROPY: {
    const tsr_plugin_tensor *x = args->op == TSR_OP_RMSNORM     ? &args->u.rmsnorm.x
                                 : args->op == TSR_OP_LAYERNORM ? &args->u.layernorm.x
                                 : args->op == TSR_OP_SOFTMAX   ? &args->u.softmax.x
                                                                : &args->u.cross_entropy.logits;
    snprintf(buf, capacity, "r%lldn%lld", bucket(tsr_plugin_row_count(x)),
             bucket(x->shape[x->rank - 1]));
    break;
  }
  case TSR_OP_ROPE:
    snprintf(buf, capacity, "n%lldd%d", bucket(numel(&args->u.rope.x)),
             (int)args->u.rope.x.shape[3]);
    break;
  case TSR_OP_SWIGLU:
    snprintf(buf, capacity, "n%lld", bucket(numel(&args->u.swiglu.y)));
    break;
  case TSR_OP_GELU:
    snprintf(buf, capacity, "n%lld", bucket(numel(&args->u.gelu.y)));
    break;
  case TSR_OP_KV_APPEND:
    snprintf(buf, capacity, "t%lldn%lld", bucket(args->u.kv_append.k_new.shape[0]),
             bucket(args->u.kv_append.k_new.shape[1] * args->u.kv_append.k_new.shape[2]));
    break;
  default:
    snprintf(buf, capacity, "*");
  }
}

const char *tsr__op_dtype_name(const tsr__op_args *args) {
  int32_t dtype = TSR_DTYPE_INVALID;
  switch (args->op) {
  case TSR_OP_GEMM:
    if (args->u.gemm.a.dtype == TSR_DTYPE_F32 && args->u.gemm.compute == TSR_COMPUTE_TF32)
      return "tf32";
    dtype = args->u.gemm.a.dtype;
    break;
  case TSR_OP_GROUPED_GEMM:
    if (args->u.grouped_gemm.a.dtype == TSR_DTYPE_F32 &&
        args->u.grouped_gemm.compute == TSR_COMPUTE_TF32)
      return "tf32";
    dtype = args->u.grouped_gemm.a.dtype;
    break;
  case TSR_OP_ATTENTION:
    dtype = args->u.attention.q.dtype;
    break;
  case TSR_OP_RMSNORM:
    dtype = args->u.rmsnorm.x.dtype;
    break;
  case TSR_OP_LAYERNORM:
    dtype = args->u.layernorm.x.dtype;
    break;
  case TSR_OP_SOFTMAX:
    dtype = args->u.softmax.x.dtype;
    break;
  case TSR_OP_ROPE:
    dtype = args->u.rope.x.dtype;
    break;
  case TSR_OP_SWIGLU:
    dtype = args->u.swiglu.gate.dtype;
    break;
  case TSR_OP_GELU:
    dtype = args->u.gelu.x.dtype;
    break;
  case TSR_OP_CROSS_ENTROPY:
    dtype = args->u.cross_entropy.logits.dtype;
    break;
  case TSR_OP_KV_APPEND:
    dtype = args->u.kv_append.k_new.dtype;
    break;
  default:
    break;
  }
  return tsr_dtype_name((tsr_dtype)dtype);
}

/* Lowercase, runs of anything but [a-z0-9._] become one '-'. */
static void normalise_into(char *dst, size_t capacity, size_t *used, const char *src) {
  bool dash = false;
  for (const char *p = src; *p && *used + 2 < capacity; p++) {
    unsigned char c = (unsigned char)tolower((unsigned char)*p);
    if (isalnum(c) || c == '.' || c == '_') {
      if (dash && *used > 0 && dst[*used - 1] != ':')
        dst[(*used)++] = '-';
      dst[(*used)++] = (char)c;
      dash = false;
    } else {
      dash = true;
    }
  }
  dst[*used] = '\0';
}

void tsr__device_key(const tsr_device_info *info, char *buf, size_t capacity) {
  const char *parts[4] = {info->backend, info->vendor, info->arch, info->name};
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < 4; i++) {
    if (i > 0 && used + 1 < capacity) {
      buf[used++] = ':';
      buf[used] = '\0';
    }
    normalise_into(buf, capacity, &used, parts[i][0] ? parts[i] : "unknown");
  }
}

tsr_status tsr_tuning_user_path(char *buf, size_t capacity) {
  static const char call[] = "tsr_tuning_user_path";
  tsr__clear_error();
  if (!buf || capacity == 0)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "buf is NULL or capacity is 0");
  int n = tsr__tuning_user_path_env(buf, capacity);
  if (n == -1)
    return tsr__fail(TSR_ERROR_NOT_FOUND, call,
                     "no user tuning database: TESSERA_TUNING_DB is unset, and XDG_CACHE_HOME "
                     "and HOME are unset or not absolute paths");
  if (n < 0 || (size_t)n >= capacity)
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "capacity = %zu is too small for the path",
                     capacity);
  return TSR_OK;
}

/* A database tsr_tuning_record would rewrite; larger is not one. */
static const size_t TUNING_RECORD_MAX_BYTES = (size_t)256 << 20;

static bool field_is(const char *field, size_t length, const char *want) {
  return strlen(want) == length && !memcmp(field, want, length);
}

static tsr_status make_parent_dirs(const char *path) {
  char dir[PATH_MAX];
  tsr__strlcpy(dir, path, sizeof dir);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir)
    return TSR_OK;
  *slash = '\0';
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
      return TSR_ERROR_IO;
    *p = '/';
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return TSR_ERROR_IO;
  return TSR_OK;
}

tsr_status tsr_tuning_record(tsr_device *device, tsr_op op, const void *desc, const char *variant,
                             const char *path) {
  static const char call[] = "tsr_tuning_record";
  tsr__clear_error();
  if (!device || !variant)
    return tsr__fail(TSR_ERROR_NULL_ARGUMENT, call, "%s is NULL", !device ? "device" : "variant");
  if ((int)op < 0 || op >= TSR_OP_COUNT_)
    return tsr__fail(TSR_ERROR_INVALID_VALUE, call, "op = %d is not a tsr_op", (int)op);
  tsr__op_args args;
  tsr_status st = tsr__validate_op(device, op, desc, call, &args);
  if (st != TSR_OK)
    return st;
  void *handle;
  st = tsr__device_handle(device, call, &handle);
  tsr_plugin_variant_list list;
  if (st == TSR_OK)
    st = tsr__list_variants(device, handle, &args, call, &list);
  if (st != TSR_OK)
    return st;
  bool listed = false;
  for (uint32_t i = 0; i < list.count && !listed; i++)
    listed = !strcmp(list.variants[i].name, variant);
  if (!listed)
    return tsr__fail(TSR_ERROR_NOT_FOUND, call, "variant '%s' is not a %s variant of %s", variant,
                     tsr_op_name(op), device->info.selector);
  char user_path[PATH_MAX];
  if (!path) {
    st = tsr_tuning_user_path(user_path, sizeof user_path);
    if (st != TSR_OK)
      return st;
    path = user_path;
  }
  char shape_class[96];
  tsr__shape_class(&args, shape_class, sizeof shape_class);
  const char *dtype = tsr__op_dtype_name(&args);

  /* The rows kept: the file as it is, read without blocking (a FIFO would
   * wait for a writer); only a regular file is replaced. */
  char *text = NULL;
  size_t size = 0;
  struct stat identity;
  int err = tsr__tuning_read_file(path, TUNING_RECORD_MAX_BYTES, &text, &size, &identity);
  if (err == -1)
    return tsr__fail(TSR_ERROR_IO, call, "cannot write %s: not a regular file", path);
  if (err && err != ENOENT)
    return tsr__fail(TSR_ERROR_IO, call, "cannot read %s: %s", path,
                     err == EFBIG ? "larger than 256 MiB" : strerror(err));
  if (make_parent_dirs(path) != TSR_OK) {
    err = errno;
    free(text);
    return tsr__fail(TSR_ERROR_IO, call, "cannot create the directory of %s: %s", path,
                     strerror(err));
  }

  /* Rewrite the file without the row this one replaces, then rename over it,
   * so a crash never leaves a half-written database. */
  static atomic_uint tmp_serial; /* threads of one process get distinct names */
  char tmp[PATH_MAX];
  int tmp_len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(),
                         atomic_fetch_add(&tmp_serial, 1));
  if (tmp_len < 0 || (size_t)tmp_len >= sizeof tmp) {
    free(text);
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "path '%s' is too long", path);
  }
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!out) {
    err = errno;
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    free(text);
    return tsr__fail(TSR_ERROR_IO, call, "cannot write %s: %s", tmp, strerror(err));
  }
  bool kept = false;
  const char *p = text, *end = text ? text + size : NULL;
  while (p && p < end) {
    const char *newline = memchr(p, '\n', (size_t)(end - p));
    const char *stop = newline ? newline + 1 : end;
    const char *field[5];
    size_t length[5];
    if (tsr__tuning_split_row(p, (size_t)(stop - p), field, length) &&
        field_is(field[0], length[0], device->info.device_key) &&
        field_is(field[1], length[1], tsr_op_name(op)) && field_is(field[2], length[2], dtype) &&
        field_is(field[3], length[3], shape_class)) {
      p = stop;
      continue;
    }
    fwrite(p, 1, (size_t)(stop - p), out);
    if (!newline)
      fputc('\n', out); /* the row below starts a line of its own */
    kept = true;
    p = stop;
  }
  free(text);
  if (!kept)
    fputs("# tessera tuning database: device-key op dtype shape-class variant\n", out);
  fprintf(out, "%s\t%s\t%s\t%s\t%s\n", device->info.device_key, tsr_op_name(op), dtype, shape_class,
          variant);
  bool failed = ferror(out) != 0;
  if (fclose(out) != 0)
    failed = true;
  if (failed || rename(tmp, path) != 0) {
    err = errno;
    unlink(tmp);
    return tsr__fail(TSR_ERROR_IO, call, "cannot write %s: %s", path, strerror(err));
  }
  tsr__tuning_invalidate();
  return TSR_OK;
}
