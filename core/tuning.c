/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel-variant choice: explicit override, then the tuning database (user
 * file before packaged system files; tuning_db.c), then the plugin's
 * heuristic. The database is plain text, one row per line:
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

static bool list_has(const tsr_plugin_variant_list *list, const char *name) {
  for (uint32_t i = 0; i < list->count; i++)
    if (!strcmp(list->variants[i].name, name))
      return true;
  return false;
}

static bool list_has_variant(void *list, const char *name) {
  return list_has(list, name);
}

static void list_names(const tsr_plugin_variant_list *list, char *buf, size_t capacity) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t i = 0; i < list->count && used < capacity; i++) {
    int n = snprintf(buf + used, capacity - used, "%s%s", i ? ", " : "", list->variants[i].name);
    if (n < 0)
      break;
    used += (size_t)n;
  }
}

/* TESSERA_CONFIG=gemm:<variant>,attention:<variant> */
static bool config_override(const char *op, char *variant, size_t capacity) {
  const char *config = tsr__getenv("TESSERA_CONFIG");
  if (!config)
    return false;
  size_t op_len = strlen(op);
  const char *p = config;
  while (*p) {
    while (*p == ',' || *p == ' ')
      p++;
    const char *end = p;
    while (*end && *end != ',')
      end++;
    if ((size_t)(end - p) > op_len + 1 && !strncmp(p, op, op_len) && p[op_len] == ':') {
      size_t n = (size_t)(end - p) - op_len - 1;
      if (n >= capacity)
        n = capacity - 1;
      memcpy(variant, p + op_len + 1, n);
      variant[n] = '\0';
      return true;
    }
    p = end;
  }
  return false;
}

static tsr_status variant_list(tsr_device *device, const tsr__op_args *args, const char *call,
                               tsr_plugin_variant_list *list) {
  /* The header only: the entries past `count` are never read, and clearing
   * all 7 KB cost more than the rest of a small op's variant choice. */
  list->struct_size = sizeof *list;
  list->count = 0;
  list->heuristic = 0;
  list->reason[0] = '\0';
  void *handle;
  tsr_status st = tsr__device_handle(device, call, &handle);
  if (st != TSR_OK)
    return st;
  st = device->plugin->table->op_variants(handle, args->op, tsr__op_args_pointer(args), list);
  if (st != TSR_OK)
    return tsr__fail_plugin(st, call, "the plugin could not list its variants");
  if (list->count == 0 || list->count > TSR_PLUGIN_MAX_VARIANTS || list->heuristic < 0 ||
      (uint32_t)list->heuristic >= list->count)
    return tsr__fail(TSR_ERROR_BACKEND, call,
                     "the %s plugin listed %u variants with heuristic index %d for %s",
                     device->info.backend, list->count, list->heuristic, tsr_op_name(args->op));
  return TSR_OK;
}

tsr_status tsr__choose_variant(tsr_device *device, const tsr__op_args *args, const char *call,
                               tsr_choice *choice) {
  size_t size = choice->struct_size;
  memset(choice, 0, sizeof *choice);
  choice->struct_size = size;
  tsr_plugin_variant_list list;
  tsr_status st = variant_list(device, args, call, &list);
  if (st != TSR_OK)
    return st;
  const char *op = tsr_op_name(args->op);
  const char *dtype = tsr__op_dtype_name(args);
  tsr__shape_class(args, choice->shape_class, sizeof choice->shape_class);
  tsr__strlcpy(choice->device_key, device->info.device_key, sizeof choice->device_key);

  char wanted[128];
  const char *origin = NULL;
  if (args->variant) {
    tsr__strlcpy(wanted, args->variant, sizeof wanted);
    origin = "desc->variant";
  } else if (config_override(op, wanted, sizeof wanted)) {
    origin = "TESSERA_CONFIG";
  }
  if (origin) {
    if (!list_has(&list, wanted)) {
      char names[1024];
      list_names(&list, names, sizeof names);
      return tsr__fail(TSR_ERROR_NOT_FOUND, call,
                       "%s = '%s' is not a %s variant of %s for this problem (variants: %s)",
                       origin, wanted, op, device->info.selector, names);
    }
    tsr__strlcpy(choice->variant, wanted, sizeof choice->variant);
    choice->rule = TSR_CHOICE_OVERRIDE;
    tsr__strlcpy(choice->source, origin, sizeof choice->source);
    return TSR_OK;
  }
  tsr__tuning_key key = {choice->device_key, op, dtype, choice->shape_class};
  tsr__tuning_match match;
  switch (tsr__tuning_find(&key, list_has_variant, &list, &match)) {
  case TSR__TUNING_HIT:
    tsr__strlcpy(choice->variant, match.variant, sizeof choice->variant);
    choice->rule = TSR_CHOICE_TUNING_DB;
    tsr__strlcpy(choice->source, match.source, sizeof choice->source);
    return TSR_OK;
  case TSR__TUNING_STALE:
    /* once per row and loaded database: a warning per call would flood a
     * program's output for as long as the row stays */
    if (match.first_warning)
      tsr__log(TSR_LOG_WARN, "%s: tuning row %s names variant '%s', which %s does not have here",
               call, match.source, match.variant, device->info.selector);
    break;
  case TSR__TUNING_MISS:
    break;
  }
  tsr__strlcpy(choice->variant, list.variants[list.heuristic].name, sizeof choice->variant);
  choice->rule = TSR_CHOICE_HEURISTIC;
  tsr__strlcpy(choice->source, list.reason[0] ? list.reason : "the plugin's default",
               sizeof choice->source);
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
  tsr_plugin_variant_list list;
  st = variant_list(device, &args, call, &list);
  if (st != TSR_OK)
    return st;
  if (!list_has(&list, variant))
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
