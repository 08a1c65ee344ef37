/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin discovery: manifests in plugins.d directories, filters, dlopen, ABI
 * negotiation and init. Nothing here aborts: a plugin that fails is skipped and
 * its report says why. Nothing is cut to fit a buffer either: a path, name or
 * value that does not fit is refused with a reason, and every limit that
 * leaves something out says so. */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Directories searched at most; the rest are listed and named in a warning. */
#define MAX_DIRS 64
/* Longer manifests are refused (they are a few lines). */
#define MAX_MANIFEST_BYTES 65536
/* Longest manifest line, newline excluded. */
#define MAX_LINE 2047

/* ------------------------------------------------------------------------ */
/* Search path                                                               */
/* ------------------------------------------------------------------------ */

typedef struct dir_list {
  tsr__search_dir *dirs;
  size_t count, capacity;
  bool out_of_memory;
} dir_list;

/* Takes `dir` (malloc'd) into the list unless it is there already. */
static void dirs_take(dir_list *list, char *dir) {
  if (!dir) {
    list->out_of_memory = true;
    return;
  }
  for (size_t i = 0; i < list->count; i++) {
    if (!strcmp(list->dirs[i].path, dir)) {
      free(dir);
      return;
    }
  }
  if (list->count == list->capacity) {
    size_t capacity = list->capacity ? list->capacity * 2 : 8;
    tsr__search_dir *grown = realloc(list->dirs, capacity * sizeof *grown);
    if (!grown) {
      free(dir);
      list->out_of_memory = true;
      return;
    }
    list->dirs = grown;
    list->capacity = capacity;
  }
  tsr__search_dir *entry = &list->dirs[list->count++];
  memset(entry, 0, sizeof *entry);
  entry->path = dir;
}

static void dirs_add(dir_list *list, const char *dir) {
  if (dir && *dir)
    dirs_take(list, strdup(dir));
}

/* "<a><b>" in fresh memory: no fixed buffer, so nothing to cut. */
static char *join(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  char *out = malloc(na + nb + 1);
  if (out) {
    memcpy(out, a, na);
    memcpy(out + na, b, nb + 1);
  }
  return out;
}

static void dirs_add_path_list(dir_list *list, const char *paths) {
  if (!paths)
    return;
  char *copy = strdup(paths);
  if (!copy) {
    list->out_of_memory = true;
    return;
  }
  char *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
    dirs_add(list, dir);
  free(copy);
}

static pthread_once_t library_dir_once = PTHREAD_ONCE_INIT;
static char library_dir[PATH_MAX];

static void find_library_dir(void) {
  Dl_info info;
  if (!dladdr((void *)&tsr__library_dir, &info) || !info.dli_fname)
    return;
  char *resolved = realpath(info.dli_fname, NULL);
  const char *path = resolved ? resolved : info.dli_fname;
  const char *slash = strrchr(path, '/');
  size_t length = slash ? (size_t)(slash - path) : 0;
  if (length < sizeof library_dir) {
    memcpy(library_dir, path, length);
    library_dir[length] = '\0';
  }
  free(resolved);
}

const char *tsr__library_dir(void) {
  /* Any thread may be first (contexts are created concurrently). */
  pthread_once(&library_dir_once, find_library_dir);
  return library_dir;
}

/* XDG_CONFIG_HOME and HOME count only when absolute (the XDG Base Directory
 * spec: a relative value is treated as unset). */
static const char *absolute_env(const char *name) {
  const char *value = tsr__getenv(name);
  if (value && *value && value[0] != '/') {
    tsr__log(TSR_LOG_DEBUG, "%s=%s is not an absolute path: ignored", name, value);
    return NULL;
  }
  return value && *value ? value : NULL;
}

/* The search order of docs/ARCHITECTURE.md: added paths, then TESSERA_PLUGIN_PATH (which
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
  const char *xdg = absolute_env("XDG_CONFIG_HOME");
  const char *home = absolute_env("HOME");
  if (xdg)
    dirs_take(list, join(xdg, "/tessera/plugins.d"));
  else if (home)
    dirs_take(list, join(home, "/.config/tessera/plugins.d"));
  dirs_add(list, "/etc/tessera/plugins.d");
  const char *libdir = tsr__library_dir();
  if (*libdir) {
    char *path = join(libdir, "/" TSR_LIBDIR_TO_DATADIR "/tessera/plugins.d");
    char *resolved = path ? realpath(path, NULL) : NULL;
    if (resolved) {
      free(path);
      path = resolved;
    }
    dirs_take(list, path);
  }
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

static const char *file_type(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "of an unknown type";
}

/* Opens `path` as a regular file. O_NONBLOCK keeps a FIFO from blocking the
 * open, and the type is checked on the opened file (fstat), so it cannot
 * change between check and use. Returns -1 with `why` set and `*error` the
 * errno (0 when the file is not a regular file). */
