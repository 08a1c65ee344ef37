/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin and its one device (the host): init reads the environment
 * and describes the machine, device_open starts the thread pool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_plugin.h"
#include "park.h"

/* ------------------------------------------------------------------------ */
/* Environment (read here, in init, only)                                    */
/* ------------------------------------------------------------------------ */

/* TESSERA_CPU_THREADS, else the CPUs this process may run on. */
static int choose_threads(const cpu_plugin *plugin) {
  int threads = cpu_machine_available_cpus();
  const char *text = tsr_plugin_env(&plugin->host, "TESSERA_CPU_THREADS");
  if (text && *text) {
    char *end;
    long value = strtol(text, &end, 10);
    if (*end == '\0' && value >= 1 && value <= CPU_MAX_THREADS)
      threads = (int)value;
    else
      tsr_plugin_log(&plugin->host, TSR_LOG_WARN,
                     "TESSERA_CPU_THREADS = '%s' is not a thread count in 1..%d; using %d", text,
                     CPU_MAX_THREADS, threads);
  }
  return threads;
}

/* TESSERA_CPU_POLL_US: microseconds an idle worker (pool or queue) and a
 * waiting tsr_queue_finish poll before they park; 0 parks at once. */
static int64_t choose_poll_ns(const cpu_plugin *plugin) {
  long microseconds = CPU_POLL_DEFAULT_US;
  const char *text = tsr_plugin_env(&plugin->host, "TESSERA_CPU_POLL_US");
  if (text && *text) {
    char *end;
    long value = strtol(text, &end, 10);
    if (*end == '\0' && value >= 0 && value <= CPU_POLL_MAX_US)
      microseconds = value;
    else
      tsr_plugin_log(&plugin->host, TSR_LOG_WARN,
                     "TESSERA_CPU_POLL_US = '%s' is not a time in 0..%d microseconds; using %ld",
                     text, CPU_POLL_MAX_US, microseconds);
  }
  return (int64_t)microseconds * 1000;
}

/* TESSERA_CPU_ISA lowers the instruction-set level (to compare or test
 * kernels); a level this machine lacks, or an unknown name, is refused with
 * a log line and the detected level is used. */
static cpu_isa choose_isa(const cpu_plugin *plugin) {
  char message[TSR_PLUGIN_MESSAGE_CAPACITY];
  cpu_isa isa = cpu_isa_choose(tsr_plugin_env(&plugin->host, "TESSERA_CPU_ISA"), cpu_isa_detect(),
                               message, sizeof message);
  if (message[0])
    tsr_plugin_log(&plugin->host, TSR_LOG_WARN, "%s", message);
  return isa;
}

/* ------------------------------------------------------------------------ */
/* Plugin and device                                                         */
/* ------------------------------------------------------------------------ */

tsr_status cpu_init(const tsr_host_services_v2 *services, void **out, char *reason,
                    size_t reason_capacity) {
  if (!out) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cpu: init needs an output");
    return TSR_ERROR_NULL_ARGUMENT;
  }
  cpu_plugin *plugin = calloc(1, sizeof *plugin);
  if (!plugin) {
    if (reason && reason_capacity > 0)
      snprintf(reason, reason_capacity, "cpu: out of memory");
    return TSR_ERROR_OUT_OF_MEMORY;
  }
  tsr_status status = tsr_plugin_host_init(&plugin->host, "cpu", services, reason, reason_capacity);
  if (status != TSR_OK) {
    free(plugin);
    return status;
  }

  cpu_isa isa = choose_isa(plugin);
  cpu_isa_set_active(isa);
  plugin->isa = isa;
  plugin->threads = choose_threads(plugin);
  plugin->poll_ns = choose_poll_ns(plugin);
  plugin->waiter_poll_ns =
      cpu_waiter_poll_ns(plugin->poll_ns, plugin->threads < cpu_machine_available_cpus());
  cpu_machine_identify(isa, &plugin->identity);
  tsr_plugin_log(&plugin->host, TSR_LOG_DEBUG, "%s (%s), %d threads polling %lld us, %s kernels",
                 plugin->identity.name, plugin->identity.vendor, plugin->threads,
                 (long long)(plugin->poll_ns / 1000), cpu_isa_name(isa));
  *out = plugin;
  return TSR_OK;
}

void cpu_shutdown(void *handle) {
  free(handle);
}

static tsr_status one_device(const cpu_plugin *plugin, uint32_t index) {
  return tsr_plugin_fail(&plugin->host, TSR_ERROR_NOT_FOUND,
                         "the cpu plugin has one device, not index %u", index);
}

uint32_t cpu_device_count(void *handle) {
  (void)handle;
  return 1;
}

tsr_status cpu_device_info(void *handle, uint32_t index, tsr_device_info *info) {
  cpu_plugin *plugin = handle;
  if (index != 0)
    return one_device(plugin, index);
  info->type = TSR_DEVICE_CPU;
  snprintf(info->vendor, sizeof info->vendor, "%s", plugin->identity.vendor);
  snprintf(info->name, sizeof info->name, "%s", plugin->identity.name);
  snprintf(info->arch, sizeof info->arch, "%s", plugin->identity.arch);
  snprintf(info->physical_id, sizeof info->physical_id, "cpu0");
  snprintf(info->driver_version, sizeof info->driver_version, "%s", CPU_PLUGIN_VERSION);
  info->memory_bytes = plugin->identity.memory_bytes;
  info->compute_units = (uint32_t)plugin->threads;
  info->dtype_mask = (1u << TSR_DTYPE_F32) | (1u << TSR_DTYPE_F16) | (1u << TSR_DTYPE_BF16) |
                     (1u << TSR_DTYPE_I32);
  info->op_mask = (1u << TSR_OP_COUNT_) - 1u;
  info->host_visible = 1;
  cpu_machine_describe(plugin->isa, plugin->threads, info->details, sizeof info->details);
  return TSR_OK;
}

tsr_status cpu_device_open(void *handle, uint32_t index, void **out) {
  cpu_plugin *plugin = handle;
  if (index != 0)
    return one_device(plugin, index);
  cpu_device *device = calloc(1, sizeof *device);
  if (!device)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "cannot allocate the cpu device");
  device->plugin = plugin;
  device->pool = cpu_pool_create(plugin->threads, plugin->poll_ns);
  if (!device->pool) {
    free(device);
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "cannot create the cpu thread pool");
  }
  if (cpu_pool_threads(device->pool) < plugin->threads)
    tsr_plugin_log(&plugin->host, TSR_LOG_WARN, "started %d of %d threads",
                   cpu_pool_threads(device->pool), plugin->threads);
  pthread_mutex_init(&device->lock, NULL);
  *out = device;
  return TSR_OK;
}

void cpu_device_close(void *handle) {
  cpu_device *device = handle;
  if (!device)
    return;
  cpu_pool_destroy(device->pool);
  pthread_mutex_destroy(&device->lock);
  free(device);
}
