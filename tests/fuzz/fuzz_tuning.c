/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: arbitrary bytes as tuning-database text. The input is
 * parsed into an index as the user file and its second half again as a
 * system file, then looked up: fixed keys, and the key of every row the
 * splitter accepts, which the index must then find. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Copies a field into a NUL-terminated string (fields hold no NUL). */
static char *copy(const char *field, size_t length) {
  char *s = malloc(length + 1);
  if (s) {
    memcpy(s, field, length);
    s[length] = '\0';
  }
  return s;
}

static void check_row(const tsr__tuning_row *row) {
  if (row->file < 0 || row->file > 1 || row->line < 1 || !row->variant)
    __builtin_trap();
  (void)strlen(row->variant); /* terminated inside the index (ASan checks) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  tsr__tuning_index *index = tsr__tuning_index_create();
  if (!index)
    return 0;
  size_t half = size / 2;
  if (!tsr__tuning_index_add(index, 0, text, size) ||
      !tsr__tuning_index_add(index, 1, text + half, size - half)) {
    tsr__tuning_index_destroy(index);
    return 0;
  }

  tsr__tuning_row row;
  static const tsr__tuning_key fixed[] = {{"cpu:x:y:z", "gemm", "f32", "m1n1k1"},
                                          {"a", "b", "c", "d"},
                                          {"a", "b", "c", "*"},
                                          {"", "", "", ""},
                                          {"a b", "c", "d", "e"}};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    if (tsr__tuning_index_find(index, &fixed[i], &row)) {
      check_row(&row);
      tsr__tuning_index_claim_warning(index, row.id);
    }

  /* Every accepted row of the input is findable (its file or an earlier one
   * answers), at most the first 64 to bound the time per input. */
  int rows = 0;
  for (const char *p = text, *end = text + size; p < end && rows < 64;) {
    const char *newline = memchr(p, '\n', (size_t)(end - p));
    const char *stop = newline ? newline : end;
    const char *field[5];
    size_t length[5];
    if (tsr__tuning_split_row(p, (size_t)(stop - p), field, length)) {
      rows++;
      char *part[4];
      for (int i = 0; i < 4; i++)
        part[i] = copy(field[i], length[i]);
      if (part[0] && part[1] && part[2] && part[3]) {
        tsr__tuning_key key = {part[0], part[1], part[2], part[3]};
        size_t key_length = length[0] + length[1] + length[2] + length[3] + 3;
        bool found = tsr__tuning_index_find(index, &key, &row);
        if (!found && key_length < 1000)
          __builtin_trap(); /* a parsed row the index lost */
        if (found) {
          check_row(&row);
          if (row.file != 0)
            __builtin_trap(); /* all of the input is file 0 */
          tsr__tuning_index_claim_warning(index, row.id);
          if (tsr__tuning_index_claim_warning(index, row.id))
            __builtin_trap(); /* a second claim never wins */
        }
      }
      for (int i = 0; i < 4; i++)
        free(part[i]);
    }
    p = newline ? newline + 1 : end;
  }
  tsr__tuning_index_destroy(index);
  return 0;
}
