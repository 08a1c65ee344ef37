/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's ABI table (tsr_plugin_v2, the only ABI it speaks) and its
 * two exported symbols: one device (the host, device.c), buffers in host
 * memory (memory.c), in-order queues each served by a worker thread and
 * events that record CLOCK_MONOTONIC timestamps (queue.c), and op entry
 * points (ops.c) that queue the kernels of kernels/ with a config row of
 * configs.c. Kernels run on the queue's worker and spread their work over the
 * device's thread pool (pool.c). */
#include "cpu_plugin.h"

static const tsr_plugin_v2 cpu_plugin_table = {
    .struct_size = sizeof(tsr_plugin_v2),
    .abi_version = 2,
    .name = "cpu",
    .version = CPU_PLUGIN_VERSION,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .device_open = cpu_device_open,
    .device_close = cpu_device_close,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_host_pointer = cpu_buffer_host_pointer,
    .queue_create = cpu_queue_create,
    .queue_destroy = cpu_queue_destroy,
    .queue_finish = cpu_queue_finish,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .buffer_copy = cpu_buffer_copy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .event_destroy = cpu_event_destroy,
    .buffer_wrap = cpu_buffer_wrap,
    .op_supported = cpu_op_supported,
    .op_variants = cpu_op_variants_entry,
    .op_select = cpu_op_select,
    .op_run = cpu_op_run,
    .buffer_export = cpu_buffer_export,
    .queue_wait_event = cpu_queue_wait_event,
    .queue_gate = cpu_queue_gate,
    .gate_open = cpu_gate_open,
};

TSR_PLUGIN_EXPORT_V2(cpu_plugin_table)
