/* SPDX-License-Identifier: Apache-2.0 */
/* The code objects the plugin carries, as clang's offload bundler writes
 * them (hipcc --genco, clang-offload-bundler): a 24-byte magic, the entry
 * count, then per entry its offset, size and id ("hipv4-amdgcn-amd-amdhsa--
 * gfx90a:xnack-"), all little-endian 64-bit. The runtime picks the entry
 * for a GPU itself; the plugin reads the ids to say which GPUs it can run
 * and, before the first launch, whether this one is among them. Also the
 * gfx names and the PCI-derived physical id. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "hip_internal.h"

static const char bundle_magic[] = "__CLANG_OFFLOAD_BUNDLE__";
enum { MAGIC_BYTES = 24, MAX_ENTRIES = 1024, MAX_ID = 1024 };

static uint64_t read_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* The target id of an AMD GPU entry ("gfx90a:xnack-"), or NULL for others
 * (the host entry, other triples). */
static const char *amdgpu_target(const char *id, size_t length, char *out, size_t capacity) {
  static const char triple[] = "-amdgcn-amd-amdhsa-";
  const char *at = NULL;
  for (size_t i = 0; i + sizeof triple - 1 <= length && !at; i++)
    if (memcmp(id + i, triple, sizeof triple - 1) == 0)
      at = id + i;
  if (!at)
    return NULL;
  size_t kind = (size_t)(at - id);
  if (!((kind == 3 && memcmp(id, "hip", 3) == 0) || (kind == 5 && memcmp(id, "hipv4", 5) == 0)))
    return NULL;
  const char *rest = at + sizeof triple - 1, *end = id + length;
  /* the triple's environment (empty for HIP), then '-' and the target id */
  while (rest < end && *rest != '-')
    rest++;
  if (rest == end)
    return NULL;
  rest++;
  size_t n = (size_t)(end - rest);
  if (n == 0 || n >= capacity || strncmp(rest, "gfx", 3) != 0)
    return NULL;
  memcpy(out, rest, n);
  out[n] = '\0';
  return out;
}

bool hip_bundle_parse(hip_bundle *bundle, const unsigned char *data, size_t size, char *why,
                      size_t capacity) {
  memset(bundle, 0, sizeof *bundle);
  if (size < MAGIC_BYTES + 8 || memcmp(data, bundle_magic, MAGIC_BYTES) != 0) {
    snprintf(why, capacity, "not a clang offload bundle (no %s magic)", bundle_magic);
    return false;
  }
  uint64_t entries = read_u64(data + MAGIC_BYTES);
  if (entries == 0 || entries > MAX_ENTRIES) {
    snprintf(why, capacity, "a bundle of %llu entries", (unsigned long long)entries);
    return false;
  }
  size_t at = MAGIC_BYTES + 8;
  for (uint64_t e = 0; e < entries; e++) {
    if (size - at < 24) {
      snprintf(why, capacity, "entry %llu runs past the bundle's %zu bytes", (unsigned long long)e,
               size);
      return false;
    }
    uint64_t offset = read_u64(data + at), bytes = read_u64(data + at + 8);
    uint64_t id_length = read_u64(data + at + 16);
    at += 24;
    if (id_length > MAX_ID || id_length > size - at || offset > size || bytes > size - offset) {
      snprintf(why, capacity, "entry %llu lies outside the bundle's %zu bytes",
               (unsigned long long)e, size);
      return false;
    }
    char target[64];
    if (amdgpu_target((const char *)data + at, (size_t)id_length, target, sizeof target) &&
        bytes > 0 && bundle->count < HIP_BUNDLE_MAX_TARGETS) {
      hip_bundle_target *t = &bundle->targets[bundle->count++];
      snprintf(t->id, sizeof t->id, "%s", target);
      t->offset = offset;
      t->size = bytes;
    }
    at += (size_t)id_length;
  }
  if (bundle->count == 0) {
    snprintf(why, capacity, "the bundle holds no AMD GPU code object");
    return false;
  }
  bundle->data = data;
  bundle->size = size;
  return true;
}

