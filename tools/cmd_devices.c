/* SPDX-License-Identifier: Apache-2.0 */
/* tessera devices / tessera info: what the plugins found, and why a plugin
 * that found nothing was skipped or found no device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static const char *plugin_state_name(tsr_plugin_state state) {
  switch (state) {
  case TSR_PLUGIN_LOADED:
    return "loaded";
  case TSR_PLUGIN_SKIPPED:
    return "skipped";
  case TSR_PLUGIN_FILTERED:
    return "filtered";
  default:
    return "unknown";
  }
}

static int print_search_dirs(tsr_context *context) {
  uint32_t count = 0;
  tsr_status status = tsr_plugin_search_dir_count(context, &count);
  if (status != TSR_OK) {
    cli_api_error("tsr_plugin_search_dir_count", status);
    return EXIT_FAILED;
  }
  printf("\nplugin directories, in search order:\n");
  if (count == 0)
    printf("  none\n");
  for (uint32_t i = 0; i < count; i++) {
    const char *path = NULL, *note = NULL;
    status = tsr_plugin_search_dir(context, i, &path, NULL, &note);
    if (status != TSR_OK) {
      cli_api_error("tsr_plugin_search_dir", status);
      return EXIT_FAILED;
    }
    printf("  %s (%s)\n", path, note);
  }
  return EXIT_OK;
}

static int print_plugin_reports(tsr_context *context) {
  uint32_t count = 0;
  tsr_status status = tsr_plugin_count(context, &count);
  if (status != TSR_OK) {
    cli_api_error("tsr_plugin_count", status);
    return EXIT_FAILED;
  }
  printf("\nplugins (%u manifests):\n", count);
  if (count == 0)
    printf("  none found: set TESSERA_PLUGIN_PATH or install a plugin package\n");
  for (uint32_t i = 0; i < count; i++) {
    tsr_plugin_report report;
    memset(&report, 0, sizeof report);
    report.struct_size = sizeof report;
    status = tsr_plugin_get_report(context, i, &report);
    if (status != TSR_OK) {
      cli_api_error("tsr_plugin_get_report", status);
      return EXIT_FAILED;
    }
    printf("  %s: %s", report.name, plugin_state_name(report.state));
    if (report.state == TSR_PLUGIN_LOADED)
      printf(", ABI %u, %u device%s", report.abi_version, report.device_count,
             report.device_count == 1 ? "" : "s");
    printf("\n    manifest: %s\n    library:  %s\n", report.manifest, report.library);
    /* For a loaded plugin the reason says why it has no device. */
    if (report.reason[0] != '\0')
      printf("    reason:   %s\n", report.reason);
  }
  return EXIT_OK;
}

/* Device `index`'s info; false (error printed) when it cannot be had. */
static bool device_info_at(tsr_context *context, uint32_t index, tsr_device_info *info) {
  tsr_device *device = NULL;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  tsr_status status = tsr_device_get(context, index, &device);
  if (status == TSR_OK)
    status = tsr_device_get_info(device, info);
  if (status != TSR_OK)
    cli_api_error("tsr_device_get_info", status);
  return status == TSR_OK;
}

/* ---- physical devices ---- */

/* Devices grouped by physical id: the same GPU seen through CUDA, Vulkan,
 * OpenCL and HIP is one group. group[i] is device i's group number (0, 1,
 * ... in order of first appearance); a device without an id is a group of
 * its own. Returns the number of groups. */
static uint32_t physical_groups(const tsr_device_info *infos, uint32_t count, uint32_t *group) {
  uint32_t groups = 0;
  for (uint32_t i = 0; i < count; i++) {
    group[i] = UINT32_MAX;
    for (uint32_t j = 0; j < i && infos[i].physical_id[0]; j++) {
      if (strncmp(infos[i].physical_id, infos[j].physical_id, sizeof infos[i].physical_id) == 0) {
        group[i] = group[j];
        break;
      }
    }
    if (group[i] == UINT32_MAX)
      group[i] = groups++;
  }
  return groups;
}

static void print_physical_groups(const tsr_device_info *infos, uint32_t count,
                                  const uint32_t *group, uint32_t groups) {
  printf("\nphysical devices (%u; one device seen through several plugins is one):\n", groups);
  for (uint32_t g = 0; g < groups; g++) {
    uint32_t first = 0;
    while (group[first] != g)
      first++;
    printf("  %-4u %-40.40s  ", g, infos[first].name);
    for (uint32_t i = first, shown = 0; i < count; i++)
      if (group[i] == g)
        printf("%s%s", shown++ ? ", " : "", infos[i].selector);
    printf("\n       id %s\n", infos[first].physical_id[0] ? infos[first].physical_id : "(none)");
  }
}

