/* SPDX-License-Identifier: Apache-2.0 */
/* Thread-local error sentences and status names. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[1024];
static _Thread_local char plugin_error[768];
static _Thread_local bool plugin_error_set;

const char *tsr_last_error(void) {
  return last_error;
}

void tsr__clear_error(void) {
  last_error[0] = '\0';
  plugin_error[0] = '\0';
  plugin_error_set = false;
}

tsr_status tsr__fail(tsr_status status, const char *call, const char *fmt, ...) {
  int n = snprintf(last_error, sizeof last_error, "%s: ", call);
  if (n < 0 || (size_t)n >= sizeof last_error)
    n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
  va_end(ap);
  tsr__log(TSR_LOG_DEBUG, "%s (%s)", last_error, tsr_status_name(status));
  return status;
}

void tsr__set_plugin_error_v(const char *fmt, va_list ap) {
  vsnprintf(plugin_error, sizeof plugin_error, fmt, ap);
  plugin_error_set = true;
}

bool tsr__take_plugin_error(char *buf, size_t capacity) {
  if (!plugin_error_set)
    return false;
  if (buf)
    tsr__strlcpy(buf, plugin_error, capacity);
  plugin_error[0] = '\0';
  plugin_error_set = false;
  return true;
}

tsr_status tsr__fail_plugin(tsr_status status, const char *call, const char *fallback) {
  char detail[768];
  if (tsr__take_plugin_error(detail, sizeof detail))
    return tsr__fail(status, call, "%s", detail);
  return tsr__fail(status, call, "%s", fallback);
}

const char *tsr_status_name(tsr_status status) {
  switch (status) {
  case TSR_OK:
    return "TSR_OK";
  case TSR_ERROR_NULL_ARGUMENT:
    return "TSR_ERROR_NULL_ARGUMENT";
  case TSR_ERROR_INVALID_VALUE:
    return "TSR_ERROR_INVALID_VALUE";
  case TSR_ERROR_STRUCT_SIZE:
    return "TSR_ERROR_STRUCT_SIZE";
  case TSR_ERROR_DTYPE_MISMATCH:
    return "TSR_ERROR_DTYPE_MISMATCH";
  case TSR_ERROR_RANK:
    return "TSR_ERROR_RANK";
  case TSR_ERROR_SHAPE_MISMATCH:
    return "TSR_ERROR_SHAPE_MISMATCH";
  case TSR_ERROR_BAD_SIZE:
    return "TSR_ERROR_BAD_SIZE";
  case TSR_ERROR_OUT_OF_BOUNDS:
    return "TSR_ERROR_OUT_OF_BOUNDS";
  case TSR_ERROR_WRONG_DEVICE:
    return "TSR_ERROR_WRONG_DEVICE";
  case TSR_ERROR_UNSUPPORTED:
    return "TSR_ERROR_UNSUPPORTED";
  case TSR_ERROR_OUT_OF_MEMORY:
    return "TSR_ERROR_OUT_OF_MEMORY";
  case TSR_ERROR_NOT_FOUND:
    return "TSR_ERROR_NOT_FOUND";
  case TSR_ERROR_BACKEND:
    return "TSR_ERROR_BACKEND";
  case TSR_ERROR_IO:
    return "TSR_ERROR_IO";
  case TSR_ERROR_OVERLAP:
    return "TSR_ERROR_OVERLAP";
  }
  return "TSR_ERROR_UNKNOWN";
}

const char *tsr_version(void) {
  return TSR_VERSION_STRING;
}