/* The processor part of a target id ("gfx90a" of "gfx90a:xnack-"). */
static size_t processor_length(const char *id) {
  const char *colon = strchr(id, ':');
  return colon ? (size_t)(colon - id) : strlen(id);
}

/* Whether the GPU's id names `feature` ("xnack-") exactly. */
static bool gpu_has_feature(const char *gpu, const char *feature, size_t length) {
  for (const char *p = strchr(gpu, ':'); p; p = strchr(p + 1, ':'))
    if (strncmp(p + 1, feature, length) == 0 && (p[1 + length] == ':' || p[1 + length] == '\0'))
      return true;
  return false;
}

int hip_bundle_find(const hip_bundle *bundle, const char *arch_name) {
  size_t processor = processor_length(arch_name);
  for (int i = 0; i < bundle->count; i++) {
    const char *id = bundle->targets[i].id;
    if (processor_length(id) != processor || strncmp(id, arch_name, processor) != 0)
      continue;
    bool fits = true;
    for (const char *f = strchr(id, ':'); f && fits; f = strchr(f + 1, ':')) {
      const char *next = strchr(f + 1, ':');
      size_t length = next ? (size_t)(next - f - 1) : strlen(f + 1);
      fits = gpu_has_feature(arch_name, f + 1, length);
    }
    if (fits)
      return i;
  }
  return -1;
}

void hip_bundle_describe(const hip_bundle *bundle, char *out, size_t capacity) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < bundle->count && used + 1 < capacity; i++) {
    int n = snprintf(out + used, capacity - used, "%s%s", i ? ", " : "", bundle->targets[i].id);
    if (n < 0)
      break;
    used += (size_t)n < capacity - used ? (size_t)n : capacity - used - 1;
  }
}

bool hip_arch_parse(const char *arch_name, int *major, int *minor) {
  if (strncmp(arch_name, "gfx", 3) != 0)
    return false;
  const char *digits = arch_name + 3;
  size_t n = processor_length(digits);
  if (n < 3 || n > 5)
    return false;
  int value = 0;
  for (size_t i = 0; i + 2 < n; i++) {
    if (!isdigit((unsigned char)digits[i]))
      return false;
    value = value * 10 + (digits[i] - '0');
  }
  int low = 0;
  for (size_t i = n - 2; i < n; i++) {
    if (!isxdigit((unsigned char)digits[i]))
      return false;
    char c = (char)tolower((unsigned char)digits[i]);
    low = low * 16 + (isdigit((unsigned char)c) ? c - '0' : c - 'a' + 10);
  }
  *major = value;
  *minor = low;
  return true;
}

void hip_arch_from_props(const unsigned char *props, size_t size, char *out, size_t capacity) {
  out[0] = '\0';
  /* After `name` (its first 256 bytes), the first string that starts a
   * field with "gfx" and a digit. */
  for (size_t at = 256; at + 5 < size; at++) {
    if (props[at - 1] != '\0' || memcmp(props + at, "gfx", 3) != 0 || !isdigit(props[at + 3]))
      continue;
    size_t n = 0;
    while (at + n < size && n + 1 < capacity && props[at + n] && isprint(props[at + n]))
      n++;
    memcpy(out, props + at, n);
    out[n] = '\0';
    return;
  }
}

void hip_physical_id(int domain, int bus, int device, int function, char *out, size_t capacity) {
  unsigned char b[16];
  const int words[4] = {domain, bus, device, function};
  for (int w = 0; w < 4; w++)
    for (int i = 0; i < 4; i++)
      b[4 * w + i] = (unsigned char)((unsigned)words[w] >> (8 * i));
  hip_format_uuid(b, out, capacity);
}

void hip_format_uuid(const unsigned char b[16], char *out, size_t capacity) {
  snprintf(out, capacity,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
}
