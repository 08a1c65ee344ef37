/* Kernel-variant choice: explicit override, then the tuning database (user
 * file before packaged system files), then the plugin's heuristic. The
 * database is plain text, one row per line:
 *     device-key  op  dtype  shape-class  variant
 * '#' starts a comment; a shape-class of '*' matches every problem. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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
  const char *explicit_path = tsr__getenv("TESSERA_TUNING_DB");
  const char *cache = tsr__getenv("XDG_CACHE_HOME");
  const char *home = tsr__getenv("HOME");
  int n;
  if (explicit_path && *explicit_path)
    n = snprintf(buf, capacity, "%s", explicit_path);
  else if (cache && *cache)
    n = snprintf(buf, capacity, "%s/tessera/tuning.tsv", cache);
  else if (home && *home)
    n = snprintf(buf, capacity, "%s/.cache/tessera/tuning.tsv", home);
  else
    return tsr__fail(
        TSR_ERROR_NOT_FOUND, call,
        "no user tuning database: TESSERA_TUNING_DB, XDG_CACHE_HOME and HOME are unset");
  if (n < 0 || (size_t)n >= capacity)
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "capacity = %zu is too small for the path",
                     capacity);
  return TSR_OK;
}

/* Splits a row into 5 fields; false for blank, comment or malformed lines. */
static bool parse_row(char *line, char *fields[5]) {
  char *hash = strchr(line, '#');
  if (hash)
    *hash = '\0';
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(line, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
    if (n == 5)
      return false;
    fields[n++] = tok;
  }
  return n == 5;
}

/* The database files are parsed once and kept: reading them on every op
 * call (an open, a read and a scandir) cost ~6 us a call, as much as the
 * rest of a small op's dispatch. A file is read again when its identity
 * (inode, size, modification time) or the set of system files changes,
 * checked at most once per TUNING_RECHECK_NS, and at once after
 * tsr_tuning_record. */
enum { TUNING_MAX_FILES = 64 };
static const long long TUNING_RECHECK_NS = 1000000000LL;

typedef struct tuning_row {
  char *fields[5];
  int line;
} tuning_row;

typedef struct tuning_file {
  char path[PATH_MAX];
  bool exists;
  struct stat identity;
  char *text;
  tuning_row *rows;
  int count;
} tuning_file;

static struct {
  pthread_mutex_t lock;
  bool valid;
  long long checked_ns;
  char user_path[PATH_MAX]; /* "" when there is no user file */
  char system_dir[PATH_MAX];
  bool dir_exists;
  struct stat dir_identity;
  tuning_file files[TUNING_MAX_FILES]; /* the user file first, then the system files */
  int count;
  /* The environment the paths were last resolved from, and those paths:
   * formatting them is redone only when a variable changes. */
  bool paths_resolved;
  bool env_set[3];
  char env[3][PATH_MAX];
  char resolved_user_path[PATH_MAX];
  char resolved_system_dir[PATH_MAX];
} tuning_cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* TESSERA_TUNING_DB, XDG_CACHE_HOME, HOME: what the user file's path comes from. */
static void user_path_from(const char *const env[3], char *buf, size_t capacity) {
  buf[0] = '\0';
  if (env[0] && *env[0])
    snprintf(buf, capacity, "%s", env[0]);
  else if (env[1] && *env[1])
    snprintf(buf, capacity, "%s/tessera/tuning.tsv", env[1]);
  else if (env[2] && *env[2])
    snprintf(buf, capacity, "%s/.cache/tessera/tuning.tsv", env[2]);
}

/* Resolves the user file's path and the system directory into the cache
 * when the environment differs from the last time (lock held). */
static void resolve_paths(const char *const env[3]) {
  bool same = tuning_cache.paths_resolved;
  for (int i = 0; i < 3 && same; i++)
    same = (env[i] != NULL) == tuning_cache.env_set[i] &&
           (!env[i] || strcmp(env[i], tuning_cache.env[i]) == 0);
  if (same)
    return;
  user_path_from(env, tuning_cache.resolved_user_path, sizeof tuning_cache.resolved_user_path);
  const char *libdir = tsr__library_dir();
  tuning_cache.resolved_system_dir[0] = '\0';
  if (*libdir)
    snprintf(tuning_cache.resolved_system_dir, sizeof tuning_cache.resolved_system_dir,
             "%s/%s/tessera/tuning", libdir, TSR_LIBDIR_TO_DATADIR);
  tuning_cache.paths_resolved = true;
  for (int i = 0; i < 3; i++) {
    tuning_cache.env_set[i] = env[i] != NULL;
    tsr__strlcpy(tuning_cache.env[i], env[i] ? env[i] : "", sizeof tuning_cache.env[i]);
    /* a value too long to keep is resolved again on every lookup */
    if (env[i] && strlen(env[i]) >= sizeof tuning_cache.env[i])
      tuning_cache.paths_resolved = false;
  }
}

