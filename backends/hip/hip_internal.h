/* SPDX-License-Identifier: Apache-2.0 */
/* What the HIP plugin's files share: the plugin object (the GPU layer's,
 * with libamdhip64's entry points), the driver table over the HIP runtime,
 * the code-object bundle the plugin carries, and AMD's vendor description.
 * Not installed. */
#ifndef TESSERA_HIP_INTERNAL_H
#define TESSERA_HIP_INTERNAL_H

#include "../gpu/gpu.h"
#include "hip_api.h"

/* The code objects one bundle holds: its targets ("gfx90a", "gfx1100",
 * with any target features such as ":xnack-") and their sizes. */
enum { HIP_BUNDLE_MAX_TARGETS = 32 };
typedef struct hip_bundle_target {
  char id[64]; /* "gfx90a:xnack-": the target id after the triple */
  uint64_t offset, size;
} hip_bundle_target;

typedef struct hip_bundle {
  const unsigned char *data;
  size_t size;
  int count;
  hip_bundle_target targets[HIP_BUNDLE_MAX_TARGETS];
} hip_bundle;

typedef struct hip_plugin {
  gpu_plugin gpu; /* first: the handle the GPU layer's entries take */
  hip_api api;    /* library NULL: no runtime, no devices */
  int driver_version, runtime_version;
  /* The code objects: the embedded bundle, or the file TESSERA_HIP_CODE_OBJECTS
   * names (read into `loaded`). */
  hip_bundle bundle;
  unsigned char *loaded;
  gpu_vendor vendor;               /* hip_vendor with the bundle in image / image_targets */
  char targets[256];               /* the bundle's targets, "gfx90a, gfx942, ..." */
  struct hip_device_extra *extras; /* per device, beside gpu.devices */
} hip_plugin;

static inline const hip_plugin *hip_plugin_of(const gpu_plugin *plugin) {
  return (const hip_plugin *)plugin;
}

/* What the HIP plugin keeps per device beyond the GPU layer's props. */
typedef struct hip_device_extra {
  char arch_name[64]; /* "gfx90a:sramecc+:xnack-", as the runtime reports it */
  char hip_uuid[64];  /* the runtime's UUID ("GPU-..."), when it has one */
  int pci_function;
} hip_device_extra;

/* ---- driver.c ---- */

/* Opens `library` (NULL or empty: libamdhip64.so.7, .so.6, then .so.5) and
 * resolves the runtime API; fills the plugin's driver table over it. Returns
 * false with `why` (a sentence) when that fails; nothing is then left open. */
bool hip_driver_open(hip_plugin *plugin, const char *library, char *why, size_t capacity);
void hip_driver_close(hip_plugin *plugin);
/* "hipErrorOutOfMemory (out of memory)" for a result. */
void hip_describe(void *api, int result, char *buffer, size_t capacity);

/* The driver table's entries over libamdhip64, by subject (device.c,
 * memory.c, queue.c); their context is the plugin's hip_api. */
void hip_device_entries(gpu_driver *driver);
void hip_memory_entries(gpu_driver *driver);
void hip_queue_entries(gpu_driver *driver);

/* ---- code_objects.c: clang offload bundles of code objects, gfx names ---- */

/* Reads the entries of a bundle of `size` bytes; false with `why` when it is
 * not one (or holds no AMD GPU code object). */
bool hip_bundle_parse(hip_bundle *bundle, const unsigned char *data, size_t size, char *why,
                      size_t capacity);
/* The entry that runs on a GPU reporting `arch_name` ("gfx90a:sramecc+:xnack-"):
 * same processor, and every feature the entry names (+ or -) matching the
 * GPU's; -1 when none does. */
int hip_bundle_find(const hip_bundle *bundle, const char *arch_name);
/* "gfx90a, gfx942, gfx1030" into `out`. */
void hip_bundle_describe(const hip_bundle *bundle, char *out, size_t capacity);

/* Parses "gfx90a..." into major 9, minor 0x0a ("gfx1100": 11, 0x00;
 * "gfx942": 9, 0x42): the last two characters are minor and stepping in
 * hex, the rest the major in decimal. False for anything else. */
bool hip_arch_parse(const char *arch_name, int *major, int *minor);
/* The gfx name the runtime's properties hold (found by content: the layout
 * of hipDeviceProp_t differs between ROCm 5 and 6), "" when none. */
void hip_arch_from_props(const unsigned char *props, size_t size, char *out, size_t capacity);
/* Vulkan drivers on AMD (RADV, AMDVLK) build the device UUID from the PCI
 * address: domain, bus, device, function as four little-endian 32-bit
 * words. The same string here lets a GPU seen through HIP and Vulkan be
 * grouped. */
void hip_physical_id(int domain, int bus, int device, int function, char *out, size_t capacity);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" of 16 bytes, as Vulkan's and
 * CUDA's UUIDs are written. */
void hip_format_uuid(const unsigned char b[16], char *out, size_t capacity);

/* ---- device.c: the ABI entries that know the HIP runtime ---- */

tsr_status hip_init(const tsr_host_services_v2 *services, void **plugin, char *reason,
                    size_t reason_capacity);
void hip_shutdown(void *plugin);
tsr_status hip_device_info(void *plugin, uint32_t index, tsr_device_info *info);
tsr_status hip_device_open(void *plugin, uint32_t index, void **device);
void hip_device_close(void *device);

/* ---- configs.c ---- */

/* AMD's rows and tables; image and image_targets are filled from the bundle
 * at init. */
extern const gpu_vendor hip_vendor;
/* The tile-table class of a device ("cdna3", "rdna2", ...). */
const char *hip_arch_class_name(int arch_major, int arch_minor);

/* The bundle built with the plugin (generated .c file). */
extern const unsigned char tsr_hip_code_objects[];
extern const unsigned long long tsr_hip_code_objects_size;

#endif /* TESSERA_HIP_INTERNAL_H */
