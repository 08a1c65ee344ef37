/* SPDX-License-Identifier: Apache-2.0 */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tessera/plugin.h"

/* ---- messages ---- */

void cli_error(const char *fmt, ...) {
  progress_clear();
  va_list ap;
  va_start(ap, fmt);
  fputs("tessera: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void cli_api_error(const char *what, tsr_status status) {
  const char *detail = tsr_last_error();
  if (detail == NULL || detail[0] == '\0')
    detail = "(no detail)";
  cli_error("%s failed: %s: %s", what, tsr_status_name(status), detail);
}

/* ---- command-line parsing ---- */

void arg_begin(arg_cursor *cursor, int argc, char **argv) {
  cursor->argc = argc;
  cursor->argv = argv;
  cursor->index = 0;
  cursor->failed = false;
}

bool arg_done(const arg_cursor *cursor) {
  return cursor->failed || cursor->index >= cursor->argc;
}

const char *arg_current(const arg_cursor *cursor) {
  return cursor->index < cursor->argc ? cursor->argv[cursor->index] : "";
}

bool arg_flag(arg_cursor *cursor, const char *name) {
  if (cursor->index < cursor->argc && strcmp(cursor->argv[cursor->index], name) == 0) {
    cursor->index++;
    return true;
  }
  return false;
}

bool arg_value(arg_cursor *cursor, const char *name, const char **value) {
  if (cursor->index >= cursor->argc)
    return false;
  const char *arg = cursor->argv[cursor->index];
  size_t length = strlen(name);
  if (strncmp(arg, name, length) != 0)
    return false;
  if (arg[length] == '=') {
    *value = arg + length + 1;
    cursor->index++;
    return true;
  }
  if (arg[length] != '\0')
    return false;
  if (cursor->index + 1 >= cursor->argc) {
    cli_error("option %s needs a value", name);
    cursor->failed = true;
    cursor->index++;
    return false;
  }
  *value = cursor->argv[cursor->index + 1];
  cursor->index += 2;
  return true;
}

int arg_unknown(const arg_cursor *cursor, const char *command) {
  const char *arg = arg_current(cursor);
  cli_error("%s: %s '%s' (see 'tessera %s --help')", command,
            arg[0] == '-' ? "unknown option" : "unexpected argument", arg, command);
  return EXIT_USAGE;
}

/* ---- what a run selected ---- */

void filter_add(filter_text *filters, const char *name, const char *value) {
  size_t used = strlen(filters->text);
  snprintf(filters->text + used, sizeof filters->text - used, "%s%s%s%s", used ? " " : "", name,
           value ? " " : "", value ? value : "");
}

void report_no_case(const char *command, const filter_text *filters, const char *why) {
  cli_error("%s: no case matched (%s)%s%s", command,
            filters->text[0] ? filters->text : "no filters", why && why[0] ? ": " : "",
            why ? why : "");
}

bool parse_int64(const char *text, int64_t *out) {
  if (text == NULL || *text < '0' || *text > '9')
    return false;
  errno = 0;
  char *end = NULL;
  long long value = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0)
    return false;
  *out = (int64_t)value;
  return true;
}

int parse_shape(const char *text, int64_t *extents, int capacity) {
  int count = 0;
  const char *p = text;
  while (*p != '\0') {
    if (count == capacity || *p < '0' || *p > '9')
      return 0;
    errno = 0;
    char *end = NULL;
    long long value = strtoll(p, &end, 10);
    if (errno != 0 || value < 1 || value > ((int64_t)1 << 40))
      return 0;
    extents[count++] = (int64_t)value;
    p = end;
    if (*p == 'x' || *p == 'X') {
      p++;
      if (*p == '\0')
        return 0;
    } else if (*p != '\0') {
      return 0;
    }
  }
  return count;
}

void format_shape(char *buf, size_t capacity, const int64_t *extents, int count) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < count && used < capacity; i++) {
    int n = snprintf(buf + used, capacity - used, "%s%lld", i ? "x" : "", (long long)extents[i]);
    if (n < 0)
      break;
    used += (size_t)n;
  }
}

tsr_op parse_op(const char *name) {
  tsr_op op = tsr_op_from_name(name);
  if (op == TSR_OP_COUNT_) {
    char list[256] = "";
    for (int i = 0; i < TSR_OP_COUNT_; i++) {
      strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
      strncat(list, tsr_op_name((tsr_op)i), sizeof list - strlen(list) - 1);
    }
    cli_error("unknown op '%s' (ops: %s)", name, list);
  }
  return op;
}