/* ---- --json ---- */

static int print_json(tsr_context *context) {
  json_report_head(stdout, "tessera devices");
  uint32_t count = 0;
  tsr_status status = tsr_device_count(context, &count);
  if (status != TSR_OK) {
    cli_api_error("tsr_device_count", status);
    return EXIT_FAILED;
  }
  tsr_device_info *infos = calloc(count ? count : 1, sizeof *infos);
  uint32_t *group = calloc(count ? count : 1, sizeof *group);
  bool read = infos && group;
  for (uint32_t i = 0; i < count && read; i++)
    read = device_info_at(context, i, &infos[i]);
  if (read)
    physical_groups(infos, count, group);
  printf("\"devices\": [");
  for (uint32_t i = 0; i < count && read; i++) {
    printf("%s\n  {\"index\": %u, ", i ? "," : "", i);
    json_device_members(stdout, &infos[i]);
    printf(", \"physical_group\": %u}", group[i]);
  }
  free(infos);
  free(group);
  if (!read)
    return EXIT_FAILED;
  printf("\n],\n\"plugins\": [");
  status = tsr_plugin_count(context, &count);
  if (status != TSR_OK) {
    cli_api_error("tsr_plugin_count", status);
    return EXIT_FAILED;
  }
  for (uint32_t i = 0; i < count; i++) {
    tsr_plugin_report report;
    memset(&report, 0, sizeof report);
    report.struct_size = sizeof report;
    status = tsr_plugin_get_report(context, i, &report);
    if (status != TSR_OK) {
      cli_api_error("tsr_plugin_get_report", status);
      return EXIT_FAILED;
    }
    printf("%s\n  {\"name\": ", i ? "," : "");
    json_string(stdout, report.name);
    printf(", \"manifest\": ");
    json_string(stdout, report.manifest);
    printf(", \"library\": ");
    json_string(stdout, report.library);
    printf(", \"state\": \"%s\", \"abi_version\": %u, \"device_count\": %u, \"reason\": ",
           plugin_state_name(report.state), report.abi_version, report.device_count);
    json_string(stdout, report.reason);
    printf("}");
  }
  printf("\n],\n\"search_dirs\": [");
  status = tsr_plugin_search_dir_count(context, &count);
  if (status != TSR_OK) {
    cli_api_error("tsr_plugin_search_dir_count", status);
    return EXIT_FAILED;
  }
  for (uint32_t i = 0; i < count; i++) {
    const char *path = NULL, *note = NULL;
    int exists = 0;
    status = tsr_plugin_search_dir(context, i, &path, &exists, &note);
    if (status != TSR_OK) {
      cli_api_error("tsr_plugin_search_dir", status);
      return EXIT_FAILED;
    }
    printf("%s\n  {\"path\": ", i ? "," : "");
    json_string(stdout, path);
    printf(", \"exists\": %s, \"note\": ", exists ? "true" : "false");
    json_string(stdout, note);
    printf("}");
  }
  printf("\n]\n}\n");
  return EXIT_OK;
}

