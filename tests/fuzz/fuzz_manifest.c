/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: arbitrary bytes as a plugin manifest. Only the parser
 * runs (tsr__parse_manifest, which the loader's file reader also uses), so
 * nothing is opened or dlopened. Besides the sanitizers' checks, a parse
 * must leave terminated values that fit, and a reason whenever it fails. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A copy of exactly `size` bytes, so reading one past the end is caught. */
  char *text = malloc(size ? size : 1);
  if (!text)
    return 0;
  if (size)
    memcpy(text, data, size);
  tsr__manifest manifest;
  char reason[512];
  reason[0] = '\0';
  bool ok = tsr__parse_manifest(text, size, "fuzz", &manifest, reason, sizeof reason);
  if (ok) {
    size_t library = strnlen(manifest.library, sizeof manifest.library);
    size_t arch = strnlen(manifest.arch, sizeof manifest.arch);
    if (library == 0 || library == sizeof manifest.library || arch == sizeof manifest.arch)
      abort();
  } else if (reason[0] == '\0' || strnlen(reason, sizeof reason) == sizeof reason) {
    abort();
  }
  free(text);
  return 0;
}