tsr_dtype parse_float_dtype(const char *name) {
  tsr_dtype dtype = tsr_dtype_from_name(name);
  if (dtype != TSR_DTYPE_F32 && dtype != TSR_DTYPE_F16 && dtype != TSR_DTYPE_BF16) {
    cli_error("unknown dtype '%s' (dtypes: f32, f16, bf16)", name);
    return TSR_DTYPE_INVALID;
  }
  return dtype;
}

/* ---- dtypes ---- */

const tsr_dtype cli_float_dtypes[3] = {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16};

double dtype_unit_roundoff(tsr_dtype dtype) {
  switch (dtype) {
  case TSR_DTYPE_F16:
    return ldexp(1.0, -11);
  case TSR_DTYPE_BF16:
    return ldexp(1.0, -8);
  default:
    return ldexp(1.0, -24);
  }
}

float dtype_round(tsr_dtype dtype, double value) {
  float f = (float)value;
  switch (dtype) {
  case TSR_DTYPE_F16:
    return tsr_f16_to_f32(tsr_f32_to_f16(f));
  case TSR_DTYPE_BF16:
    return tsr_bf16_to_f32(tsr_f32_to_bf16(f));
  default:
    return f;
  }
}

void dtype_store(void *base, tsr_dtype dtype, int64_t index, double value) {
  if (dtype == TSR_DTYPE_I32)
    ((int32_t *)base)[index] = (int32_t)value;
  else
    tsr_store_from_f32(base, (int32_t)dtype, index, (float)value);
}

double dtype_load(const void *base, tsr_dtype dtype, int64_t index) {
  if (dtype == TSR_DTYPE_I32)
    return (double)((const int32_t *)base)[index];
  return (double)tsr_load_as_f32(base, (int32_t)dtype, index);
}

void dtype_store_nan(void *base, tsr_dtype dtype, int64_t index) {
  switch (dtype) {
  case TSR_DTYPE_F32: {
    uint32_t bits = 0x7fc00000u;
    memcpy((char *)base + index * 4, &bits, 4);
    break;
  }
  case TSR_DTYPE_F16: {
    uint16_t bits = 0x7e00u;
    memcpy((char *)base + index * 2, &bits, 2);
    break;
  }
  case TSR_DTYPE_BF16: {
    uint16_t bits = 0x7fc0u;
    memcpy((char *)base + index * 2, &bits, 2);
    break;
  }
  default:
    break;
  }
}

/* ---- random inputs ---- */

void rng_seed(rng *generator, uint64_t seed) {
  generator->state = seed;
}

