/* SPDX-License-Identifier: Apache-2.0 */
/* Logging to stderr, filtered by TESSERA_LOG or the context option. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static atomic_int log_level_override; /* 0: not overridden */
static atomic_int log_level_env;      /* TESSERA_LOG as last read; 0: not read yet */

static int level_from_env(void) {
  const char *value = tsr__getenv("TESSERA_LOG");
  if (!value)
    return TSR_LOG_WARN;
  if (!strcasecmp(value, "debug"))
    return TSR_LOG_DEBUG;
  if (!strcasecmp(value, "info"))
    return TSR_LOG_INFO;
  if (!strcasecmp(value, "warn") || !strcasecmp(value, "warning"))
    return TSR_LOG_WARN;
  if (!strcasecmp(value, "error") || !strcasecmp(value, "off") || !strcasecmp(value, "quiet"))
    return TSR_LOG_ERROR;
  /* A misspelt level would otherwise silently mean "warn"; once per process,
   * however many contexts read it. Written directly: tsr__log comes here. */
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  if (*value && !atomic_flag_test_and_set(&warned))
    fprintf(stderr,
            "tessera [warn] TESSERA_LOG=%.64s is not one of error, warn, info, debug: using "
            "warn\n",
            value);
  return TSR_LOG_WARN;
}

/* TESSERA_LOG is read when a context is created (and, before the first
 * one, at the first log call), not on every call. */
void tsr__log_read_env(void) {
  atomic_store(&log_level_env, level_from_env());
}

int tsr__log_level(void) {
  int level = atomic_load_explicit(&log_level_override, memory_order_relaxed);
  if (level)
    return level;
  level = atomic_load_explicit(&log_level_env, memory_order_relaxed);
  if (!level) {
    level = level_from_env();
    atomic_store(&log_level_env, level);
  }
  return level;
}

void tsr__set_log_level(int level) {
  atomic_store(&log_level_override, level);
}

void tsr__log(int level, const char *fmt, ...) {
  if (level > tsr__log_level())
    return;
  static const char *const names[] = {"", "error", "warn", "info", "debug"};
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tessera [%s] %s\n", names[level >= 1 && level <= 4 ? level : 0], line);
}
