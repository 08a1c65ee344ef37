/* SPDX-License-Identifier: Apache-2.0 */
/* The tuning database: the user file and the packaged files, parsed once into
 * one hash index (an immutable snapshot that lookups share by reference
 * count) and loaded again only when a file changes. The files are looked at
 * (a stat of each) at most once per TESSERA_TUNING_RECHECK_MS (default
 * 1000 ms; 0: every lookup), so another program's edit is seen within that
 * time, and tsr_tuning_record's own rows at once; in between a lookup is a
 * hash probe. Scanning the rows on every call cost ~1 ms a call with 100,000
 * rows, and a stat per call a few microseconds. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ---- rows ---- */

static bool is_separator(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool tsr__tuning_split_row(const char *line, size_t length, const char *field[5],
                           size_t field_length[5]) {
  if (memchr(line, '\0', length))
    return false; /* not text */
  const char *hash = memchr(line, '#', length);
  if (hash)
    length = (size_t)(hash - line);
  int n = 0;
  size_t i = 0;
  while (i < length) {
    while (i < length && is_separator(line[i]))
      i++;
    if (i == length)
      break;
    size_t start = i;
    while (i < length && !is_separator(line[i]))
      i++;
    if (n == 5)
      return false;
    field[n] = line + start;
    field_length[n] = i - start;
    n++;
  }
  return n == 5;
}

/* ---- the index ---- */

/* One row, copied into the index's arena as "device\top\tdtype\tshape\0variant\0". */
typedef struct index_row {
  size_t offset;
  uint32_t key_length;
  int line;
} index_row;

/* Every row of one key in the first file that has it: later files are
 * shadowed. `first` answers a wildcard query ("*" rows: the first row of a
 * file wins), `last` an exact one (later rows override earlier ones). */
typedef struct index_entry {
  uint64_t hash;
  int file;
  index_row first, last;
  atomic_uchar warned; /* bit 0: first, bit 1: last */
} index_entry;

struct tsr__tuning_index {
  char *arena;
  size_t arena_used, arena_capacity;
  index_entry *entries;
  uint32_t entry_count, entry_capacity;
  uint32_t *slots; /* entry index + 1, 0 when empty; open addressing */
  uint32_t slot_mask;
  size_t row_count;
};

static uint64_t hash_bytes(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 0x100000001b3ULL; /* FNV-1a */
  }
  return h;
}

static const uint64_t HASH_SEED = 0xcbf29ce484222325ULL;

/* FNV-1a of a key, its bits mixed (MurmurHash3's finaliser): the table uses
 * the low bits, which FNV leaves clustered for keys differing in one digit. */