static int open_regular(const char *path, struct stat *st, char *why, size_t capacity, int *error) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd >= 0 && fstat(fd, st) != 0) {
    int saved = errno;
    close(fd);
    fd = -1;
    errno = saved;
  }
  if (fd < 0) {
    *error = errno;
    snprintf(why, capacity, "%s", strerror(*error));
    return -1;
  }
  if (!S_ISREG(st->st_mode)) {
    *error = 0;
    snprintf(why, capacity, "not a regular file (%s)", file_type(st->st_mode));
    close(fd);
    return -1;
  }
  return fd;
}

/* Files others can change decide what code runs: worth a note when asked. */
static void note_permissions(const char *path, const struct stat *st, const char *what) {
  if (st->st_mode & S_IWOTH)
    tsr__log(TSR_LOG_DEBUG, "%s: world-writable %s (mode %04o): any user can change it", path, what,
             (unsigned)(st->st_mode & 07777));
  uid_t self = geteuid();
  if (st->st_uid != self && st->st_uid != 0)
    tsr__log(TSR_LOG_DEBUG, "%s: owned by uid %u, neither this user (uid %u) nor root", path,
             (unsigned)st->st_uid, (unsigned)self);
}

/* ------------------------------------------------------------------------ */
/* Manifests                                                                 */
/* ------------------------------------------------------------------------ */

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  char *end = s + strlen(s);
  while (end > s && isspace((unsigned char)end[-1]))
    *--end = '\0';
  return s;
}

/* Longest `name =` value; the report's name field holds it. */
#define MAX_NAME 63

/* A manifest's `name =`: what filters match and devices are reported under.
 * Characters that list separators or paths use are refused, so a name always
 * reads back as one entry of TESSERA_BACKENDS. */