static long long monotonic_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static bool same_identity(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void release_file(tuning_file *file) {
  free(file->text);
  free(file->rows);
  memset(file, 0, sizeof *file);
}

/* Reads and splits one file into rows (a missing or unreadable file has none
 * and is remembered as missing). */
static void load_file(tuning_file *file, const char *path) {
  memset(file, 0, sizeof *file);
  tsr__strlcpy(file->path, path, sizeof file->path);
  FILE *f = fopen(path, "r");
  if (!f)
    return;
  if (fstat(fileno(f), &file->identity) != 0 || file->identity.st_size < 0) {
    fclose(f);
    return;
  }
  size_t size = (size_t)file->identity.st_size;
  file->text = malloc(size + 1);
  size_t got = file->text ? fread(file->text, 1, size, f) : 0;
  fclose(f);
  if (!file->text)
    return;
  file->text[got] = '\0';
  file->exists = true;
  int lines = 1;
  for (size_t i = 0; i < got; i++)
    lines += file->text[i] == '\n';
  file->rows = malloc((size_t)lines * sizeof *file->rows);
  if (!file->rows)
    return;
  char *line = file->text;
  for (int number = 1; line; number++) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    tuning_row *row = &file->rows[file->count];
    if (parse_row(line, row->fields)) {
      row->line = number;
      file->count++;
    }
    line = next;
  }
}

static int tsv_filter(const struct dirent *entry);

static void load_cache(const char *user_path, const char *system_dir) {
  for (int i = 0; i < tuning_cache.count; i++)
    release_file(&tuning_cache.files[i]);
  tuning_cache.count = 0;
  tsr__strlcpy(tuning_cache.user_path, user_path, sizeof tuning_cache.user_path);
  tsr__strlcpy(tuning_cache.system_dir, system_dir, sizeof tuning_cache.system_dir);
  if (*user_path)
    load_file(&tuning_cache.files[tuning_cache.count++], user_path);
  tuning_cache.dir_exists = *system_dir && stat(system_dir, &tuning_cache.dir_identity) == 0;
  if (tuning_cache.dir_exists) {
    struct dirent **entries = NULL;
    int n = scandir(system_dir, &entries, tsv_filter, alphasort);
    for (int i = 0; i < n; i++) {
      char path[PATH_MAX];
      int len = snprintf(path, sizeof path, "%s/%s", system_dir, entries[i]->d_name);
      if (len > 0 && (size_t)len < sizeof path && tuning_cache.count < TUNING_MAX_FILES)
        load_file(&tuning_cache.files[tuning_cache.count++], path);
      free(entries[i]);
    }
    free(entries);
  }
  tuning_cache.valid = true;
  tuning_cache.checked_ns = monotonic_ns();
}

/* Whether the cache still describes the files (stat calls only). */
static bool cache_current(void) {
  struct stat now;
  bool dir_exists = *tuning_cache.system_dir && stat(tuning_cache.system_dir, &now) == 0;
  if (dir_exists != tuning_cache.dir_exists ||
      (dir_exists && !same_identity(&now, &tuning_cache.dir_identity)))
    return false;
  for (int i = 0; i < tuning_cache.count; i++) {
    const tuning_file *file = &tuning_cache.files[i];
    bool exists = stat(file->path, &now) == 0;
    if (exists != file->exists || (exists && !same_identity(&now, &file->identity)))
      return false;
  }
  return true;
}

/* The row of one file for the problem: the last row of its shape class, else
 * the first wildcard row. */
static const tuning_row *file_match(const tuning_file *file, const char *device_key, const char *op,
                                    const char *dtype, const char *shape_class) {
  const tuning_row *exact = NULL, *wildcard = NULL;
  for (int i = 0; i < file->count; i++) {
    char *const *f = file->rows[i].fields;
    if (strcmp(f[0], device_key) || strcmp(f[1], op) || strcmp(f[2], dtype))
      continue;
    if (!strcmp(f[3], shape_class))
      exact = &file->rows[i]; /* later rows override earlier ones */
    else if (!strcmp(f[3], "*") && !wildcard)
      wildcard = &file->rows[i];
  }
  return exact ? exact : wildcard;
}

static int tsv_filter(const struct dirent *entry) {
  size_t n = strlen(entry->d_name);
  return n > 4 && entry->d_name[0] != '.' && !strcmp(entry->d_name + n - 4, ".tsv");
}

