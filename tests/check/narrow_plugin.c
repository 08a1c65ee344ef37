/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test device for the `tessera` command: the faulty plugin's reference
 * device (tests/check/faulty_plugin.c, compiled in unchanged) narrowed to
 * f32 softmax, so that filters can select cases it does not support, and
 * with an optional simulated clock, so that bench's spread and ceiling
 * flags can be tested without depending on the machine's real timings.
 *
 * TESSERA_NARROW_CLOCK values (unset: the host clock, as the faulty plugin):
 *   steady  every op run takes 1 ms; a copy of B bytes 2B / 40 GB/s
 *   fast    op runs take 0.1 us: any row is far above the copy ceiling
 *   spread  op runs take 1 ms and 2 ms in turn: max/min 2
 *   drift   as steady, but copies after the first op run take twice as long
 */
#define tsr_plugin_negotiate faulty_plugin_negotiate
#define tsr_plugin_entry faulty_plugin_entry
#include "faulty_plugin.c"
#undef tsr_plugin_negotiate
#undef tsr_plugin_entry

typedef enum narrow_clock {
  CLOCK_HOST,
  CLOCK_STEADY,
  CLOCK_FAST,
  CLOCK_SPREAD,
  CLOCK_DRIFT
} narrow_clock;

static narrow_clock clock_mode = CLOCK_HOST;
static double virtual_ms;     /* the simulated device clock */
static unsigned long op_runs; /* op runs so far, for spread and drift */

static tsr_status narrow_init(const tsr_host_services *services, void **plugin, char *reason,
                              size_t capacity) {
  const char *mode = getenv("TESSERA_NARROW_CLOCK");
  if (mode != NULL && strcmp(mode, "steady") == 0)
    clock_mode = CLOCK_STEADY;
  else if (mode != NULL && strcmp(mode, "fast") == 0)
    clock_mode = CLOCK_FAST;
  else if (mode != NULL && strcmp(mode, "spread") == 0)
    clock_mode = CLOCK_SPREAD;
  else if (mode != NULL && strcmp(mode, "drift") == 0)
    clock_mode = CLOCK_DRIFT;
  return fake_init(services, plugin, reason, capacity);
}

static tsr_status narrow_device_info(void *plugin, uint32_t index, tsr_device_info *info) {
  tsr_status status = fake_device_info(plugin, index, info);
  snprintf(info->name, sizeof info->name, "narrow reference device (f32 softmax only)");
  snprintf(info->driver_version, sizeof info->driver_version, "narrow 1.0");
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_I32);
  info->op_mask = 1u << TSR_OP_SOFTMAX;
  return status;
}

static tsr_status narrow_copy(void *queue, void *src, uint64_t src_offset, void *dst,
                              uint64_t dst_offset, uint64_t bytes) {
  double gbs = clock_mode == CLOCK_DRIFT && op_runs > 0 ? 20.0 : 40.0;
  virtual_ms += 2.0 * (double)bytes / (gbs * 1e9) * 1e3;
  return fake_copy(queue, src, src_offset, dst, dst_offset, bytes);
}

static tsr_status narrow_op_run(void *queue, tsr_op op, const void *args, const char *variant) {
  static const double spread_ms[2] = {1.0, 2.0};
  virtual_ms += clock_mode == CLOCK_FAST     ? 1e-4
                : clock_mode == CLOCK_SPREAD ? spread_ms[op_runs % 2]
                                             : 1.0;
  op_runs++;
  return fake_op_run(queue, op, args, variant);
}

static tsr_status narrow_event_record(void *queue, void **event) {
  tsr_status status = fake_event_record(queue, event);
  if (status == TSR_OK && clock_mode != CLOCK_HOST)
    ((fake_event *)*event)->ms = virtual_ms;
  return status;
}

static tsr_plugin_v1 narrow_table;

EXPORT uint32_t tsr_plugin_negotiate(uint32_t core_max_abi) {
  return core_max_abi >= 1 ? 1 : 0;
}

EXPORT const void *tsr_plugin_entry(uint32_t abi) {
  if (abi != 1)
    return NULL;
  narrow_table = table;
  narrow_table.name = "narrow";
  narrow_table.init = narrow_init;
  narrow_table.device_info = narrow_device_info;
  narrow_table.buffer_copy = narrow_copy;
  narrow_table.op_run = narrow_op_run;
  narrow_table.event_record = narrow_event_record;
  return &narrow_table;
}