uint64_t rng_next(rng *generator) {
  uint64_t z = (generator->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double rng_uniform(rng *generator) {
  /* 53 random bits into [0, 1), then onto [-1, 1). */
  double unit = (double)(rng_next(generator) >> 11) * ldexp(1.0, -53);
  return 2.0 * unit - 1.0;
}

int64_t rng_below(rng *generator, int64_t bound) {
  return bound <= 1 ? 0 : (int64_t)(rng_next(generator) % (uint64_t)bound);
}

uint64_t seed_mix(uint64_t a, uint64_t b) {
  rng mixer = {a ^ (b * 0xd1b54a32d192ed03ull)};
  return rng_next(&mixer);
}

/* ---- time and progress ---- */

double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int progress_enabled = -1; /* -1: not decided yet */
static bool progress_shown = false;

void progress_update(const char *fmt, ...) {
  if (progress_enabled < 0)
    progress_enabled = isatty(STDERR_FILENO) ? 1 : 0;
  if (!progress_enabled)
    return;
  char line[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* \033[K clears the rest of the previous, possibly longer, line. */
  fprintf(stderr, "\r%s\033[K", line);
  fflush(stderr);
  progress_shown = true;
}

void progress_clear(void) {
  if (progress_shown) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
    progress_shown = false;
  }
}

/* ---- context and devices ---- */

tsr_context *open_context(void) {
  tsr_context *context = NULL;
  tsr_status status = tsr_context_create(NULL, &context);
  if (status != TSR_OK) {
    cli_api_error("tsr_context_create", status);
    return NULL;
  }
  return context;
}

static int add_device(device_selection *out, tsr_device *device) {
  tsr_device_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  tsr_status status = tsr_device_get_info(device, &info);
  if (status != TSR_OK) {
    cli_api_error("tsr_device_get_info", status);
    return EXIT_FAILED;
  }
  for (uint32_t i = 0; i < out->count; i++)
    if (strcmp(out->infos[i].selector, info.selector) == 0)
      return EXIT_OK;
  if (out->count == MAX_SELECTED_DEVICES) {
    cli_error("more than %d devices selected", MAX_SELECTED_DEVICES);
    return EXIT_USAGE;
  }
  out->devices[out->count] = device;
  out->infos[out->count] = info;
  out->count++;
  return EXIT_OK;
}

int select_devices(tsr_context *context, const char *const *selectors, int selector_count, bool all,
                   device_selection *out) {
  memset(out, 0, sizeof *out);
  if (all) {
    uint32_t count = 0;
    tsr_status status = tsr_device_count(context, &count);
    if (status != TSR_OK) {
      cli_api_error("tsr_device_count", status);
      return EXIT_FAILED;
    }
    for (uint32_t i = 0; i < count; i++) {
      tsr_device *device = NULL;
      status = tsr_device_get(context, i, &device);
      if (status != TSR_OK) {
        cli_api_error("tsr_device_get", status);
        return EXIT_FAILED;
      }
      int rc = add_device(out, device);
      if (rc != EXIT_OK)
        return rc;
    }
    if (out->count == 0) {
      cli_error("no device found (see 'tessera devices --verbose' for why plugins were skipped)");
      return EXIT_FAILED;
    }
    return EXIT_OK;
  }
  const char *fallback = NULL;
  if (selector_count == 0) {
    selectors = &fallback; /* NULL: TESSERA_DEVICE, else "best" */
    selector_count = 1;
  }
  for (int i = 0; i < selector_count; i++) {
    tsr_device *device = NULL;
    tsr_status status = tsr_device_open(context, selectors[i], &device);
    if (status != TSR_OK) {
      const char *name = selectors[i] ? selectors[i] : "(default)";
      cli_error("no device '%s': %s (see 'tessera devices')", name, tsr_last_error());
      return status == TSR_ERROR_NOT_FOUND || status == TSR_ERROR_INVALID_VALUE ? EXIT_USAGE
                                                                                : EXIT_FAILED;
    }
    int rc = add_device(out, device);
    if (rc != EXIT_OK)
      return rc;
  }
  return EXIT_OK;
}

int select_one_device(tsr_context *context, const char *selector, tsr_device **device,
                      tsr_device_info *info) {
  device_selection selection;
  int rc = select_devices(context, &selector, 1, false, &selection);
  if (rc != EXIT_OK)
    return rc;
  *device = selection.devices[0];
  *info = selection.infos[0];
  return EXIT_OK;
}

const char *device_type_name(tsr_device_type type) {
  switch (type) {
  case TSR_DEVICE_CPU:
    return "cpu";
  case TSR_DEVICE_GPU:
    return "gpu";
  case TSR_DEVICE_INTEGRATED_GPU:
    return "igpu";
  default:
    return "other";
  }
}

void format_dtype_mask(char *buf, size_t capacity, uint32_t mask) {
  buf[0] = '\0';
  for (int d = 1; d < TSR_DTYPE_COUNT_; d++) {
    if (mask & (1u << d)) {
      if (buf[0])
        strncat(buf, ",", capacity - strlen(buf) - 1);
      strncat(buf, tsr_dtype_name((tsr_dtype)d), capacity - strlen(buf) - 1);
    }
  }
  if (buf[0] == '\0')
    snprintf(buf, capacity, "-");
}

void format_op_mask(char *buf, size_t capacity, uint32_t mask) {
  buf[0] = '\0';
  for (int op = 0; op < TSR_OP_COUNT_; op++) {
    if (mask & (1u << op)) {
      if (buf[0])
        strncat(buf, ",", capacity - strlen(buf) - 1);
      strncat(buf, tsr_op_name((tsr_op)op), capacity - strlen(buf) - 1);
    }
  }
  if (buf[0] == '\0')
    snprintf(buf, capacity, "-");
}

void format_bytes(char *buf, size_t capacity, uint64_t bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = (double)bytes;
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    unit++;
  }
  if (unit == 0)
    snprintf(buf, capacity, "%llu B", (unsigned long long)bytes);
  else
    snprintf(buf, capacity, "%.1f %s", value, units[unit]);
}

/* ---- output files ---- */

/* Length of the valid UTF-8 sequence at `p` (1 to 4), 0 when invalid. */
static size_t utf8_sequence(const unsigned char *p) {
  if (p[0] < 0x80)
    return 1;
  unsigned char lo = 0x80, hi = 0xbf;
  size_t length;
  if (p[0] >= 0xc2 && p[0] <= 0xdf) {
    length = 2;
  } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
    length = 3;
    lo = p[0] == 0xe0 ? 0xa0 : 0x80; /* overlong */
    hi = p[0] == 0xed ? 0x9f : 0xbf; /* surrogates */
  } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
    length = 4;
    lo = p[0] == 0xf0 ? 0x90 : 0x80; /* overlong */
    hi = p[0] == 0xf4 ? 0x8f : 0xbf; /* above U+10FFFF */
  } else {
    return 0;
  }
  if (p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < length; i++)
    if (p[i] < 0x80 || p[i] > 0xbf)
      return 0;
  return length;
}

