/* SPDX-License-Identifier: Apache-2.0 */
/* Logging to stderr, filtered by TESSERA_LOG or the context option. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static atomic_int log_level_override; /* 0: not overridden */

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
   * since this runs on every log call. Written directly: tsr__log comes here. */
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  if (*value && !atomic_flag_test_and_set(&warned))
    fprintf(stderr,
            "tessera [warn] TESSERA_LOG=%.64s is not one of error, warn, info, debug: using "
            "warn\n",
            value);
  return TSR_LOG_WARN;
}

int tsr__log_level(void) {
  int level = atomic_load(&log_level_override);
  return level ? level : level_from_env();
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
