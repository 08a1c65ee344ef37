/* Plugin discovery: manifests in plugins.d directories, filters, dlopen, ABI
 * negotiation and init. Nothing here aborts: a plugin that fails is skipped and
 * its report says why. */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define MAX_DIRS 64

typedef struct manifest {
  char library[1024];
  uint32_t abi;  /* 0: not given */
  char arch[64]; /* "": not given */
} manifest;

typedef struct dir_list {
  char *dirs[MAX_DIRS];
  int count;
} dir_list;

static void dirs_add(dir_list *list, const char *dir) {
  if (!dir || !*dir || list->count >= MAX_DIRS)
    return;
  for (int i = 0; i < list->count; i++)
    if (!strcmp(list->dirs[i], dir))
      return;
  list->dirs[list->count++] = strdup(dir);
}

static void dirs_add_path_list(dir_list *list, const char *paths) {
  if (!paths)
    return;
  char *copy = strdup(paths);
  if (!copy)
    return;
  char *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
    dirs_add(list, dir);
  free(copy);
}

const char *tsr__library_dir(void) {
  static char dir[PATH_MAX];
  static bool done;
  if (!done) {
    Dl_info info;
    if (dladdr((void *)&tsr__library_dir, &info) && info.dli_fname) {
      char resolved[PATH_MAX];
      const char *path = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
      tsr__strlcpy(dir, path, sizeof dir);
      char *slash = strrchr(dir, '/');
      if (slash)
        *slash = '\0';
      else
        dir[0] = '\0';
    }
    done = true;
  }
  return dir;
}

/* The search order of DESIGN.md: added paths, then TESSERA_PLUGIN_PATH (which
 * replaces the defaults) or the defaults. */
static void build_search_dirs(const tsr_context_options *options, dir_list *list) {
  if (options && options->add_plugin_path)
    dirs_add_path_list(list, options->add_plugin_path);
  dirs_add_path_list(list, tsr__getenv("TESSERA_ADD_PLUGIN_PATH"));
  const char *replace = tsr__getenv("TESSERA_PLUGIN_PATH");
  if (replace) {
    dirs_add_path_list(list, replace);
    return;
  }
  char path[PATH_MAX];
  const char *xdg = tsr__getenv("XDG_CONFIG_HOME");
  const char *home = tsr__getenv("HOME");
  if (xdg && *xdg) {
    snprintf(path, sizeof path, "%s/tessera/plugins.d", xdg);
    dirs_add(list, path);
  } else if (home && *home) {
    snprintf(path, sizeof path, "%s/.config/tessera/plugins.d", home);
    dirs_add(list, path);
  }
  dirs_add(list, "/etc/tessera/plugins.d");
  const char *libdir = tsr__library_dir();
  if (*libdir) {
    int n = snprintf(path, sizeof path, "%s/%s/tessera/plugins.d", libdir, TSR_LIBDIR_TO_DATADIR);
    char resolved[PATH_MAX];
    if (n > 0 && (size_t)n < sizeof path)
      dirs_add(list, realpath(path, resolved) ? resolved : path);
  }
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  char *end = s + strlen(s);
  while (end > s && isspace((unsigned char)end[-1]))
    *--end = '\0';
  return s;
}

/* Parses "key = value" lines; '#' starts a comment. Returns false with a
 * reason for unreadable or malformed manifests. */
