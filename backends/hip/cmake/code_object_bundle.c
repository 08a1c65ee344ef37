/* SPDX-License-Identifier: Apache-2.0 */
/* Writes or lists a clang offload bundle of code objects, the format hipcc
 * --genco and clang-offload-bundler write and hipModuleLoadData reads: the
 * 24-byte magic "__CLANG_OFFLOAD_BUNDLE__", the entry count, per entry its
 * offset, size and id length (little-endian 64-bit) and id, then the
 * entries' bytes. A build tool (no compiler version's bundler needed):
 *   code_object_bundle OUT ID=FILE [ID=FILE ...]   write (an empty host entry first)
 *   code_object_bundle --list FILE                 print each entry's id and size */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char magic[] = "__CLANG_OFFLOAD_BUNDLE__";
static const char host_id[] = "host-x86_64-unknown-linux-gnu-";
enum { MAX_ENTRIES = 64 };

typedef struct entry {
  const char *id, *path;
  unsigned char *data;
  uint64_t size, offset;
  int same_as; /* an earlier entry of the same file: its bytes are shared */
} entry;

static void put_u64(FILE *out, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(v >> (8 * i));
  fwrite(b, 1, 8, out);
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static unsigned char *read_file(const char *path, uint64_t *size) {
  FILE *in = fopen(path, "rb");
  if (!in)
    return NULL;
  unsigned char *data = NULL;
  long n = -1;
  if (fseek(in, 0, SEEK_END) == 0 && (n = ftell(in)) >= 0 && fseek(in, 0, SEEK_SET) == 0) {
    data = malloc(n > 0 ? (size_t)n : 1);
    if (data && fread(data, 1, (size_t)n, in) != (size_t)n) {
      free(data);
      data = NULL;
    }
  }
  fclose(in);
  *size = n > 0 ? (uint64_t)n : 0;
  return data;
}

static int list(const char *path) {
  uint64_t size = 0;
  unsigned char *data = read_file(path, &size);
  if (!data || size < 32 || memcmp(data, magic, 24) != 0) {
    fprintf(stderr, "%s: not a clang offload bundle\n", path);
    free(data);
    return 1;
  }
  uint64_t count = get_u64(data + 24), at = 32;
  for (uint64_t e = 0; e < count; e++) {
    if (at + 24 > size || get_u64(data + at + 16) > size - at - 24) {
      fprintf(stderr, "%s: entry %llu runs past the end\n", path, (unsigned long long)e);
      free(data);
      return 1;
    }
    uint64_t bytes = get_u64(data + at + 8), length = get_u64(data + at + 16);
    printf("%.*s %llu\n", (int)length, (const char *)data + at + 24, (unsigned long long)bytes);
    at += 24 + length;
  }
  free(data);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--list") == 0)
    return list(argv[2]);
  if (argc < 3 || argc - 2 > MAX_ENTRIES - 1) {
    fprintf(stderr, "usage: %s OUT ID=FILE [ID=FILE ...] | --list FILE\n", argv[0]);
    return 2;
  }
  entry entries[MAX_ENTRIES];
  int count = 0;
  entries[count++] = (entry){host_id, NULL, NULL, 0, 0, -1};
  for (int i = 2; i < argc; i++) {
    char *equals = strchr(argv[i], '=');
    if (!equals) {
      fprintf(stderr, "%s: '%s' is not ID=FILE\n", argv[0], argv[i]);
      return 2;
    }
    *equals = '\0';
    entry *e = &entries[count++];
    e->id = argv[i];
    e->path = equals + 1;
    e->same_as = -1;
    for (int j = 1; j < count - 1 && e->same_as < 0; j++)
      if (strcmp(entries[j].path, e->path) == 0)
        e->same_as = j;
    e->data = read_file(e->path, &e->size);
    if (!e->data) {
      fprintf(stderr, "%s: cannot read %s\n", argv[0], equals + 1);
      return 1;
    }
  }
  uint64_t offset = 24 + 8;
  for (int i = 0; i < count; i++)
    offset += 24 + strlen(entries[i].id);
  for (int i = 0; i < count; i++) {
    if (entries[i].same_as >= 0) {
      entries[i].offset = entries[entries[i].same_as].offset;
      continue;
    }
    offset = (offset + 4095) & ~(uint64_t)4095; /* code objects page-aligned, as clang does */
    entries[i].offset = entries[i].size ? offset : 0;
    offset += entries[i].size;
  }
  FILE *out = fopen(argv[1], "wb");
  if (!out) {
    fprintf(stderr, "%s: cannot write %s\n", argv[0], argv[1]);
    return 1;
  }
  fwrite(magic, 1, 24, out);
  put_u64(out, (uint64_t)count);
  for (int i = 0; i < count; i++) {
    put_u64(out, entries[i].offset);
    put_u64(out, entries[i].size);
    put_u64(out, strlen(entries[i].id));
    fwrite(entries[i].id, 1, strlen(entries[i].id), out);
  }
  for (int i = 0; i < count; i++) {
    if (!entries[i].size || entries[i].same_as >= 0) {
      free(entries[i].data);
      continue;
    }
    long here = ftell(out);
    for (; here >= 0 && (uint64_t)here < entries[i].offset; here++)
      fputc(0, out);
    fwrite(entries[i].data, 1, entries[i].size, out);
    free(entries[i].data);
  }
  int failed = ferror(out);
  failed |= fclose(out);
  if (failed) {
    fprintf(stderr, "%s: writing %s failed\n", argv[0], argv[1]);
    return 1;
  }
  return 0;
}
