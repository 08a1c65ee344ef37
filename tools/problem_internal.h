/* SPDX-License-Identifier: Apache-2.0 */
/* What problem_spec.c, problem.c and problem_verify.c share; not for the
 * commands (they use problem.h). */
#ifndef TESSERA_TOOLS_PROBLEM_INTERNAL_H
#define TESSERA_TOOLS_PROBLEM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "problem.h"

/* Appends printf output to buf (always terminated, truncates). */
void problem_append(char *buf, size_t capacity, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Rows over all groups of a grouped GEMM. */
int64_t problem_group_total(const grouped_gemm_spec *g);
/* kv_append's slot for new row t (-1: skipped). */
int64_t problem_kv_slot(const kv_append_spec *k, int64_t t);
/* Elements of a rows op's tensor (the product of its extents). */
int64_t problem_rows_numel(const rows_spec *r);

/* Element offset (from the view's first element) of the `linear`-th element
 * in row-major order of its shape. */
int64_t problem_view_offset(const tsr_tensor *view, int64_t linear);
/* The index of the problem tensor called `name`; -1 when there is none. */
int problem_find_tensor(const problem *p, const char *name);
/* Records "what: status: last error" in p->error and returns `status`. */
tsr_status problem_fail(problem *p, tsr_status status, const char *what);

#endif /* TESSERA_TOOLS_PROBLEM_INTERNAL_H */