static bool parse_manifest(const char *path, manifest *out, char *reason, size_t capacity) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(reason, capacity, "cannot read manifest: %s", strerror(errno));
    return false;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(reason, capacity, "cannot read manifest: not a regular file");
    fclose(f);
    return false;
  }
  char line[2048];
  int number = 0;
  bool ok = true;
  while (ok && fgets(line, sizeof line, f)) {
    number++;
    if (!strchr(line, '\n') && !feof(f)) {
      snprintf(reason, capacity, "manifest: line %d: too long", number);
      ok = false;
      break;
    }
    for (const unsigned char *c = (const unsigned char *)line; *c; c++) {
      if (*c < 0x20 && *c != '\t' && *c != '\n' && *c != '\r') {
        snprintf(reason, capacity, "manifest: line %d: control character 0x%02x (not a text file)",
                 number, *c);
        ok = false;
        break;
      }
    }
    if (!ok)
      break;
    char *hash = strchr(line, '#');
    if (hash)
      *hash = '\0';
    char *text = trim(line);
    if (!*text)
      continue;
    char *eq = strchr(text, '=');
    if (!eq) {
      snprintf(reason, capacity, "manifest: line %d: expected 'key = value'", number);
      ok = false;
      break;
    }
    *eq = '\0';
    char *key = trim(text);
    char *value = trim(eq + 1);
    if (!strcmp(key, "library")) {
      if (!*value) {
        snprintf(reason, capacity, "manifest: line %d: empty library", number);
        ok = false;
      }
      tsr__strlcpy(out->library, value, sizeof out->library);
    } else if (!strcmp(key, "abi")) {
      char *end = NULL;
      errno = 0;
      unsigned long abi = strtoul(value, &end, 10);
      if (!*value || *end || errno || abi == 0 || abi > UINT32_MAX) {
        snprintf(reason, capacity, "manifest: line %d: abi = '%s' is not a positive integer",
                 number, value);
        ok = false;
      }
      out->abi = (uint32_t)abi;
    } else if (!strcmp(key, "arch")) {
      tsr__strlcpy(out->arch, value, sizeof out->arch);
    } else {
      /* Unknown keys are allowed (newer manifests) but noted. */
      tsr__log(TSR_LOG_DEBUG, "%s: line %d: unknown key '%s' ignored", path, number, key);
    }
  }
  if (ok && ferror(f)) {
    snprintf(reason, capacity, "cannot read manifest: %s", strerror(errno));
    ok = false;
  }
  fclose(f);
  if (ok && !out->library[0]) {
    snprintf(reason, capacity, "manifest: no 'library' key");
    ok = false;
  }
  return ok;
}

/* Resolves the manifest's library: paths with a '/' are relative to the
 * manifest's directory unless absolute; bare names go to the dynamic linker. */
static void resolve_library(const char *manifest_path, const char *library, char *out,
                            size_t capacity) {
  if (!strchr(library, '/') || library[0] == '/') {
    tsr__strlcpy(out, library, capacity);
    return;
  }
  char dir[PATH_MAX];
  tsr__strlcpy(dir, manifest_path, sizeof dir);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  else
    tsr__strlcpy(dir, ".", sizeof dir);
  int n = snprintf(out, capacity, "%s/%s", dir, library);
  if (n < 0 || (size_t)n >= capacity) /* too long to load: keep it readable in the report */
    tsr__strlcpy(out, library, capacity);
}

