/* SPDX-License-Identifier: Apache-2.0 */
/* The table of `tessera check` cases: for every op a numbered list of
 * problems (run for each of f32, f16, bf16), awkward shapes and layouts
 * included. A case's number is stable: it is what `--case N` reproduces. */
#ifndef TESSERA_TOOLS_CASES_H
#define TESSERA_TOOLS_CASES_H

#include <stdbool.h>

#include "problem.h"

typedef struct check_case {
  problem_spec spec; /* spec.dtype is set per run */
  bool quick;        /* part of the --quick subset */
} check_case;

/* The cases of one op; *count receives their number. */
const check_case *check_cases(tsr_op op, int *count);

#endif /* TESSERA_TOOLS_CASES_H */
