/* SPDX-License-Identifier: Apache-2.0 */
/* Device classes of the OpenCL plugin: which tile table a device takes,
 * decided from what the device reports (vendor, type, platform). */
#ifndef TESSERA_OPENCL_CONFIGS_H
#define TESSERA_OPENCL_CONFIGS_H

#include "opencl_internal.h"

opencl_class opencl_class_of(const opencl_device_props *props);
/* "nvidia", "amd", "intel", "mali", "adreno", "cpu", "generic": the device's
 * arch in tsr_device_info and its tuning key. */
const char *opencl_class_name(opencl_class device_class);

#endif /* TESSERA_OPENCL_CONFIGS_H */