bool tsr__tuning_lookup(const char *device_key, const char *op, const char *dtype,
                        const char *shape_class, char *variant, size_t variant_capacity,
                        char *source, size_t source_capacity) {
  const char *env[3] = {tsr__getenv("TESSERA_TUNING_DB"), tsr__getenv("XDG_CACHE_HOME"),
                        tsr__getenv("HOME")};
  pthread_mutex_lock(&tuning_cache.lock);
  resolve_paths(env);
  const char *user_path = tuning_cache.resolved_user_path;
  const char *system_dir = tuning_cache.resolved_system_dir;
  if (!tuning_cache.valid || strcmp(user_path, tuning_cache.user_path) ||
      strcmp(system_dir, tuning_cache.system_dir)) {
    load_cache(user_path, system_dir);
  } else if (monotonic_ns() - tuning_cache.checked_ns >= TUNING_RECHECK_NS) {
    if (!cache_current())
      load_cache(user_path, system_dir);
    tuning_cache.checked_ns = monotonic_ns();
  }
  bool found = false;
  for (int i = 0; i < tuning_cache.count && !found; i++) {
    const tuning_file *file = &tuning_cache.files[i];
    const tuning_row *row = file_match(file, device_key, op, dtype, shape_class);
    if (row) {
      tsr__strlcpy(variant, row->fields[4], variant_capacity);
      snprintf(source, source_capacity, "%s:%d", file->path, row->line);
      found = true;
    }
  }
  pthread_mutex_unlock(&tuning_cache.lock);
  return found;
}

/* Makes the next lookup read the files again (a row was just written). */
static void tuning_cache_invalidate(void) {
  pthread_mutex_lock(&tuning_cache.lock);
  tuning_cache.valid = false;
  pthread_mutex_unlock(&tuning_cache.lock);
}

static bool list_has(const tsr_plugin_variant_list *list, const char *name) {
  for (uint32_t i = 0; i < list->count; i++)
    if (!strcmp(list->variants[i].name, name))
      return true;
  return false;
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
  char source[1024];
  if (tsr__tuning_lookup(choice->device_key, op, dtype, choice->shape_class, wanted, sizeof wanted,
                         source, sizeof source)) {
    if (list_has(&list, wanted)) {
      tsr__strlcpy(choice->variant, wanted, sizeof choice->variant);
      choice->rule = TSR_CHOICE_TUNING_DB;
      tsr__strlcpy(choice->source, source, sizeof choice->source);
      return TSR_OK;
    }
    tsr__log(TSR_LOG_WARN, "%s: tuning row %s names variant '%s', which %s does not have here",
             call, source, wanted, device->info.selector);
  }
  tsr__strlcpy(choice->variant, list.variants[list.heuristic].name, sizeof choice->variant);
  choice->rule = TSR_CHOICE_HEURISTIC;
  tsr__strlcpy(choice->source, list.reason[0] ? list.reason : "the plugin's default",
               sizeof choice->source);
  return TSR_OK;
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
  if (make_parent_dirs(path) != TSR_OK)
    return tsr__fail(TSR_ERROR_IO, call, "cannot create the directory of %s: %s", path,
                     strerror(errno));

  /* Rewrite the file without the row this one replaces, then rename over it,
   * so a crash never leaves a half-written database. */
  char tmp[PATH_MAX];
  int tmp_len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  if (tmp_len < 0 || (size_t)tmp_len >= sizeof tmp)
    return tsr__fail(TSR_ERROR_BAD_SIZE, call, "path '%s' is too long", path);
  FILE *out = fopen(tmp, "w");
  if (!out)
    return tsr__fail(TSR_ERROR_IO, call, "cannot write %s: %s", tmp, strerror(errno));
  FILE *in = fopen(path, "r");
  bool wrote_header = false;
  if (in) {
    char line[1024], copy[1024];
    while (fgets(line, sizeof line, in)) {
      tsr__strlcpy(copy, line, sizeof copy);
      char *fields[5];
      if (parse_row(copy, fields) && !strcmp(fields[0], device->info.device_key) &&
          !strcmp(fields[1], tsr_op_name(op)) && !strcmp(fields[2], dtype) &&
          !strcmp(fields[3], shape_class))
        continue;
      fputs(line, out);
      wrote_header = true;
    }
    fclose(in);
  }
  if (!wrote_header)
    fputs("# tessera tuning database: device-key op dtype shape-class variant\n", out);
  fprintf(out, "%s\t%s\t%s\t%s\t%s\n", device->info.device_key, tsr_op_name(op), dtype, shape_class,
          variant);
  bool failed = ferror(out) != 0;
  if (fclose(out) != 0)
    failed = true;
  if (failed || rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    return tsr__fail(TSR_ERROR_IO, call, "cannot write %s: %s", path, strerror(err));
  }
  tuning_cache_invalidate();
  return TSR_OK;
}
