/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the `tessera` command: option parsing, shapes, dtype
 * conversions, random inputs, progress lines, device selection and output
 * helpers. Everything here uses the public API only. */
#ifndef TESSERA_TOOLS_COMMON_H
#define TESSERA_TOOLS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera/tessera.h"

/* Exit statuses of every subcommand. */
enum {
  EXIT_OK = 0,
  EXIT_FAILED = 1, /* a check failed or a tessera call reported an error */
  EXIT_USAGE = 2   /* bad command line: unknown option, op, device, shape */
};

/* ---- messages ---- */

/* "tessera: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "tessera: <what>: <status name>: <tsr_last_error()>" on stderr. */
void cli_api_error(const char *what, tsr_status status);

/* ---- command-line parsing ----
 * A subcommand walks its arguments with an arg_cursor: arg_flag() and
 * arg_value() consume the current argument when it matches, so one loop of
 * if/else-if handles every option; "--name=value" and "--name value" both work. */
typedef struct arg_cursor {
  int argc;
  char **argv;
  int index;
  bool failed; /* a value was missing; the error is already printed */
} arg_cursor;

void arg_begin(arg_cursor *cursor, int argc, char **argv);
bool arg_done(const arg_cursor *cursor);
const char *arg_current(const arg_cursor *cursor);
/* True (and advances) when the current argument is the flag `name`. */
bool arg_flag(arg_cursor *cursor, const char *name);
/* True (and advances) when the current argument is option `name`; *value is
 * its value. Sets cursor->failed when the value is missing. */
bool arg_value(arg_cursor *cursor, const char *name, const char **value);
/* Prints "unknown option" (or, for a word without a leading '-',
 * "unexpected argument") naming the current argument and pointing at the
 * command's --help. Returns EXIT_USAGE. */
int arg_unknown(const arg_cursor *cursor, const char *command);

/* ---- what a run selected ----
 * check and bench print "COMMAND: no case matched (FILTERS)" and fail when
 * their filters left nothing to run, rather than report success for work
 * never done. A filter_text collects the filters as they were given. */
typedef struct filter_text {
  char text[512];
} filter_text;

/* Appends " NAME" or " NAME VALUE" (value NULL: a flag). */
void filter_add(filter_text *filters, const char *name, const char *value);
/* "COMMAND: no case matched (FILTERS)[: WHY]" on stderr. */
void report_no_case(const char *command, const filter_text *filters, const char *why);

/* Parses a non-negative decimal integer; false on junk or overflow. */
bool parse_int64(const char *text, int64_t *out);
/* Parses "AxBxC" into up to `capacity` extents (each >= 1). Returns the
 * number of extents, 0 on a syntax error. */
int parse_shape(const char *text, int64_t *extents, int capacity);
/* Writes "AxBxC". */
void format_shape(char *buf, size_t capacity, const int64_t *extents, int count);

/* Parses an op name with a clear error; TSR_OP_COUNT_ when unknown. */
tsr_op parse_op(const char *name);
/* Parses f32/f16/bf16 with a clear error; TSR_DTYPE_INVALID when unknown. */
tsr_dtype parse_float_dtype(const char *name);

/* ---- dtypes ---- */

extern const tsr_dtype cli_float_dtypes[3]; /* f32, f16, bf16 */

/* The unit roundoff of a float dtype: 2^-24, 2^-11, 2^-8. */
double dtype_unit_roundoff(tsr_dtype dtype);
/* `value` rounded to the nearest value representable in `dtype`. */
float dtype_round(tsr_dtype dtype, double value);
/* Writes element `index` of a dtype array from a double (rounded). */
void dtype_store(void *base, tsr_dtype dtype, int64_t index, double value);
/* Reads element `index` of a dtype array as double (exact). */
double dtype_load(const void *base, tsr_dtype dtype, int64_t index);
/* Writes a quiet NaN of `dtype` at element `index`. */
void dtype_store_nan(void *base, tsr_dtype dtype, int64_t index);

/* ---- random inputs ---- */

/* A small fixed-seed generator (splitmix64): the same seed gives the same
 * inputs on every machine. */
typedef struct rng {
  uint64_t state;
} rng;

void rng_seed(rng *generator, uint64_t seed);
uint64_t rng_next(rng *generator);
/* Uniform in [-1, 1). */
double rng_uniform(rng *generator);
/* Uniform integer in [0, bound). */
int64_t rng_below(rng *generator, int64_t bound);
/* Mixes several values into one seed. */
uint64_t seed_mix(uint64_t a, uint64_t b);

/* ---- time and progress ---- */

double now_seconds(void);

/* A one-line progress indicator on stderr, shown only when stderr is a
 * terminal, so logs and pipes stay clean. */
void progress_update(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void progress_clear(void);

/* ---- context and devices ---- */

/* Creates a context; prints the error and returns NULL on failure. */
tsr_context *open_context(void);

/* A set of devices chosen with --device (repeatable) or --all. */
#define MAX_SELECTED_DEVICES 32
typedef struct device_selection {
  uint32_t count;
  tsr_device *devices[MAX_SELECTED_DEVICES];
  tsr_device_info infos[MAX_SELECTED_DEVICES];
} device_selection;

/* Resolves selectors (NULL/empty list: TESSERA_DEVICE, else "best"), or every
 * device when `all`. Duplicates are dropped. Prints errors; returns
 * EXIT_OK, or EXIT_USAGE for an unknown selector, EXIT_FAILED otherwise. */
int select_devices(tsr_context *context, const char *const *selectors, int selector_count, bool all,
                   device_selection *out);
/* Opens one device by selector and fetches its info (errors printed). */
int select_one_device(tsr_context *context, const char *selector, tsr_device **device,
                      tsr_device_info *info);

const char *device_type_name(tsr_device_type type);
/* "f32,f16,bf16" from a dtype mask. */
void format_dtype_mask(char *buf, size_t capacity, uint32_t mask);
/* "gemm,attention,..." from an op mask. */
void format_op_mask(char *buf, size_t capacity, uint32_t mask);
/* "15.6 GiB". */
void format_bytes(char *buf, size_t capacity, uint64_t bytes);

/* ---- output files ---- */

/* Writes `text` as a JSON string literal (with quotes). */
void json_string(FILE *file, const char *text);
/* Writes `text` escaped for an XML attribute or text node. */
void xml_escape(FILE *file, const char *text);
/* A number for JSON: finite values as %.9g, others as null. */
void json_number(FILE *file, double value);
/* The head every JSON report starts with, so that reports of different
 * machines can be archived side by side: the opening brace, then "tool",
 * "version" (tsr_version), "created" (UTC) and "host" (uname: os, release,
 * machine), each followed by a comma and a newline. */
void json_report_head(FILE *file, const char *tool);
/* A device's identity as JSON members (no braces): selector, backend, type,
 * vendor, name, arch, driver_version, device_key, physical_id,
 * compute_units, memory_bytes. */
void json_device_members(FILE *file, const tsr_device_info *info);

/* Median of `count` values (sorts them in place). */
double median(double *values, int count);

#endif /* TESSERA_TOOLS_COMMON_H */
