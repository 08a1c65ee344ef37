/* SPDX-License-Identifier: Apache-2.0 */
/* Device classes. The op families' variant tables key their heuristics on
 * these, plus the device's compute units and local memory. */
#include <string.h>

#include "configs.h"

static bool contains(const char *text, const char *word) {
  return strstr(text, word) != NULL;
}

opencl_class opencl_class_of(const opencl_device_props *p) {
  if (p->type & CL_DEVICE_TYPE_CPU)
    return OPENCL_CLASS_POCL_CPU;
  switch (p->vendor_id) {
  case 0x10de:
    return OPENCL_CLASS_NVIDIA;
  case 0x1002:
    return OPENCL_CLASS_AMD;
  case 0x8086:
    return OPENCL_CLASS_INTEL;
  case 0x13b5:
    return OPENCL_CLASS_MALI;
  case 0x5143:
    return OPENCL_CLASS_ADRENO;
  default:
    break;
  }
  /* Some drivers report PCI-less vendor ids: go by the names. */
  if (contains(p->name, "Mali") || contains(p->vendor, "ARM"))
    return OPENCL_CLASS_MALI;
  if (contains(p->name, "Adreno") || contains(p->vendor, "QUALCOMM"))
    return OPENCL_CLASS_ADRENO;
  if (contains(p->vendor, "NVIDIA"))
    return OPENCL_CLASS_NVIDIA;
  if (contains(p->vendor, "Advanced Micro Devices") || contains(p->vendor, "AMD"))
    return OPENCL_CLASS_AMD;
  if (contains(p->vendor, "Intel"))
    return OPENCL_CLASS_INTEL;
  return OPENCL_CLASS_GENERIC;
}

const char *opencl_class_name(opencl_class device_class) {
  static const char *const names[OPENCL_CLASS_COUNT] = {"generic", "nvidia", "amd", "intel",
                                                        "mali",    "adreno", "cpu"};
  return device_class < OPENCL_CLASS_COUNT ? names[device_class] : "generic";
}