/* JSON text must be Unicode: bytes that are not UTF-8 (paths, device names
 * need not be) become U+FFFD. */
void json_string(FILE *file, const char *text) {
  fputc('"', file);
  for (const unsigned char *p = (const unsigned char *)text; *p;) {
    size_t n = utf8_sequence(p);
    if (n == 0) {
      fputs("\xef\xbf\xbd", file);
      p++;
      continue;
    }
    if (n > 1) {
      fwrite(p, 1, n, file);
      p += n;
      continue;
    }
    switch (*p) {
    case '"':
      fputs("\\\"", file);
      break;
    case '\\':
      fputs("\\\\", file);
      break;
    case '\n':
      fputs("\\n", file);
      break;
    case '\t':
      fputs("\\t", file);
      break;
    default:
      if (*p < 0x20)
        fprintf(file, "\\u%04x", *p);
      else
        fputc(*p, file);
    }
    p++;
  }
  fputc('"', file);
}

void xml_escape(FILE *file, const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
    switch (*p) {
    case '&':
      fputs("&amp;", file);
      break;
    case '<':
      fputs("&lt;", file);
      break;
    case '>':
      fputs("&gt;", file);
      break;
    case '"':
      fputs("&quot;", file);
      break;
    default:
      /* Control characters other than tab/newline are not allowed in XML 1.0. */
      if (*p < 0x20 && *p != '\n' && *p != '\t')
        fputc(' ', file);
      else
        fputc(*p, file);
    }
  }
}

void json_number(FILE *file, double value) {
  if (isfinite(value))
    fprintf(file, "%.9g", value);
  else
    fputs("null", file);
}

void json_report_head(FILE *file, const char *tool) {
  fprintf(file, "{\n  \"tool\": ");
  json_string(file, tool);
  fprintf(file, ",\n  \"version\": ");
  json_string(file, tsr_version());
  char created[32] = "";
  time_t now = time(NULL);
  struct tm utc;
  if (gmtime_r(&now, &utc) != NULL)
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &utc);
  fprintf(file, ",\n  \"created\": ");
  json_string(file, created);
  struct utsname host;
  if (uname(&host) != 0)
    memset(&host, 0, sizeof host);
  fprintf(file, ",\n  \"host\": {\"os\": ");
  json_string(file, host.sysname);
  fprintf(file, ", \"release\": ");
  json_string(file, host.release);
  fprintf(file, ", \"machine\": ");
  json_string(file, host.machine);
  fprintf(file, "},\n");
}

void json_device_members(FILE *file, const tsr_device_info *info) {
  static const struct {
    const char *key;
    size_t offset;
  } strings[] = {
      {"selector", offsetof(tsr_device_info, selector)},
      {"backend", offsetof(tsr_device_info, backend)},
      {"vendor", offsetof(tsr_device_info, vendor)},
      {"name", offsetof(tsr_device_info, name)},
      {"arch", offsetof(tsr_device_info, arch)},
      {"driver_version", offsetof(tsr_device_info, driver_version)},
      {"device_key", offsetof(tsr_device_info, device_key)},
      {"physical_id", offsetof(tsr_device_info, physical_id)},
  };
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    fprintf(file, "%s\"%s\": ", i ? ", " : "", strings[i].key);
    json_string(file, (const char *)info + strings[i].offset);
  }
  fprintf(file, ", \"type\": \"%s\", \"compute_units\": %u, \"memory_bytes\": %llu",
          device_type_name(info->type), info->compute_units,
          (unsigned long long)info->memory_bytes);
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double median(double *values, int count) {
  if (count <= 0)
    return NAN;
  qsort(values, (size_t)count, sizeof *values, compare_doubles);
  return count % 2 ? values[count / 2] : 0.5 * (values[count / 2 - 1] + values[count / 2]);
}