static uint64_t hash_key(const char *key, size_t length) {
  uint64_t h = hash_bytes(HASH_SEED, key, length);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

tsr__tuning_index *tsr__tuning_index_create(void) {
  return calloc(1, sizeof(tsr__tuning_index));
}

void tsr__tuning_index_destroy(tsr__tuning_index *index) {
  if (!index)
    return;
  free(index->arena);
  free(index->entries);
  free(index->slots);
  free(index);
}

size_t tsr__tuning_index_rows(const tsr__tuning_index *index) {
  return index->row_count;
}

static const char *row_key(const tsr__tuning_index *index, const index_row *row) {
  return index->arena + row->offset;
}

/* The entry of a key, or -1. */
static int64_t find_entry(const tsr__tuning_index *index, const char *key, size_t length,
                          uint64_t hash) {
  if (!index->slots)
    return -1;
  for (uint32_t i = (uint32_t)hash & index->slot_mask;; i = (i + 1) & index->slot_mask) {
    uint32_t slot = index->slots[i];
    if (slot == 0)
      return -1;
    const index_entry *e = &index->entries[slot - 1];
    if (e->hash == hash && e->first.key_length == length &&
        !memcmp(row_key(index, &e->first), key, length))
      return slot - 1;
  }
}

static void place(tsr__tuning_index *index, uint32_t entry) {
  uint32_t i = (uint32_t)index->entries[entry].hash & index->slot_mask;
  while (index->slots[i])
    i = (i + 1) & index->slot_mask;
  index->slots[i] = entry + 1;
}

/* Keeps the table at most half full. */
static bool reserve_entry(tsr__tuning_index *index) {
  if (index->entry_count == index->entry_capacity) {
    if (index->entry_capacity >= UINT32_MAX / 4)
      return false;
    uint32_t capacity = index->entry_capacity ? index->entry_capacity * 2 : 64;
    index_entry *entries = realloc(index->entries, (size_t)capacity * sizeof *entries);
    if (!entries)
      return false;
    index->entries = entries;
    index->entry_capacity = capacity;
  }
  size_t slot_count = index->slots ? (size_t)index->slot_mask + 1 : 0;
  if ((size_t)(index->entry_count + 1) * 2 <= slot_count)
    return true;
  size_t count = slot_count ? slot_count * 2 : 128;
  uint32_t *slots = calloc(count, sizeof *slots);
  if (!slots)
    return false;
  free(index->slots);
  index->slots = slots;
  index->slot_mask = (uint32_t)(count - 1);
  for (uint32_t e = 0; e < index->entry_count; e++)
    place(index, e);
  return true;
}

static bool add_row(tsr__tuning_index *index, int file, int line, const char *field[5],
                    const size_t length[5]) {
  size_t key_length = length[0] + length[1] + length[2] + length[3] + 3;
  size_t need = key_length + 1 + length[4] + 1;
  if (key_length > UINT32_MAX || need > SIZE_MAX - index->arena_used)
    return false;
  if (index->arena_used + need > index->arena_capacity) {
    size_t capacity = index->arena_capacity ? index->arena_capacity : 4096;
    while (capacity < index->arena_used + need)
      capacity *= 2;
    char *arena = realloc(index->arena, capacity);
    if (!arena)
      return false;
    index->arena = arena;
    index->arena_capacity = capacity;
  }
  index_row row = {index->arena_used, (uint32_t)key_length, line};
  char *p = index->arena + index->arena_used;
  for (int i = 0; i < 5; i++) {
    memcpy(p, field[i], length[i]);
    p += length[i];
    *p++ = i < 3 ? '\t' : '\0';
  }
  const char *key = index->arena + row.offset;
  uint64_t hash = hash_key(key, key_length);
  int64_t found = find_entry(index, key, key_length, hash);
  if (found >= 0) {
    index_entry *e = &index->entries[found];
    if (e->file != file)
      return true; /* an earlier file has this key: the row is shadowed, not kept */
    e->last = row;
  } else {
    if (!reserve_entry(index))
      return false;
    index_entry *e = &index->entries[index->entry_count];
    e->hash = hash;
    e->file = file;
    e->first = e->last = row;
    atomic_init(&e->warned, 0);
    place(index, index->entry_count++);
  }
  index->arena_used += need;
  index->row_count++;
  return true;
}

bool tsr__tuning_index_add(tsr__tuning_index *index, int file, const char *text, size_t size) {
  if (size == 0)
    return true;
  const char *p = text, *end = text + size;
  for (int line = 1; p < end && line < INT_MAX; line++) {
    const char *newline = memchr(p, '\n', (size_t)(end - p));
    const char *stop = newline ? newline : end;
    const char *field[5];
    size_t length[5];
    if (tsr__tuning_split_row(p, (size_t)(stop - p), field, length) &&
        !add_row(index, file, line, field, length))
      return false;
    p = newline ? newline + 1 : end;
  }
  return true;
}

/* "device\top\tdtype\tshape" of a query into buf; false when a part could
 * not be a row's field (empty, or holding a separator or '#'). */
static bool query_key(const char *const part[4], char *buf, size_t capacity, size_t *length) {
  size_t used = 0;
  for (int i = 0; i < 4; i++) {
    size_t n = strlen(part[i]);
    if (n == 0 || used + n + 1 > capacity)
      return false;
    for (size_t j = 0; j < n; j++)
      if (is_separator(part[i][j]) || part[i][j] == '#')
        return false;
    memcpy(buf + used, part[i], n);
    used += n;
    buf[used++] = '\t';
  }
  *length = used - 1;
  return true;
}

static void fill_row(const tsr__tuning_index *index, uint32_t entry, bool last,
                     tsr__tuning_row *out) {
  const index_entry *e = &index->entries[entry];
  const index_row *row = last ? &e->last : &e->first;
  bool distinct = last && e->last.offset != e->first.offset;
  out->file = e->file;
  out->line = row->line;
  out->variant = row_key(index, row) + row->key_length + 1;
  out->id = entry * 2u + (distinct ? 1u : 0u);
}

bool tsr__tuning_index_find(const tsr__tuning_index *index, const tsr__tuning_key *key,
                            tsr__tuning_row *out) {
  if (index->entry_count == 0)
    return false;
  char buf[1024];
  size_t length;
  const char *part[4] = {key->device_key, key->op, key->dtype, key->shape_class};
  if (!query_key(part, buf, sizeof buf, &length))
    return false;
  int64_t exact = find_entry(index, buf, length, hash_key(buf, length));
  part[3] = "*";
  int64_t wildcard = -1;
  if (query_key(part, buf, sizeof buf, &length))
    wildcard = find_entry(index, buf, length, hash_key(buf, length));
  /* The first file with either row wins; within a file the exact row. */
  if (exact >= 0 && (wildcard < 0 || index->entries[exact].file <= index->entries[wildcard].file))
    fill_row(index, (uint32_t)exact, true, out);
  else if (wildcard >= 0)
    fill_row(index, (uint32_t)wildcard, false, out);
  else
    return false;
  return true;
}

bool tsr__tuning_index_claim_warning(tsr__tuning_index *index, uint32_t id) {
  if (id / 2 >= index->entry_count)
    return false;
  unsigned char bit = (unsigned char)(1u << (id % 2));
  return !(atomic_fetch_or(&index->entries[id / 2].warned, bit) & bit);
}

/* ---- files ---- */

int tsr__tuning_read_file(const char *path, size_t max_size, char **text, size_t *size,
                          struct stat *identity) {
  *text = NULL;
  *size = 0;
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return errno;
  int err = 0;
  if (fstat(fd, identity) != 0) {
    err = errno;
  } else if (!S_ISREG(identity->st_mode)) {
    err = -1;
  } else if (identity->st_size < 0 || (uintmax_t)identity->st_size > max_size) {
    err = EFBIG;
  } else {
    size_t want = (size_t)identity->st_size;
    char *buf = malloc(want + 1);
    size_t got = 0;
    if (!buf)
      err = ENOMEM;
    while (buf && got < want) {
      ssize_t n = read(fd, buf + got, want - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0) {
        err = errno;
        break;
      }
      if (n == 0)
        break; /* shrank since fstat: the next check sees the new size */
      got += (size_t)n;
    }
    if (err) {
      free(buf);
    } else {
      buf[got] = '\0';
      *text = buf;
      *size = got;
    }
  }
  close(fd);
  return err;
}

int tsr__tuning_user_path_env(char *buf, size_t capacity) {
  const char *explicit_path = tsr__getenv("TESSERA_TUNING_DB");
  if (explicit_path && *explicit_path)
    return snprintf(buf, capacity, "%s", explicit_path);
  /* The XDG base directory spec: a relative path is invalid, as if unset.
   * A relative HOME would name a directory that moves with the process's
   * working directory, so it is ignored as well. */
  const char *cache = tsr__getenv("XDG_CACHE_HOME");
  if (cache && cache[0] == '/')
    return snprintf(buf, capacity, "%s/tessera/tuning.tsv", cache);
  const char *home = tsr__getenv("HOME");
  if (home && home[0] == '/')
    return snprintf(buf, capacity, "%s/.cache/tessera/tuning.tsv", home);
  return -1;
}

/* ---- the loaded database ---- */

enum { MAX_SYSTEM_FILES = 64 };
/* A larger file is not a tuning database: it is ignored, not read into memory. */
static const size_t MAX_FILE_BYTES = (size_t)256 << 20;

typedef struct db_file {
  char *path;
  bool present; /* stat found it */
  struct stat identity;
  bool read;
  size_t size;
  uint64_t content_hash;
  /* Loaded within one timestamp tick of its last change: a second change in
   * that tick would leave size and times as they are, so the content is
   * compared until the tick has passed. */
  atomic_bool racy;
} db_file;

typedef struct tuning_db {
  atomic_uint references;
  uint64_t generation;
  char *user_path; /* "" when there is none */
  bool dir_present;
  struct stat dir_identity;
  atomic_bool dir_racy;
  db_file *files; /* the user file (when user_path is set), then the system files */
  int file_count;
  tsr__tuning_index *index;
  atomic_llong checked_ns; /* monotonic time the files were last found unchanged */
} tuning_db;

static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER; /* `current` and taking refs */
static tuning_db *current;
static pthread_mutex_t reload_lock = PTHREAD_MUTEX_INITIALIZER; /* one load at a time */
static atomic_uint_fast64_t generations;
static atomic_uint_fast64_t parses;

/* How often the files are checked for changes, from TESSERA_TUNING_RECHECK_MS,
 * read once per process. */
static long long recheck_ns = 1000000000LL;
static pthread_once_t recheck_once = PTHREAD_ONCE_INIT;

static void read_recheck_interval(void) {
  const char *text = tsr__getenv("TESSERA_TUNING_RECHECK_MS");
  if (!text || !*text)
    return;
  char *end = NULL;
  long long ms = strtoll(text, &end, 10);
  if (*end || ms < 0 || ms > 86400000LL)
    tsr__log(TSR_LOG_WARN,
             "TESSERA_TUNING_RECHECK_MS = '%s' is not 0..86400000 milliseconds; using 1000", text);
  else
    recheck_ns = ms * 1000000LL;
}

/* A clock read from the vDSO without a system call. */
static long long monotonic_coarse_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static char system_dir[PATH_MAX];
static pthread_once_t system_dir_once = PTHREAD_ONCE_INIT;

static void find_system_dir(void) {
  const char *libdir = tsr__library_dir();
  int n = *libdir ? snprintf(system_dir, sizeof system_dir, "%s/%s/tessera/tuning", libdir,
                             TSR_LIBDIR_TO_DATADIR)
                  : 0;
  if (n < 0 || (size_t)n >= sizeof system_dir)
    system_dir[0] = '\0';
}

static long long ns_of(struct timespec t) {
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct timespec wall_clock(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

/* Whether a change after `read_start` could carry the same times as the
 * state read. File systems stamp with a coarse clock (a tick of 1-10 ms;
 * whole seconds, even two, where times have no nanoseconds). */
static bool is_racy(const struct stat *st, struct timespec read_start) {
  bool whole_seconds = st->st_mtim.tv_nsec == 0 && st->st_ctim.tv_nsec == 0;
  long long margin = whole_seconds ? 3000000000LL : 50000000LL;
  long long changed =
      ns_of(st->st_mtim) > ns_of(st->st_ctim) ? ns_of(st->st_mtim) : ns_of(st->st_ctim);
  return changed + margin > ns_of(read_start);
}

static bool same_identity(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
         a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
         a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
         a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int tsv_filter(const struct dirent *entry) {
  size_t n = strlen(entry->d_name);
  return n > 4 && entry->d_name[0] != '.' && !strcmp(entry->d_name + n - 4, ".tsv");
}

/* The directory's *.tsv names in sorted order (at most MAX_SYSTEM_FILES);
 * -1 when it cannot be read. */
static int list_system_files(struct dirent ***names) {
  int n = scandir(system_dir, names, tsv_filter, alphasort);
  if (n > MAX_SYSTEM_FILES) {
    for (int i = MAX_SYSTEM_FILES; i < n; i++)
      free((*names)[i]);
    n = MAX_SYSTEM_FILES;
  }
  return n;
}

static void free_names(struct dirent **names, int n) {
  for (int i = 0; i < n; i++)
    free(names[i]);
  free(names);
}

static void db_free(tuning_db *db) {
  for (int i = 0; i < db->file_count; i++)
    free(db->files[i].path);
  free(db->files);
  free(db->user_path);
  tsr__tuning_index_destroy(db->index);
  free(db);
}

static void db_release(tuning_db *db) {
  if (db && atomic_fetch_sub(&db->references, 1) == 1)
    db_free(db);
}

static tuning_db *db_acquire(void) {
  pthread_mutex_lock(&current_lock);
  tuning_db *db = current;
  if (db)
    atomic_fetch_add(&db->references, 1);
  pthread_mutex_unlock(&current_lock);
  return db;
}

/* Reads one file into the index as file number `number`; false only when out
 * of memory. A missing file is remembered as missing; one that is not a
 * regular file, or cannot be read, is ignored with a warning. */
static bool load_file(tuning_db *db, int number, const char *path) {
  db_file *file = &db->files[number];
  file->path = strdup(path);
  if (!file->path)
    return false;
  atomic_init(&file->racy, false);
  struct timespec start = wall_clock();
  char *text;
  size_t size;
  int err = tsr__tuning_read_file(path, MAX_FILE_BYTES, &text, &size, &file->identity);
  if (err == ENOENT || err == ENOTDIR)
    return true;
  if (err > 0 && err != EFBIG && stat(path, &file->identity) != 0)
    return true; /* gone since */
  file->present = true;
  if (err == -1) {
    /* /dev/null is the usual way to say "no database": no warning for it. */
    if (strcmp(path, "/dev/null") != 0)
      tsr__log(TSR_LOG_WARN, "tuning database %s is not a regular file: ignored", path);
    return true;
  }
  if (err) {
    tsr__log(TSR_LOG_WARN, "cannot read tuning database %s: %s: ignored", path,
             err == EFBIG ? "larger than 256 MiB" : strerror(err));
    return err != ENOMEM;
  }
  file->read = true;
  file->size = size;
  file->content_hash = hash_bytes(HASH_SEED, text, size);
  atomic_store(&file->racy, is_racy(&file->identity, start));
  size_t before = tsr__tuning_index_rows(db->index);
  bool ok = tsr__tuning_index_add(db->index, number, text, size);
  free(text);
  atomic_fetch_add(&parses, 1);
  tsr__log(TSR_LOG_DEBUG, "read tuning database %s (%zu rows)", path,
           tsr__tuning_index_rows(db->index) - before);
  return ok;
}

static tuning_db *db_load(const char *user_path) {
  tuning_db *db = calloc(1, sizeof *db);
  if (!db)
    return NULL;
  atomic_init(&db->references, 1);
  atomic_init(&db->dir_racy, false);
  db->user_path = strdup(user_path);
  db->index = tsr__tuning_index_create();
  struct dirent **names = NULL;
  int system_count = 0;
  if (*system_dir) {
    struct timespec start = wall_clock();
    db->dir_present = stat(system_dir, &db->dir_identity) == 0;
    if (db->dir_present) {
      atomic_store(&db->dir_racy, is_racy(&db->dir_identity, start));
      system_count = list_system_files(&names);
      if (system_count < 0)
        system_count = 0;
    }
  }
  int count = (*user_path ? 1 : 0) + system_count;
  db->files = calloc((size_t)(count ? count : 1), sizeof *db->files);
  bool ok = db->user_path && db->index && db->files;
  if (ok && *user_path)
    ok = load_file(db, db->file_count++, user_path);
  for (int i = 0; ok && i < system_count; i++) {
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", system_dir, names[i]->d_name);
    if (n > 0 && (size_t)n < sizeof path)
      ok = load_file(db, db->file_count++, path);
  }
  free_names(names, system_count);
  if (!ok) {
    db_free(db);
    return NULL;
  }
  db->generation = atomic_fetch_add(&generations, 1) + 1;
  return db;
}

/* Whether a racy file still holds what was read (the content read again). */
static bool racy_file_unchanged(db_file *file) {
  struct timespec start = wall_clock();
  char *text;
  size_t size;
  struct stat identity;
  if (tsr__tuning_read_file(file->path, MAX_FILE_BYTES, &text, &size, &identity) != 0)
    return false;
  bool same = same_identity(&identity, &file->identity) && size == file->size &&
              hash_bytes(HASH_SEED, text, size) == file->content_hash;
  free(text);
  if (same && !is_racy(&file->identity, start))
    atomic_store(&file->racy, false);
  return same;
}

/* Whether a racy directory still lists the files loaded. */
static bool racy_dir_unchanged(tuning_db *db) {
  struct timespec start = wall_clock();
  struct dirent **names = NULL;
  int n = list_system_files(&names);
  int first = *db->user_path ? 1 : 0;
  bool same = n >= 0 && n == db->file_count - first;
  size_t dir_length = strlen(system_dir);
  for (int i = 0; same && i < n; i++)
    same = !strcmp(db->files[first + i].path + dir_length + 1, names[i]->d_name);
  free_names(names, n < 0 ? 0 : n);
  if (same && !is_racy(&db->dir_identity, start))
    atomic_store(&db->dir_racy, false);
  return same;
}

/* Whether the database still describes the files: a stat of each, and of the
 * system directory (files added or removed). */
static bool db_current(tuning_db *db, const char *user_path) {
  if (strcmp(db->user_path, user_path))
    return false;
  struct stat now;
  for (int i = 0; i < db->file_count; i++) {
    db_file *file = &db->files[i];
    bool present = stat(file->path, &now) == 0;
    if (present != file->present || (present && !same_identity(&now, &file->identity)))
      return false;
    if (file->read && atomic_load_explicit(&file->racy, memory_order_relaxed) &&
        !racy_file_unchanged(file))
      return false;
  }
  if (*system_dir) {
    bool present = stat(system_dir, &now) == 0;
    if (present != db->dir_present || (present && !same_identity(&now, &db->dir_identity)))
      return false;
    if (present && atomic_load_explicit(&db->dir_racy, memory_order_relaxed) &&
        !racy_dir_unchanged(db))
      return false;
  }
  return true;
}

/* The database in force, loaded again first if a file changed; NULL only
 * when out of memory. The caller releases it. */
static tuning_db *db_up_to_date(void) {
  pthread_once(&system_dir_once, find_system_dir);
  pthread_once(&recheck_once, read_recheck_interval);
  long long now = recheck_ns > 0 ? monotonic_coarse_ns() : 0;
  if (recheck_ns > 0) {
    tuning_db *db = db_acquire();
    if (db && now - atomic_load_explicit(&db->checked_ns, memory_order_relaxed) < recheck_ns)
      return db;
    db_release(db);
  }
  char user_path[PATH_MAX];
  int n = tsr__tuning_user_path_env(user_path, sizeof user_path);
  if (n < 0 || (size_t)n >= sizeof user_path)
    user_path[0] = '\0'; /* none, or too long to open */
  tuning_db *db = db_acquire();
  if (db && db_current(db, user_path)) {
    atomic_store_explicit(&db->checked_ns, now, memory_order_relaxed);
    return db;
  }
  db_release(db);
  /* One thread loads while the others that found a change wait, so a
   * changed file is parsed once, not once per thread. */
  pthread_mutex_lock(&reload_lock);
  db = db_acquire();
  if (!db || !db_current(db, user_path)) {
    db_release(db);
    db = db_load(user_path);
    if (db) {
      atomic_store_explicit(&db->checked_ns, now, memory_order_relaxed);
      atomic_fetch_add(&db->references, 1); /* the caller's */
      pthread_mutex_lock(&current_lock);
      tuning_db *old = current;
      current = db;
      pthread_mutex_unlock(&current_lock);
      db_release(old);
    }
  }
  pthread_mutex_unlock(&reload_lock);
  return db;
}

tsr__tuning_found tsr__tuning_find(const tsr__tuning_key *key,
                                   bool (*has_variant)(void *context, const char *name),
                                   void *context, tsr__tuning_match *out) {
  out->variant[0] = '\0';
  out->source[0] = '\0';
  out->first_warning = false;
  tuning_db *db = db_up_to_date();
  if (!db)
    return TSR__TUNING_MISS;
  tsr__tuning_row row;
  tsr__tuning_found found = TSR__TUNING_MISS;
  if (tsr__tuning_index_find(db->index, key, &row)) {
    snprintf(out->variant, sizeof out->variant, "%s", row.variant);
    snprintf(out->source, sizeof out->source, "%s:%d", db->files[row.file].path, row.line);
    found = TSR__TUNING_HIT;
    if (has_variant && !has_variant(context, row.variant)) {
      found = TSR__TUNING_STALE;
      out->first_warning = tsr__tuning_index_claim_warning(db->index, row.id);
    }
  }
  db_release(db);
  return found;
}

bool tsr__tuning_lookup(const char *device_key, const char *op, const char *dtype,
                        const char *shape_class, char *variant, size_t variant_capacity,
                        char *source, size_t source_capacity) {
  tsr__tuning_key key = {device_key, op, dtype, shape_class};
  tsr__tuning_match match;
  if (tsr__tuning_find(&key, NULL, NULL, &match) != TSR__TUNING_HIT)
    return false;
  snprintf(variant, variant_capacity, "%s", match.variant);
  snprintf(source, source_capacity, "%s", match.source);
  return true;
}

/* The generation last found current and when: the op path's answer while
 * the recheck interval has not passed, without a lock. */
static atomic_uint_fast64_t published_generation;
static atomic_llong published_ns;

uint64_t tsr__tuning_generation(void) {
  pthread_once(&recheck_once, read_recheck_interval);
  if (recheck_ns > 0) {
    uint64_t generation = atomic_load_explicit(&published_generation, memory_order_acquire);
    long long checked = atomic_load_explicit(&published_ns, memory_order_relaxed);
    if (generation && monotonic_coarse_ns() - checked < recheck_ns)
      return generation;
  }
  tuning_db *db = db_up_to_date();
  uint64_t generation = db ? db->generation : 0;
  if (db) {
    atomic_store_explicit(&published_ns, atomic_load(&db->checked_ns), memory_order_relaxed);
    atomic_store_explicit(&published_generation, generation, memory_order_release);
  }
  db_release(db);
  return generation;
}

uint64_t tsr__tuning_parse_count(void) {
  return atomic_load(&parses);
}

void tsr__tuning_invalidate(void) {
  atomic_store(&published_generation, 0);
  pthread_mutex_lock(&current_lock);
  tuning_db *old = current;
  current = NULL;
  pthread_mutex_unlock(&current_lock);
  db_release(old);
}