static void host_log(void *handle, int level, const char *fmt, ...) {
  tsr_plugin_slot *slot = handle;
  if (level > tsr__log_level())
    return;
  char line[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  tsr__log(level, "%s: %s", slot ? slot->report.name : "plugin", line);
}

static void host_set_error(void *handle, const char *fmt, ...) {
  (void)handle;
  va_list ap;
  va_start(ap, fmt);
  tsr__set_plugin_error_v(fmt, ap);
  va_end(ap);
}

static int host_tuning_lookup(void *handle, const char *device_key, const char *op,
                              const char *dtype, const char *shape_class, char *variant,
                              size_t capacity) {
  (void)handle;
  char source[1024];
  return tsr__tuning_lookup(device_key, op, dtype, shape_class, variant, capacity, source,
                            sizeof source)
             ? 1
             : 0;
}

static void skip(tsr_plugin_slot *slot, tsr_plugin_state state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void skip(tsr_plugin_slot *slot, tsr_plugin_state state, const char *fmt, ...) {
  slot->report.state = state;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(slot->report.reason, sizeof slot->report.reason, fmt, ap);
  va_end(ap);
  tsr__log(state == TSR_PLUGIN_FILTERED ? TSR_LOG_DEBUG : TSR_LOG_INFO,
           "plugin '%s' (%s) skipped: %s", slot->report.name, slot->report.manifest,
           slot->report.reason);
  if (slot->library) {
    dlclose(slot->library);
    slot->library = NULL;
  }
  slot->table = NULL;
}

/* The v1 table's required entries; the rest may be NULL (unsupported). */
static const char *missing_table_entry(const tsr_plugin_v1 *t) {
  if (!t->name)
    return "name";
  if (!t->init)
    return "init";
  if (!t->device_count)
    return "device_count";
  if (!t->device_info)
    return "device_info";
  if (!t->device_open)
    return "device_open";
  if (!t->device_close)
    return "device_close";
  if (!t->buffer_alloc)
    return "buffer_alloc";
  if (!t->buffer_free)
    return "buffer_free";
  if (!t->queue_create)
    return "queue_create";
  if (!t->queue_destroy)
    return "queue_destroy";
  if (!t->queue_finish)
    return "queue_finish";
  if (!t->buffer_write)
    return "buffer_write";
  if (!t->buffer_read)
    return "buffer_read";
  if (!t->op_supported)
    return "op_supported";
  if (!t->op_variants)
    return "op_variants";
  if (!t->op_run)
    return "op_run";
  return NULL;
}

static void load_one(tsr_plugin_slot *slot, const tsr_context_options *options) {
  tsr_plugin_report *r = &slot->report;
  manifest m;
  char reason[512];
  if (!parse_manifest(r->manifest, &m, reason, sizeof reason)) {
    skip(slot, TSR_PLUGIN_SKIPPED, "%s", reason);
    return;
  }
  resolve_library(r->manifest, m.library, r->library, sizeof r->library);

  const char *only =
      options && options->backends ? options->backends : tsr__getenv("TESSERA_BACKENDS");
  const char *drop = options && options->disable_backends ? options->disable_backends
                                                          : tsr__getenv("TESSERA_DISABLE_BACKENDS");
  if (only && *only && !tsr__list_contains(only, r->name)) {
    skip(slot, TSR_PLUGIN_FILTERED, "not in TESSERA_BACKENDS=%s", only);
    return;
  }
  if (drop && tsr__list_contains(drop, r->name)) {
    skip(slot, TSR_PLUGIN_FILTERED, "in TESSERA_DISABLE_BACKENDS=%s", drop);
    return;
  }
  if (m.arch[0] && strcmp(m.arch, TSR_ARCH) != 0) {
    skip(slot, TSR_PLUGIN_SKIPPED, "manifest arch = %s but this is %s", m.arch, TSR_ARCH);
    return;
  }
  if (m.abi && m.abi > TSR_PLUGIN_ABI_VERSION) {
    skip(slot, TSR_PLUGIN_SKIPPED,
         "manifest abi = %u: plugin speaks only ABI versions newer than %d", m.abi,
         TSR_PLUGIN_ABI_VERSION);
    return;
  }
  if (strchr(r->library, '/') && access(r->library, F_OK) != 0) {
    skip(slot, TSR_PLUGIN_SKIPPED, "library not found: %s (%s)", r->library, strerror(errno));
    return;
  }

  dlerror();
  slot->library = dlopen(r->library, RTLD_NOW | RTLD_LOCAL);
  if (!slot->library) {
    const char *err = dlerror();
    if (!strchr(r->library, '/'))
      skip(slot, TSR_PLUGIN_SKIPPED, "library not found: %s (%s)", r->library,
           err ? err : "dlopen failed");
    else
      skip(slot, TSR_PLUGIN_SKIPPED, "dlopen failed: %s", err ? err : "unknown error");
    return;
  }
  tsr_plugin_negotiate_fn negotiate;
  tsr_plugin_entry_fn entry;
  *(void **)&negotiate = dlsym(slot->library, TSR_PLUGIN_NEGOTIATE_SYMBOL);
  *(void **)&entry = dlsym(slot->library, TSR_PLUGIN_ENTRY_SYMBOL);
  if (!negotiate) {
    skip(slot, TSR_PLUGIN_SKIPPED, "missing symbol %s", TSR_PLUGIN_NEGOTIATE_SYMBOL);
    return;
  }
  if (!entry) {
    skip(slot, TSR_PLUGIN_SKIPPED, "missing symbol %s", TSR_PLUGIN_ENTRY_SYMBOL);
    return;
  }
  uint32_t abi = negotiate(TSR_PLUGIN_ABI_VERSION);
  if (abi == 0) {
    /* Ask what it would speak with no ceiling, only to word the reason. */
    uint32_t highest = negotiate(UINT32_MAX);
    if (highest > TSR_PLUGIN_ABI_VERSION)
      skip(slot, TSR_PLUGIN_SKIPPED, "plugin speaks only ABI versions newer than %d (it offers %u)",
           TSR_PLUGIN_ABI_VERSION, highest);
    else
      skip(slot, TSR_PLUGIN_SKIPPED, "plugin speaks only ABI versions older than %d",
           TSR_PLUGIN_ABI_VERSION);
    return;
  }
  if (abi > TSR_PLUGIN_ABI_VERSION) {
    skip(slot, TSR_PLUGIN_SKIPPED, "plugin answered ABI %u, above the offered %d", abi,
         TSR_PLUGIN_ABI_VERSION);
    return;
  }
  const tsr_plugin_v1 *table = entry(abi);
  if (!table) {
    skip(slot, TSR_PLUGIN_SKIPPED, "%s(%u) returned no table", TSR_PLUGIN_ENTRY_SYMBOL, abi);
    return;
  }
  if (table->struct_size < sizeof(tsr_plugin_v1) || table->abi_version != abi) {
    skip(slot, TSR_PLUGIN_SKIPPED,
         "function table is malformed (struct_size %u, abi_version %u; expected >= %zu, %u)",
         table->struct_size, table->abi_version, sizeof(tsr_plugin_v1), abi);
    return;
  }
  const char *missing = missing_table_entry(table);
  if (missing) {
    skip(slot, TSR_PLUGIN_SKIPPED, "function table lacks required entry '%s'", missing);
    return;
  }
  slot->table = table;
  r->abi_version = abi;

  slot->host.struct_size = sizeof slot->host;
  slot->host.abi_version = abi;
  slot->host.log = host_log;
  slot->host.set_error = host_set_error;
  slot->host.alloc = malloc;
  slot->host.free = free;
  slot->host.get_env = tsr__getenv;
  slot->host.tuning_lookup = host_tuning_lookup;
  slot->host.host_handle = slot;

  char init_reason[400] = "";
  tsr_status st = table->init(&slot->host, &slot->state, init_reason, sizeof init_reason);
  if (st != TSR_OK) {
    char detail[768] = "";
    tsr__take_plugin_error(detail, sizeof detail);
    r->abi_version = 0;
    skip(slot, TSR_PLUGIN_SKIPPED, "init failed: %s (%s)",
         init_reason[0] ? init_reason : (detail[0] ? detail : "no reason given"),
         tsr_status_name(st));
    return;
  }
  r->state = TSR_PLUGIN_LOADED;
  r->reason[0] = '\0';
  r->device_count = table->device_count(slot->state);
  tsr__log(TSR_LOG_DEBUG, "plugin '%s' loaded from %s: ABI %u, %u device(s)%s%s", r->name,
           r->library, abi, r->device_count, init_reason[0] ? ": " : "", init_reason);
}

typedef struct found_manifest {
  char name[64];
  char path[1024];
} found_manifest;

static int conf_filter(const struct dirent *entry) {
  size_t n = strlen(entry->d_name);
  return n > 5 && entry->d_name[0] != '.' && !strcmp(entry->d_name + n - 5, ".conf");
}

tsr_status tsr__load_plugins(struct tsr_context *context, const tsr_context_options *options) {
  dir_list dirs = {{0}, 0};
  build_search_dirs(options, &dirs);

  found_manifest *found = NULL;
  size_t found_count = 0, found_capacity = 0;
  for (int d = 0; d < dirs.count; d++) {
    struct dirent **entries = NULL;
    int n = scandir(dirs.dirs[d], &entries, conf_filter, alphasort);
    if (n < 0) {
      tsr__log(TSR_LOG_DEBUG, "plugins.d %s: %s", dirs.dirs[d], strerror(errno));
      continue;
    }
    tsr__log(TSR_LOG_DEBUG, "plugins.d %s: %d manifest(s)", dirs.dirs[d], n);
    for (int i = 0; i < n; i++) {
      if (found_count == found_capacity) {
        size_t cap = found_capacity ? found_capacity * 2 : 8;
        found_manifest *grown = realloc(found, cap * sizeof *found);
        if (!grown) {
          for (int j = i; j < n; j++)
            free(entries[j]);
          free(entries);
          free(found);
          for (int k = 0; k < dirs.count; k++)
            free(dirs.dirs[k]);
          return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, "tsr_context_create",
                           "out of memory reading manifests");
        }
        found = grown;
        found_capacity = cap;
      }
      found_manifest *fm = &found[found_count++];
      size_t len = strlen(entries[i]->d_name) - 5;
      if (len >= sizeof fm->name)
        len = sizeof fm->name - 1;
      memcpy(fm->name, entries[i]->d_name, len);
      fm->name[len] = '\0';
      snprintf(fm->path, sizeof fm->path, "%s/%s", dirs.dirs[d], entries[i]->d_name);
      free(entries[i]);
    }
    free(entries);
  }
  for (int k = 0; k < dirs.count; k++)
    free(dirs.dirs[k]);

  /* Slots are allocated once, so the host-services tables handed to plugins
   * never move. */
  context->plugins = found_count ? calloc(found_count, sizeof *context->plugins) : NULL;
  if (found_count && !context->plugins) {
    free(found);
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, "tsr_context_create", "out of memory");
  }
  context->plugin_count = (uint32_t)found_count;
  for (size_t i = 0; i < found_count; i++) {
    tsr_plugin_slot *slot = &context->plugins[i];
    slot->context = context;
    slot->report.struct_size = sizeof slot->report;
    tsr__strlcpy(slot->report.name, found[i].name, sizeof slot->report.name);
    tsr__strlcpy(slot->report.manifest, found[i].path, sizeof slot->report.manifest);
    const tsr_plugin_slot *first = NULL;
    for (size_t j = 0; j < i; j++) {
      if (!strcmp(context->plugins[j].report.name, slot->report.name)) {
        first = &context->plugins[j];
        break;
      }
    }
    if (first) {
      skip(slot, TSR_PLUGIN_SKIPPED, "duplicate name: %s was first found at %s", slot->report.name,
           first->report.manifest);
      continue;
    }
    load_one(slot, options);
  }
  free(found);
  return TSR_OK;
}

void tsr__unload_plugins(struct tsr_context *context) {
  for (uint32_t i = 0; i < context->plugin_count; i++) {
    tsr_plugin_slot *slot = &context->plugins[i];
    if (slot->table && slot->table->shutdown)
      slot->table->shutdown(slot->state);
    /* Sanitizer builds keep plugins mapped so leak reports keep their symbols. */
    if (slot->library && !tsr__getenv("TESSERA_NO_DLCLOSE"))
      dlclose(slot->library);
  }
  free(context->plugins);
  context->plugins = NULL;
  context->plugin_count = 0;
}