static bool valid_name(const char *name) {
  if (!*name || *name == '.')
    return false;
  for (const char *c = name; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_' && *c != '.')
      return false;
  return true;
}

/* One line (terminated, comment removed by the caller's copy). `name`
 * (MAX_NAME + 1 bytes) receives a `name =` value. */
static bool parse_line(char *line, int number, const char *origin, tsr__manifest *out, char *name,
                       char *reason, size_t capacity) {
  char *hash = strchr(line, '#');
  if (hash)
    *hash = '\0';
  char *text = trim(line);
  if (!*text)
    return true;
  char *eq = strchr(text, '=');
  if (!eq) {
    snprintf(reason, capacity, "manifest: line %d: expected 'key = value'", number);
    return false;
  }
  *eq = '\0';
  char *key = trim(text);
  char *value = trim(eq + 1);
  size_t length = strlen(value);
  if (!strcmp(key, "library")) {
    if (!length) {
      snprintf(reason, capacity, "manifest: line %d: empty library", number);
      return false;
    }
    if (length >= sizeof out->library) {
      snprintf(reason, capacity,
               "manifest: line %d: library path too long (%zu bytes, at most %zu)", number, length,
               sizeof out->library - 1);
      return false;
    }
    memcpy(out->library, value, length + 1);
  } else if (!strcmp(key, "abi")) {
    char *end = NULL;
    errno = 0;
    unsigned long abi = strtoul(value, &end, 10);
    if (!*value || *end || errno || abi == 0 || abi > UINT32_MAX ||
        !isdigit((unsigned char)*value)) {
      snprintf(reason, capacity, "manifest: line %d: abi = '%.64s' is not a positive integer",
               number, value);
      return false;
    }
    out->abi = (uint32_t)abi;
  } else if (!strcmp(key, "arch")) {
    if (length >= sizeof out->arch) {
      snprintf(reason, capacity, "manifest: line %d: arch too long (%zu bytes, at most %zu)",
               number, length, sizeof out->arch - 1);
      return false;
    }
    memcpy(out->arch, value, length + 1);
  } else if (!strcmp(key, "name")) {
    if (length > MAX_NAME) {
      snprintf(reason, capacity, "manifest: line %d: name too long (%zu bytes, at most %d)", number,
               length, MAX_NAME);
      return false;
    }
    if (!valid_name(value)) {
      snprintf(reason, capacity,
               "manifest: line %d: name = '%.64s': letters, digits, '-', '_' and '.' only, not "
               "starting with '.'",
               number, value);
      return false;
    }
    memcpy(name, value, length + 1);
  } else {
    /* Unknown keys are allowed (newer manifests) but noted. */
    tsr__log(TSR_LOG_DEBUG, "%s: line %d: unknown key '%.64s' ignored", origin, number, key);
  }
  return true;
}

/* tsr__parse_manifest with the `name =` value ("" when not given) into
 * `name` (MAX_NAME + 1 bytes). */
static bool parse_manifest(const char *text, size_t size, const char *origin, tsr__manifest *out,
                           char *name, char *reason, size_t capacity) {
  memset(out, 0, sizeof *out);
  name[0] = '\0';
  char line[MAX_LINE + 1];
  int number = 0;
  size_t at = 0;
  while (at < size) {
    number++;
    const char *start = text + at;
    const char *newline = memchr(start, '\n', size - at);
    size_t length = newline ? (size_t)(newline - start) : size - at;
    at += length + (newline ? 1 : 0);
    if (length > MAX_LINE) {
      snprintf(reason, capacity, "manifest: line %d: too long (over %d bytes)", number, MAX_LINE);
      return false;
    }
    for (size_t i = 0; i < length; i++) {
      unsigned char c = (unsigned char)start[i];
      if (c < 0x20 && c != '\t' && c != '\r') {
        snprintf(reason, capacity, "manifest: line %d: control character 0x%02x (not a text file)",
                 number, c);
        return false;
      }
    }
    memcpy(line, start, length);
    line[length] = '\0';
    if (!parse_line(line, number, origin, out, name, reason, capacity))
      return false;
  }
  if (!out->library[0]) {
    snprintf(reason, capacity, "manifest: no 'library' key");
    return false;
  }
  return true;
}

bool tsr__parse_manifest(const char *text, size_t size, const char *origin, tsr__manifest *out,
                         char *reason, size_t capacity) {
  char name[MAX_NAME + 1];
  return parse_manifest(text, size, origin, out, name, reason, capacity);
}

/* Reads and parses the manifest at `path`; false with a reason. */
static bool read_manifest(const char *path, tsr__manifest *out, char *name, char *reason,
                          size_t capacity) {
  struct stat st;
  char why[256];
  int error;
  int fd = open_regular(path, &st, why, sizeof why, &error);
  if (fd < 0) {
    snprintf(reason, capacity, "cannot read manifest: %s", why);
    return false;
  }
  note_permissions(path, &st, "manifest");
  char *text = malloc(MAX_MANIFEST_BYTES + 1);
  if (!text) {
    close(fd);
    snprintf(reason, capacity, "cannot read manifest: out of memory");
    return false;
  }
  size_t size = 0;
  bool ok = true;
  while (ok) {
    ssize_t n = read(fd, text + size, MAX_MANIFEST_BYTES + 1 - size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      snprintf(reason, capacity, "cannot read manifest: %s", strerror(errno));
      ok = false;
    } else if (n == 0) {
      break;
    } else if ((size += (size_t)n) > MAX_MANIFEST_BYTES) {
      snprintf(reason, capacity, "manifest: larger than %d bytes", MAX_MANIFEST_BYTES);
      ok = false;
    }
  }
  close(fd);
  ok = ok && parse_manifest(text, size, path, out, name, reason, capacity);
  free(text);
  return ok;
}

/* Resolves the manifest's library into `out`: paths with a '/' are relative
 * to the manifest's directory unless absolute, never to the current
 * directory; bare names go to the dynamic linker. False with a reason when
 * the result does not fit. */
static bool resolve_library(const char *manifest_path, const char *library, char *out,
                            size_t capacity, char *reason, size_t reason_capacity) {
  size_t length = strlen(library);
  if (!strchr(library, '/') || library[0] == '/') {
    if (length >= capacity) { /* parse_manifest refuses these already */
      snprintf(reason, reason_capacity, "library path too long (%zu bytes)", length);
      return false;
    }
    memcpy(out, library, length + 1);
    return true;
  }
  /* The manifest path always holds a '/' (it is <dir>/<name>.conf). */
  const char *slash = strrchr(manifest_path, '/');
  char *dir = slash ? strndup(manifest_path, (size_t)(slash - manifest_path)) : strdup(".");
  if (dir && dir[0] != '/') {
    /* A relative plugins.d: fixed now, so a later chdir cannot move it. */
    char *absolute = realpath(dir, NULL);
    free(dir);
    dir = absolute;
  }
  if (!dir) {
    snprintf(reason, reason_capacity, "cannot resolve the manifest's directory: %s",
             strerror(errno));
    return false;
  }
  int n = snprintf(out, capacity, "%s/%s", dir, library);
  if (n < 0 || (size_t)n >= capacity) {
    snprintf(reason, reason_capacity, "library path too long: %s/%s is %d bytes, at most %zu", dir,
             library, n, capacity - 1);
    free(dir);
    return false;
  }
  free(dir);
  return true;
}

/* ------------------------------------------------------------------------ */
/* Host services                                                             */
/* ------------------------------------------------------------------------ */

/* Guards every slot's capture_log and last_message; held for a copy only. */
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;

void tsr__plugin_last_message(tsr_plugin_slot *slot, char *buf, size_t capacity) {
  pthread_mutex_lock(&capture_lock);
  tsr__strlcpy(buf, slot->last_message, capacity);
  pthread_mutex_unlock(&capture_lock);
}

void tsr__plugin_capture_end(tsr_plugin_slot *slot) {
  pthread_mutex_lock(&capture_lock);
  slot->capture_log = false;
  pthread_mutex_unlock(&capture_lock);
}

static void host_log(void *handle, int level, const char *fmt, ...) {
  tsr_plugin_slot *slot = handle;
  bool capture = false;
  if (slot) {
    pthread_mutex_lock(&capture_lock);
    capture = slot->capture_log;
    pthread_mutex_unlock(&capture_lock);
  }
  bool print = level <= tsr__log_level();
  if (!capture && !print)
    return;
  char line[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (capture) {
    /* Kept whatever the log level: a plugin with no device says why here. */
    pthread_mutex_lock(&capture_lock);
    if (slot->capture_log)
      tsr__strlcpy(slot->last_message, line, sizeof slot->last_message);
    pthread_mutex_unlock(&capture_lock);
  }
  if (print)
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

/* ------------------------------------------------------------------------ */
/* Loading one plugin                                                        */
/* ------------------------------------------------------------------------ */

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
  tsr__plugin_capture_end(slot);
  if (slot->library) {
    dlclose(slot->library);
    slot->library = NULL;
  }
  slot->table = NULL;
  slot->v1 = NULL;
}

/* The filters in force and where they came from (for reasons and warnings). */
typedef struct filters {
  const char *only, *only_source;
  const char *drop, *drop_source;
} filters;

/* Checks a library named by path before dlopen: it must exist and be a
 * regular file (dlopen of a FIFO blocks). The file may still change before
 * dlopen opens it again; this guards against mistakes, not against someone
 * who can write to the plugin directories. */
static bool check_library_file(tsr_plugin_slot *slot) {
  const char *path = slot->report.library;
  struct stat st;
  char why[256];
  int error;
  int fd = open_regular(path, &st, why, sizeof why, &error);
  if (fd >= 0) {
    note_permissions(path, &st, "plugin library");
    close(fd);
    return true;
  }
  if (error == ENOENT || error == ENOTDIR)
    skip(slot, TSR_PLUGIN_SKIPPED, "library not found: %s (%s)", path, why);
  else if (error == 0)
    skip(slot, TSR_PLUGIN_SKIPPED, "library is %s: %s", why, path);
  else
    skip(slot, TSR_PLUGIN_SKIPPED, "cannot open library %s (%s)", path, why);
  return false;
}

/* An earlier plugin with the same dlopen handle (the dynamic linker returns
 * one handle per file, whatever path or symlink named it). */
static const tsr_plugin_slot *same_library(const tsr_plugin_slot *slot) {
  const tsr_plugin_slot *plugins = slot->context->plugins;
  for (const tsr_plugin_slot *other = plugins; other < slot; other++)
    if (other->library == slot->library)
      return other;
  return NULL;
}

/* A manifest found in a plugins.d directory, read before anything loads:
 * its name decides filters and duplicates. */
typedef struct found_manifest {
  char *name; /* its `name =`, else the file name without .conf */
  char *path;
  bool read;       /* `manifest` holds it; else `problem` says why not */
  bool other_arch; /* for another architecture: it claims no name */
  tsr__manifest manifest;
  char problem[sizeof(((tsr_plugin_report *)NULL)->reason)];
} found_manifest;

static void load_one(tsr_plugin_slot *slot, const filters *f, const found_manifest *fm) {
  tsr_plugin_report *r = &slot->report;
  const tsr__manifest *m = &fm->manifest;
  char reason[sizeof r->reason];
  if (!fm->read) {
    skip(slot, TSR_PLUGIN_SKIPPED, "%s", fm->problem);
    return;
  }
  if (!resolve_library(r->manifest, m->library, r->library, sizeof r->library, reason,
                       sizeof reason)) {
    tsr__strlcpy(r->library, m->library, sizeof r->library); /* as written: it fits */
    skip(slot, TSR_PLUGIN_SKIPPED, "%s", reason);
    return;
  }
  if (f->only && *f->only && !tsr__list_contains(f->only, r->name)) {
    skip(slot, TSR_PLUGIN_FILTERED, "not in %s=%s", f->only_source, f->only);
    return;
  }
  if (f->drop && tsr__list_contains(f->drop, r->name)) {
    skip(slot, TSR_PLUGIN_FILTERED, "in %s=%s", f->drop_source, f->drop);
    return;
  }
  if (m->arch[0] && strcmp(m->arch, TSR_ARCH) != 0) {
    skip(slot, TSR_PLUGIN_SKIPPED, "manifest arch = %s but this is %s", m->arch, TSR_ARCH);
    return;
  }
  if (m->abi && m->abi > TSR_PLUGIN_ABI_VERSION) {
    skip(slot, TSR_PLUGIN_SKIPPED,
         "manifest abi = %u: plugin speaks only ABI versions newer than %d", m->abi,
         TSR_PLUGIN_ABI_VERSION);
    return;
  }
  if (strchr(r->library, '/') && !check_library_file(slot))
    return;

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
  /* Two plugins on one handle would share the library's state and init it
   * twice: the first manifest keeps it. */
  const tsr_plugin_slot *first = same_library(slot);
  if (first) {
    skip(slot, TSR_PLUGIN_SKIPPED, "same library as plugin '%s' (%s)", first->report.name,
         first->report.manifest);
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
  const void *entries = entry(abi);
  if (!entries) {
    skip(slot, TSR_PLUGIN_SKIPPED, "%s(%u) returned no table", TSR_PLUGIN_ENTRY_SYMBOL, abi);
    return;
  }
  /* Both tables start with struct_size and abi_version. */
  const tsr_plugin_v1 *v1 = abi == 1 ? entries : NULL;
  const tsr_plugin_v2 *v2 = abi == 2 ? entries : NULL;
  uint32_t struct_size = v1 ? v1->struct_size : v2->struct_size;
  uint32_t table_abi = v1 ? v1->abi_version : v2->abi_version;
  /* ABI 2 tables grew by appending entries: the first release's size is
   * the minimum, and what a table lacks of ours reads as NULL. */
  size_t expected = v1 ? sizeof(tsr_plugin_v1) : TSR_PLUGIN_V2_MIN_SIZE;
  if (struct_size < expected || table_abi != abi) {
    skip(slot, TSR_PLUGIN_SKIPPED,
         "function table is malformed (struct_size %u, abi_version %u; expected >= %zu, %u)",
         struct_size, table_abi, expected, abi);
    return;
  }
  if (v1)
    tsr__plugin_entries_from_v1(v1, &slot->entries);
  else {
    memset(&slot->entries, 0, sizeof slot->entries);
    memcpy(&slot->entries, v2,
           struct_size < sizeof slot->entries ? struct_size : sizeof slot->entries);
  }
  const char *missing =
      tsr__plugin_missing_entry(&slot->entries, v1 ? v1->init != NULL : v2->init != NULL,
                                v1 ? v1->op_run != NULL : v2->op_run != NULL);
  if (!missing && v2 && !v2->op_select)
    missing = "op_select";
  if (missing) {
    skip(slot, TSR_PLUGIN_SKIPPED, "function table lacks required entry '%s'", missing);
    return;
  }
  const tsr_plugin_v2 *table = &slot->entries;
  /* The name becomes every device's backend and selector prefix: cut, two
   * plugins could share one. */
  size_t name_length = strlen(table->name);
  const size_t backend_capacity = sizeof(((tsr_device_info *)NULL)->backend);
  if (name_length == 0 || name_length >= backend_capacity) {
    skip(slot, TSR_PLUGIN_SKIPPED,
         "plugin name '%.64s' is %zu characters; it must have 1 to %zu (a device's backend field)",
         table->name, name_length, backend_capacity - 1);
    return;
  }
  slot->table = table;
  slot->v1 = v1;
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
  slot->host_v2.struct_size = sizeof slot->host_v2;
  slot->host_v2.abi_version = abi;
  slot->host_v2.log = host_log;
  slot->host_v2.set_error = host_set_error;
  slot->host_v2.get_env = tsr__getenv;
  slot->host_v2.host_handle = slot;

  pthread_mutex_lock(&capture_lock);
  slot->capture_log = true; /* until enumeration ends (context.c) */
  slot->last_message[0] = '\0';
  pthread_mutex_unlock(&capture_lock);
  char init_reason[400] = "";
  tsr_status st = v1 ? v1->init(&slot->host, &slot->state, init_reason, sizeof init_reason)
                     : v2->init(&slot->host_v2, &slot->state, init_reason, sizeof init_reason);
  if (st != TSR_OK) {
    char detail[768] = "", last[sizeof slot->last_message];
    tsr__take_plugin_error(detail, sizeof detail);
    tsr__plugin_last_message(slot, last, sizeof last);
    r->abi_version = 0;
    skip(slot, TSR_PLUGIN_SKIPPED, "init failed: %s (%s)",
         init_reason[0] ? init_reason : (detail[0] ? detail : (last[0] ? last : "no reason given")),
         tsr_status_name(st));
    return;
  }
  r->state = TSR_PLUGIN_LOADED;
  r->reason[0] = '\0';
  r->device_count = table->device_count(slot->state);
  tsr__log(TSR_LOG_DEBUG, "plugin '%s' loaded from %s: ABI %u, %u device(s)%s%s", r->name,
           r->library, abi, r->device_count, init_reason[0] ? ": " : "", init_reason);
}

/* ------------------------------------------------------------------------ */
/* Discovery                                                                 */
/* ------------------------------------------------------------------------ */

static int conf_filter(const struct dirent *entry) {
  size_t n = strlen(entry->d_name);
  return n > 5 && entry->d_name[0] != '.' && !strcmp(entry->d_name + n - 5, ".conf");
}

/* Copies `src` into `dst` whole, or its start and "..." when it does not fit
 * (only for reports of what was refused). */
static void copy_marked(char *dst, size_t capacity, const char *src) {
  size_t length = strlen(src);
  if (length < capacity) {
    memcpy(dst, src, length + 1);
    return;
  }
  memcpy(dst, src, capacity - 4);
  memcpy(dst + capacity - 4, "...", 4);
}

/* Warns about each name of a filter list that no manifest has: a typo
 * otherwise filters silently. */
static void warn_unmatched(const char *list, const char *source, const found_manifest *found,
                           size_t found_count) {
  if (!list)
    return;
  for (const char *p = list; *p;) {
    while (*p == ',' || *p == ' ')
      p++;
    const char *end = p;
    while (*end && *end != ',' && *end != ' ')
      end++;
    size_t length = (size_t)(end - p);
    bool matched = length == 0;
    for (size_t i = 0; i < found_count && !matched; i++)
      matched = strlen(found[i].name) == length && !strncmp(found[i].name, p, length);
    for (const char *q = list; q < p && !matched; q++) /* named before: warned once */
      matched = (q == list || q[-1] == ',' || q[-1] == ' ') && !strncmp(q, p, length) &&
                (q[length] == ',' || q[length] == ' ');
    if (!matched)
      tsr__log(TSR_LOG_WARN,
               "%s names '%.*s', but no manifest has that name (name = key or file name)", source,
               (int)length, p);
    p = end;
  }
}

/* Lists the .conf files of directory `dir` (searched) into `found`. */
static tsr_status scan_dir(tsr__search_dir *dir, found_manifest **found, size_t *count,
                           size_t *capacity) {
  struct stat st;
  if (stat(dir->path, &st) == 0 && S_ISDIR(st.st_mode))
    note_permissions(dir->path, &st, "plugins.d directory");
  struct dirent **entries = NULL;
  int n = scandir(dir->path, &entries, conf_filter, alphasort);
  if (n < 0) {
    int error = errno;
    snprintf(dir->note, sizeof dir->note, "%s",
             error == ENOENT    ? "does not exist"
             : error == ENOTDIR ? "not a directory"
                                : strerror(error));
    tsr__log(TSR_LOG_DEBUG, "plugins.d %s: %s", dir->path, strerror(error));
    return TSR_OK;
  }
  dir->exists = true;
  snprintf(dir->note, sizeof dir->note, "exists, %d manifest%s", n, n == 1 ? "" : "s");
  tsr__log(TSR_LOG_DEBUG, "plugins.d %s: %d manifest(s)", dir->path, n);
  tsr_status status = TSR_OK;
  for (int i = 0; i < n; i++) {
    if (status == TSR_OK && *count == *capacity) {
      size_t grown_capacity = *capacity ? *capacity * 2 : 8;
      found_manifest *grown = realloc(*found, grown_capacity * sizeof *grown);
      if (grown) {
        *found = grown;
        *capacity = grown_capacity;
      } else {
        status = TSR_ERROR_OUT_OF_MEMORY;
      }
    }
    if (status == TSR_OK) {
      found_manifest *fm = &(*found)[*count];
      memset(fm, 0, sizeof *fm);
      const char *file = entries[i]->d_name;
      fm->name = strndup(file, strlen(file) - 5);
      fm->path = malloc(strlen(dir->path) + 1 + strlen(file) + 1);
      if (fm->name && fm->path) {
        sprintf(fm->path, "%s/%s", dir->path, file);
        (*count)++;
      } else {
        free(fm->name);
        free(fm->path);
        status = TSR_ERROR_OUT_OF_MEMORY;
      }
    }
    free(entries[i]);
  }
  free(entries);
  return status;
}

static void free_found(found_manifest *found, size_t count) {
  for (size_t i = 0; i < count; i++) {
    free(found[i].name);
    free(found[i].path);
  }
  free(found);
}

static void free_search_dirs(tsr__search_dir *dirs, size_t count) {
  for (size_t i = 0; i < count; i++)
    free(dirs[i].path);
  free(dirs);
}

/* Reports of what does not fit a report are refused here, before loading. */
static bool refuse_unfit(tsr_plugin_slot *slot, const found_manifest *fm) {
  size_t name_length = strlen(fm->name), path_length = strlen(fm->path);
  if (name_length >= sizeof slot->report.name) {
    skip(slot, TSR_PLUGIN_SKIPPED, "manifest name too long: %zu characters, at most %zu",
         name_length, sizeof slot->report.name - 1);
    return true;
  }
  if (path_length >= sizeof slot->report.manifest) {
    skip(slot, TSR_PLUGIN_SKIPPED, "manifest path too long: %zu bytes, at most %zu", path_length,
         sizeof slot->report.manifest - 1);
    return true;
  }
  return false;
}

/* Reads the manifest of `fm` (path fits a report) and takes its `name =` in
 * place of the file name, so per-architecture files (cpu.x86_64-linux-gnu.conf)
 * match TESSERA_BACKENDS=cpu. A manifest that cannot be read keeps its file
 * name and says why when it is loaded. False when out of memory. */
static bool read_found(found_manifest *fm) {
  char name[MAX_NAME + 1];
  fm->read = read_manifest(fm->path, &fm->manifest, name, fm->problem, sizeof fm->problem);
  if (!fm->read)
    return true;
  fm->other_arch = fm->manifest.arch[0] && strcmp(fm->manifest.arch, TSR_ARCH) != 0;
  if (!name[0] || !strcmp(name, fm->name))
    return true;
  char *copy = strdup(name);
  if (!copy)
    return false;
  free(fm->name);
  fm->name = copy;
  return true;
}

tsr_status tsr__load_plugins(struct tsr_context *context, const tsr_context_options *options) {
  static const char call[] = "tsr_context_create";
  dir_list dirs = {NULL, 0, 0, false};
  build_search_dirs(options, &dirs);
  if (dirs.out_of_memory) {
    free_search_dirs(dirs.dirs, dirs.count);
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of memory building the search path");
  }
  context->search_dirs = dirs.dirs;
  context->search_dir_count = (uint32_t)dirs.count;

  found_manifest *found = NULL;
  size_t found_count = 0, found_capacity = 0;
  for (size_t d = 0; d < dirs.count; d++) {
    tsr__search_dir *dir = &dirs.dirs[d];
    if (d >= MAX_DIRS) {
      struct stat st;
      dir->exists = stat(dir->path, &st) == 0 && S_ISDIR(st.st_mode);
      snprintf(dir->note, sizeof dir->note, "not searched: more than %d directories", MAX_DIRS);
      continue;
    }
    if (scan_dir(dir, &found, &found_count, &found_capacity) != TSR_OK) {
      free_found(found, found_count);
      return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of memory reading manifests");
    }
  }
  if (dirs.count > MAX_DIRS)
    tsr__log(TSR_LOG_WARN,
             "plugin search path: %zu director%s after the first %d not searched, from %s on",
             dirs.count - MAX_DIRS, dirs.count - MAX_DIRS == 1 ? "y" : "ies", MAX_DIRS,
             dirs.dirs[MAX_DIRS].path);

  /* Every manifest is read before any loads: names decide duplicates. One
   * whose path does not fit a report is refused unread below. */
  for (size_t i = 0; i < found_count; i++) {
    if (strlen(found[i].path) < sizeof(((tsr_plugin_report *)NULL)->manifest) &&
        !read_found(&found[i])) {
      free_found(found, found_count);
      return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of memory reading manifests");
    }
  }

  filters f = {NULL, "TESSERA_BACKENDS", NULL, "TESSERA_DISABLE_BACKENDS"};
  f.only = tsr__getenv("TESSERA_BACKENDS");
  f.drop = tsr__getenv("TESSERA_DISABLE_BACKENDS");
  if (options && options->backends) {
    f.only = options->backends;
    f.only_source = "options.backends";
  }
  if (options && options->disable_backends) {
    f.drop = options->disable_backends;
    f.drop_source = "options.disable_backends";
  }

  /* Slots are allocated once, so the host-services tables handed to plugins
   * never move. */
  context->plugins = found_count ? calloc(found_count, sizeof *context->plugins) : NULL;
  if (found_count && !context->plugins) {
    free_found(found, found_count);
    return tsr__fail(TSR_ERROR_OUT_OF_MEMORY, call, "out of memory");
  }
  context->plugin_count = (uint32_t)found_count;
  for (size_t i = 0; i < found_count; i++) {
    tsr_plugin_slot *slot = &context->plugins[i];
    slot->context = context;
    slot->report.struct_size = sizeof slot->report;
    copy_marked(slot->report.name, sizeof slot->report.name, found[i].name);
    copy_marked(slot->report.manifest, sizeof slot->report.manifest, found[i].path);
    if (refuse_unfit(slot, &found[i]))
      continue;
    /* Manifests of other architectures (multiarch systems install one per
     * architecture, same name) neither claim a name nor lose it: each is
     * skipped for its arch in load_one. */
    const found_manifest *first = NULL;
    for (size_t j = 0; j < i && !first && !found[i].other_arch; j++)
      if (!found[j].other_arch && !strcmp(found[j].name, found[i].name))
        first = &found[j];
    if (first) {
      skip(slot, TSR_PLUGIN_SKIPPED, "duplicate name: %s was first found at %s", found[i].name,
           first->path);
      continue;
    }
    load_one(slot, &f, &found[i]);
  }
  if (f.only && *f.only)
    warn_unmatched(f.only, f.only_source, found, found_count);
  if (f.drop)
    warn_unmatched(f.drop, f.drop_source, found, found_count);
  free_found(found, found_count);
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
  free_search_dirs(context->search_dirs, context->search_dir_count);
  context->search_dirs = NULL;
  context->search_dir_count = 0;
}