int cmd_devices(int argc, char **argv) {
  bool verbose = false, json = false;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    if (arg_flag(&c, "--verbose") || arg_flag(&c, "-v"))
      verbose = true;
    else if (arg_flag(&c, "--json"))
      json = true;
    else
      return arg_unknown(&c, "devices");
  }
  if (c.failed)
    return EXIT_USAGE;

  tsr_context *context = open_context();
  if (context == NULL)
    return EXIT_FAILED;
  if (json) {
    int rc = print_json(context);
    tsr_context_destroy(context);
    return rc;
  }
  uint32_t count = 0;
  tsr_status status = tsr_device_count(context, &count);
  if (status != TSR_OK) {
    cli_api_error("tsr_device_count", status);
    tsr_context_destroy(context);
    return EXIT_FAILED;
  }
  tsr_device_info *infos = calloc(count ? count : 1, sizeof *infos);
  uint32_t *group = calloc(count ? count : 1, sizeof *group);
  int rc = infos && group ? EXIT_OK : EXIT_FAILED;
  for (uint32_t i = 0; i < count && rc == EXIT_OK; i++)
    if (!device_info_at(context, i, &infos[i]))
      rc = EXIT_FAILED;
  if (rc == EXIT_OK && count == 0)
    printf("no devices found%s\n", verbose ? "" : " (run 'tessera devices --verbose' for why)");
  if (rc == EXIT_OK && count > 0) {
    uint32_t groups = physical_groups(infos, count, group);
    printf("%-5s %-12s %-5s %4s %-40s %10s %5s  %s\n", "index", "selector", "type", "phys", "name",
           "memory", "units", "dtypes");
    for (uint32_t i = 0; i < count; i++) {
      const tsr_device_info *info = &infos[i];
      char memory[32], dtypes[64];
      format_bytes(memory, sizeof memory, info->memory_bytes);
      format_dtype_mask(dtypes, sizeof dtypes, info->dtype_mask);
      printf("%-5u %-12s %-5s %4u %-40.40s %10s %5u  %s\n", i, info->selector,
             device_type_name(info->type), group[i], info->name, memory, info->compute_units,
             dtypes);
    }
    print_physical_groups(infos, count, group, groups);
  }
  free(infos);
  free(group);
  if (verbose &&
      (print_search_dirs(context) != EXIT_OK || print_plugin_reports(context) != EXIT_OK))
    rc = EXIT_FAILED;
  tsr_context_destroy(context);
  return rc;
}

/* The plugin's own "key: value" lines, indented under a heading; the field
 * may be unterminated if a plugin filled all of it. */
static void print_details(const char *details, size_t capacity) {
  size_t length = strnlen(details, capacity);
  printf("details:%s\n", length == 0 ? "         - (the plugin reports none)" : "");
  size_t start = 0;
  while (start < length) {
    size_t end = start;
    while (end < length && details[end] != '\n')
      end++;
    if (end > start)
      printf("  %.*s\n", (int)(end - start), details + start);
    start = end + 1;
  }
}

int cmd_info(int argc, char **argv) {
  const char *selector = NULL;
  arg_cursor c;
  arg_begin(&c, argc, argv);
  while (!arg_done(&c)) {
    const char *value = NULL;
    if (arg_value(&c, "--device", &value)) {
      selector = value;
    } else if (selector == NULL && arg_current(&c)[0] != '-') {
      selector = arg_current(&c);
      c.index++;
    } else {
      return arg_unknown(&c, "info");
    }
  }
  if (c.failed)
    return EXIT_USAGE;
  if (selector == NULL) {
    cli_error("info: which device? (tessera info DEVICE, e.g. tessera info cpu:0)");
    return EXIT_USAGE;
  }

  tsr_context *context = open_context();
  if (context == NULL)
    return EXIT_FAILED;
  tsr_device *device = NULL;
  tsr_device_info info;
  int rc = select_one_device(context, selector, &device, &info);
  if (rc != EXIT_OK) {
    tsr_context_destroy(context);
    return rc;
  }
  char memory[32], dtypes[64], ops[256];
  format_bytes(memory, sizeof memory, info.memory_bytes);
  format_dtype_mask(dtypes, sizeof dtypes, info.dtype_mask);
  format_op_mask(ops, sizeof ops, info.op_mask);
  printf("selector:        %s\n", info.selector);
  printf("backend:         %s (device %u of this backend)\n", info.backend, info.backend_index);
  printf("type:            %s\n", device_type_name(info.type));
  printf("vendor:          %s\n", info.vendor);
  printf("name:            %s\n", info.name);
  printf("arch:            %s\n", info.arch);
  printf("physical id:     %s\n", info.physical_id[0] ? info.physical_id : "-");
  printf("driver version:  %s\n", info.driver_version[0] ? info.driver_version : "-");
  printf("memory:          %s (%llu bytes)\n", memory, (unsigned long long)info.memory_bytes);
  printf("compute units:   %u\n", info.compute_units);
  printf("host visible:    %s\n", info.host_visible ? "yes" : "no");
  printf("device key:      %s\n", info.device_key);
  printf("dtypes:          %s\n", dtypes);
  printf("ops:             %s\n", ops);
  print_details(info.details, sizeof info.details);
  char db[1024];
  if (tsr_tuning_user_path(db, sizeof db) == TSR_OK)
    printf("user tuning db:  %s\n", db);
  tsr_context_destroy(context);
  return EXIT_OK;
}
