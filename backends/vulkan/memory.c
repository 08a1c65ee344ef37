/* SPDX-License-Identifier: Apache-2.0 */
/* Device memory through a small sub-allocator: vkAllocateMemory is slow and
 * drivers cap the number of allocations, so tensors come out of 64 MiB blocks
 * (first fit over a sorted free list, coalesced on free), each spanned by one
 * VkBuffer; a request of more than half a block gets a block of its own. A
 * block goes back to the driver when it is empty. No allocation larger than
 * its memory heap or the driver's maxMemoryAllocationSize is ever asked
 * for: such a buffer fails as out of memory with both sizes named, before
 * the driver sees it (lavapipe would try it). Memory is device local;
 * where the device-local memory is also host visible (lavapipe, integrated
 * GPUs, a discrete GPU's memory behind a resizable BAR) blocks stay mapped,
 * and writes skip the staging copy; reads too where the memory is host
 * cached (through a BAR they crawl: 256 MiB took 9.8 s on an H100).
 * Wrapped host memory is imported (VK_EXT_external_memory_host) into a
 * VkBuffer of its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan_internal.h"

enum { BLOCK_BYTES = 64 << 20, ALLOCATION_ALIGNMENT = 256 };

typedef struct free_range {
  struct free_range *next;
  uint64_t offset, bytes;
} free_range;

struct vulkan_block {
  vulkan_block *next;
  VkDeviceMemory memory;
  VkBuffer buffer;
  uint64_t bytes;
  void *mapped;
  bool staging, dedicated;
  uint32_t live; /* allocations in it */
  free_range *free;
};

static uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

static uint64_t allocation_alignment(const vulkan_device *device) {
  uint64_t a = device->props->storage_alignment;
  return a > ALLOCATION_ALIGNMENT ? a : ALLOCATION_ALIGNMENT;
}

/* Picks the memory types: for tensors, a device-local type of the largest
 * device-local heap (host visible and coherent where one such exists); for
 * staging, host visible and coherent, cached where possible (reads). */
tsr_status vulkan_memory_init(vulkan_device *device) {
  VkPhysicalDeviceMemoryProperties m;
  device->plugin->loader.vkGetPhysicalDeviceMemoryProperties(device->props->physical, &m);
  int best = -1, best_score = -1, staging = -1, staging_score = -1;
  uint64_t largest = 0;
  for (uint32_t h = 0; h < m.memoryHeapCount; h++)
    if ((m.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        m.memoryHeaps[h].size > largest)
      largest = m.memoryHeaps[h].size;
  const VkMemoryPropertyFlags mappable =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t t = 0; t < m.memoryTypeCount; t++) {
    VkMemoryPropertyFlags f = m.memoryTypes[t].propertyFlags;
    if (f & (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT))
      continue;
    uint64_t heap = m.memoryHeaps[m.memoryTypes[t].heapIndex].size;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && heap == largest) {
      int score = (f & mappable) == mappable ? 2 : 1;
      if (score > best_score) {
        best = (int)t;
        best_score = score;
      }
    }
    if ((f & mappable) == mappable) {
      int score = (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT ? 2 : 1) +
                  (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT ? 0 : 1);
      if (score > staging_score) {
        staging = (int)t;
        staging_score = score;
      }
    }
  }
  if (best < 0 || staging < 0) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BACKEND,
                           "%s has no device-local or no host-visible memory type",
                           device->props->name);
  }
  device->memory_type = (uint32_t)best;
  device->host_visible = best_score == 2;
  device->host_cached =
      (m.memoryTypes[best].propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0;
  /* TESSERA_VULKAN_NO_MAPPING=1 sends reads and writes through the staging
   * copies even where device memory is mapped (tests cover that path on
   * lavapipe). */
  const char *no_mapping = tsr_plugin_env(&device->plugin->host, "TESSERA_VULKAN_NO_MAPPING");
  device->mapping_off = no_mapping && *no_mapping && no_mapping[0] != '0';
  if (device->mapping_off)
    device->host_visible = false;
  device->staging_type = (uint32_t)staging;
  return TSR_OK;
}

static void destroy_block(vulkan_device *device, vulkan_block *block) {
  if (block->buffer)
    device->vk.vkDestroyBuffer(device->handle, block->buffer, NULL);
  if (block->memory)
    device->vk.vkFreeMemory(device->handle, block->memory, NULL);
  free_range *r = block->free;
  while (r) {
    free_range *next = r->next;
    free(r);
    r = next;
  }
  free(block);
}

static tsr_status create_block(vulkan_device *device, uint64_t bytes, bool staging, bool dedicated,
                               vulkan_block **out) {
  vulkan_block *block = calloc(1, sizeof *block);
  free_range *range = calloc(1, sizeof *range);
  if (!block || !range) {
    free(block);
    free(range);
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a memory block");
  }
  block->bytes = bytes;
  block->staging = staging;
  block->dedicated = dedicated;
  VkBufferCreateInfo create = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = bytes,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  char what[128];
  VkResult result = device->vk.vkCreateBuffer(device->handle, &create, NULL, &block->buffer);
  if (result != VK_SUCCESS) {
    block->buffer = NULL;
    free(range);
    destroy_block(device, block);
    snprintf(what, sizeof what, "vkCreateBuffer of %llu bytes", (unsigned long long)bytes);
    return vulkan_fail(device->plugin, result, what);
  }
  VkMemoryRequirements need;
  device->vk.vkGetBufferMemoryRequirements(device->handle, block->buffer, &need);
  uint32_t type = staging ? device->staging_type : device->memory_type;
  if (!(need.memoryTypeBits & (1u << type))) {
    free(range);
    destroy_block(device, block);
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_BACKEND,
                           "buffers cannot use memory type %u", type);
  }
  VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                   .allocationSize = need.size,
                                   .memoryTypeIndex = type};
  result = device->vk.vkAllocateMemory(device->handle, &allocate, NULL, &block->memory);
  if (result == VK_SUCCESS)
    result = device->vk.vkBindBufferMemory(device->handle, block->buffer, block->memory, 0);
  else
    block->memory = NULL;
  if (result == VK_SUCCESS && (staging || device->host_visible))
    result =
        device->vk.vkMapMemory(device->handle, block->memory, 0, VK_WHOLE_SIZE, 0, &block->mapped);
  if (result != VK_SUCCESS) {
    free(range);
    destroy_block(device, block);
    snprintf(what, sizeof what, "allocating %llu bytes of %s memory", (unsigned long long)bytes,
             staging ? "staging" : "device");
    return vulkan_fail(device->plugin, result, what);
  }
  range->offset = 0;
  range->bytes = bytes;
  block->free = range;
  *out = block;
  return TSR_OK;
}

/* The most one allocation of `type` may hold: its heap's size (*heap) and
 * maxMemoryAllocationSize (*allocation, Vulkan 1.1). Queried only when a
 * block is made, where vkAllocateMemory costs far more. */
static void allocation_limits(const vulkan_device *device, uint32_t type, uint64_t *heap,
                              uint64_t *allocation) {
  const vulkan_loader *l = &device->plugin->loader;
  VkPhysicalDeviceMemoryProperties m;
  l->vkGetPhysicalDeviceMemoryProperties(device->props->physical, &m);
  *heap = m.memoryHeaps[m.memoryTypes[type].heapIndex].size;
  VkPhysicalDeviceMaintenance3Properties maintenance3 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 properties = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                            .pNext = &maintenance3};
  l->vkGetPhysicalDeviceProperties2(device->props->physical, &properties);
  /* 0 from a driver that leaves it unset: the heap is the only limit. */
  *allocation = maintenance3.maxMemoryAllocationSize ? maintenance3.maxMemoryAllocationSize : *heap;
}

/* First fit in one block; true with the offset when it had room. */
static bool take(vulkan_block *block, uint64_t bytes, uint64_t *offset) {
  for (free_range **link = &block->free; *link; link = &(*link)->next) {
    free_range *r = *link;
    if (r->bytes < bytes)
      continue;
    *offset = r->offset;
    r->offset += bytes;
    r->bytes -= bytes;
    if (r->bytes == 0) {
      *link = r->next;
      free(r);
    }
    block->live++;
    return true;
  }
  return false;
}

/* Returns a range to its block's sorted free list, merging neighbours. A
 * list node the host cannot allocate only loses the range until the block
 * goes back. */
static void give_back(vulkan_block *block, uint64_t offset, uint64_t bytes) {
  block->live--;
  free_range *before = NULL, *after = block->free;
  while (after && after->offset < offset) {
    before = after;
    after = after->next;
  }
  if (before && before->offset + before->bytes == offset) {
    before->bytes += bytes;
    if (after && before->offset + before->bytes == after->offset) {
      before->bytes += after->bytes;
      before->next = after->next;
      free(after);
    }
    return;
  }
  if (after && offset + bytes == after->offset) {
    after->offset = offset;
    after->bytes += bytes;
    return;
  }
  free_range *r = malloc(sizeof *r);
  if (!r)
    return;
  r->offset = offset;
  r->bytes = bytes;
  r->next = after;
  if (before)
    before->next = r;
  else
    block->free = r;
}

tsr_status vulkan_buffer_create(vulkan_device *device, uint64_t bytes, bool staging,
                                vulkan_buffer **out) {
  vulkan_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a buffer");
  }
  uint64_t size = align_up(bytes ? bytes : 1, allocation_alignment(device));
  bool dedicated = size > BLOCK_BYTES / 2;
  tsr_status status = TSR_OK;
  pthread_mutex_lock(&device->memory_lock);
  vulkan_block *block = NULL;
  uint64_t offset = 0;
  if (!dedicated)
    for (block = device->blocks; block; block = block->next)
      if (!block->dedicated && block->staging == staging && take(block, size, &offset))
        break;
  if (!block) {
    uint64_t heap, allocation;
    allocation_limits(device, staging ? device->staging_type : device->memory_type, &heap,
                      &allocation);
    uint64_t limit = heap < allocation ? heap : allocation;
    if (size > limit) {
      if (size > heap)
        status = tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                                 "%s: a buffer of %llu bytes does not fit the %llu-byte %s "
                                 "memory heap",
                                 device->props->name, (unsigned long long)bytes,
                                 (unsigned long long)heap, staging ? "staging" : "device-local");
      else
        status = tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                                 "%s: a buffer of %llu bytes is larger than one allocation may "
                                 "be (maxMemoryAllocationSize %llu bytes; the %llu-byte heap)",
                                 device->props->name, (unsigned long long)bytes,
                                 (unsigned long long)allocation, (unsigned long long)heap);
    } else {
      /* A heap or limit smaller than a block: the buffer gets its own. */
      if (!dedicated && BLOCK_BYTES > limit)
        dedicated = true;
      status = create_block(device, dedicated ? size : BLOCK_BYTES, staging, dedicated, &block);
    }
    if (status == TSR_OK) {
      take(block, size, &offset);
      block->next = device->blocks;
      device->blocks = block;
    }
  }
  pthread_mutex_unlock(&device->memory_lock);
  if (status != TSR_OK) {
    free(buffer);
    return status;
  }
  buffer->block = block;
  buffer->handle = block->buffer;
  buffer->offset = offset;
  buffer->bytes = bytes;
  buffer->mapped = block->mapped ? (char *)block->mapped + offset : NULL;
  *out = buffer;
  return TSR_OK;
}

void vulkan_buffer_destroy(vulkan_device *device, vulkan_buffer *buffer) {
  if (!buffer)
    return;
  if (!buffer->block) { /* wrapped host memory: only the Vulkan objects go */
    device->vk.vkDestroyBuffer(device->handle, buffer->handle, NULL);
    device->vk.vkFreeMemory(device->handle, buffer->imported, NULL);
    free(buffer);
    return;
  }
  uint64_t size = align_up(buffer->bytes ? buffer->bytes : 1, allocation_alignment(device));
  pthread_mutex_lock(&device->memory_lock);
  vulkan_block *block = buffer->block;
  give_back(block, buffer->offset, size);
  if (block->live == 0) {
    for (vulkan_block **link = &device->blocks; *link; link = &(*link)->next) {
      if (*link == block) {
        *link = block->next;
        break;
      }
    }
    destroy_block(device, block);
  }
  pthread_mutex_unlock(&device->memory_lock);
  free(buffer);
}

void vulkan_memory_release(vulkan_device *device) {
  vulkan_block *block = device->blocks;
  while (block) {
    vulkan_block *next = block->next;
    destroy_block(device, block);
    block = next;
  }
  device->blocks = NULL;
}

/* The ABI's buffers: work that may use the buffer is finished by the core
 * before buffer_free (it waits for the device's queues). */
tsr_status vulkan_buffer_alloc(void *handle, uint64_t bytes, void **out) {
  vulkan_buffer *buffer = NULL;
  tsr_status status = vulkan_buffer_create(handle, bytes, false, &buffer);
  if (status == TSR_OK)
    *out = buffer;
  return status;
}

void vulkan_buffer_free(void *handle, void *buffer) {
  vulkan_buffer_destroy(handle, buffer);
}

/* The import of [start, start + bytes) as memory of a VkBuffer that spans
 * it: the memory type the driver allows for the range (host visible and
 * coherent where one is, so reads and writes use the memory directly). */
static tsr_status import_range(vulkan_device *device, char *start, uint64_t bytes,
                               vulkan_buffer *buffer, bool *coherent) {
  const vulkan_plugin *plugin = device->plugin;
  const VkExternalMemoryHandleTypeFlagBits type =
      VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkMemoryHostPointerPropertiesEXT host = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
  VkResult result =
      device->vk.vkGetMemoryHostPointerPropertiesEXT(device->handle, type, start, &host);
  if (result != VK_SUCCESS)
    return vulkan_fail(plugin, result, "buffer_wrap: vkGetMemoryHostPointerPropertiesEXT");
  VkExternalMemoryBufferCreateInfo external = {
      .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = type};
  VkBufferCreateInfo create = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .pNext = &external,
                               .size = bytes,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  result = device->vk.vkCreateBuffer(device->handle, &create, NULL, &buffer->handle);
  if (result != VK_SUCCESS) {
    buffer->handle = NULL;
    return vulkan_fail(plugin, result, "buffer_wrap: vkCreateBuffer over host memory");
  }
  VkMemoryRequirements need;
  device->vk.vkGetBufferMemoryRequirements(device->handle, buffer->handle, &need);
  VkPhysicalDeviceMemoryProperties m;
  plugin->loader.vkGetPhysicalDeviceMemoryProperties(device->props->physical, &m);
  const VkMemoryPropertyFlags mappable =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t allowed = need.memoryTypeBits & host.memoryTypeBits;
  int chosen = -1;
  for (uint32_t t = 0; t < m.memoryTypeCount; t++)
    if ((allowed & (1u << t)) &&
        (chosen < 0 || ((m.memoryTypes[t].propertyFlags & mappable) == mappable &&
                        (m.memoryTypes[chosen].propertyFlags & mappable) != mappable)))
      chosen = (int)t;
  tsr_status status = TSR_OK;
  if (chosen < 0 || need.size > bytes)
    status = tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                             "buffer_wrap: %s cannot back a buffer with imported host memory "
                             "(memory types: buffer 0x%x, host pointer 0x%x; the buffer needs "
                             "%llu bytes of the %llu imported)",
                             device->props->name, need.memoryTypeBits, host.memoryTypeBits,
                             (unsigned long long)need.size, (unsigned long long)bytes);
  if (status == TSR_OK) {
    VkImportMemoryHostPointerInfoEXT import = {
        .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
        .handleType = type,
        .pHostPointer = start};
    VkMemoryAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                     .pNext = &import,
                                     .allocationSize = bytes,
                                     .memoryTypeIndex = (uint32_t)chosen};
    result = device->vk.vkAllocateMemory(device->handle, &allocate, NULL, &buffer->imported);
    if (result != VK_SUCCESS)
      buffer->imported = NULL;
    else
      result = device->vk.vkBindBufferMemory(device->handle, buffer->handle, buffer->imported, 0);
    if (result != VK_SUCCESS)
      status = vulkan_fail(plugin, result, "buffer_wrap: importing host memory");
  }
  if (status != TSR_OK) {
    if (buffer->imported)
      device->vk.vkFreeMemory(device->handle, buffer->imported, NULL);
    device->vk.vkDestroyBuffer(device->handle, buffer->handle, NULL);
    return status;
  }
  *coherent = (m.memoryTypes[chosen].propertyFlags & mappable) == mappable;
  return TSR_OK;
}

/* The application's host memory, used in place through
 * VK_EXT_external_memory_host. Drivers import only ranges whose start and
 * size are multiples of minImportedHostPointerAlignment (a page, usually),
 * so the enclosing aligned range is imported and the buffer starts at the
 * pointer's offset in it: any pointer and size work. The bytes around the
 * caller's range share its pages and are never written (ops write only
 * their tensors' elements). Freeing the buffer releases the import. */
tsr_status vulkan_buffer_wrap(void *handle, int32_t kind, void *pointer, uint64_t bytes,
                              void **out) {
  vulkan_device *device = handle;
  const vulkan_plugin *plugin = device->plugin;
  const vulkan_device_props *p = device->props;
  if (kind != TSR_EXTERNAL_HOST_POINTER)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                           "buffer_wrap: kind = %d is not host memory "
                           "(TSR_EXTERNAL_HOST_POINTER = %d), the only memory the vulkan plugin "
                           "wraps",
                           (int)kind, (int)TSR_EXTERNAL_HOST_POINTER);
  if (!p->external_memory_host || !device->vk.vkGetMemoryHostPointerPropertiesEXT)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_UNSUPPORTED,
                           "buffer_wrap: %s lacks %s, so host memory cannot be used in place; "
                           "create a buffer and write the data instead",
                           p->name, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  if (!pointer || bytes == 0)
    return tsr_plugin_fail(&plugin->host, !pointer ? TSR_ERROR_NULL_ARGUMENT : TSR_ERROR_BAD_SIZE,
                           "buffer_wrap: pointer = %p, bytes = %llu (need memory and 1 byte or "
                           "more)",
                           pointer, (unsigned long long)bytes);
  /* Also the storage alignment, so that bindings (aligned down to it in
   * buffer offsets) are aligned in addresses too. */
  uint64_t alignment = p->host_import_alignment;
  if (alignment < p->storage_alignment)
    alignment = p->storage_alignment;
  uintptr_t address = (uintptr_t)pointer;
  uint64_t base = (uint64_t)address / alignment * alignment;
  uint64_t end = 0;
  if (__builtin_add_overflow((uint64_t)address, bytes, &end) ||
      __builtin_add_overflow(end, alignment - 1, &end) || end > UINTPTR_MAX)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_BAD_SIZE,
                           "buffer_wrap: %llu bytes at %p pass the end of the address space",
                           (unsigned long long)bytes, pointer);
  end = end / alignment * alignment;
  vulkan_buffer *buffer = calloc(1, sizeof *buffer);
  if (!buffer)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a buffer");
  bool coherent = false;
  tsr_status status = import_range(device, (char *)(uintptr_t)base, end - base, buffer, &coherent);
  if (status != TSR_OK) {
    free(buffer);
    return status;
  }
  buffer->offset = (uint64_t)address - base;
  buffer->bytes = bytes;
  buffer->mapped = coherent && !device->mapping_off ? pointer : NULL;
  buffer->host = pointer;
  *out = buffer;
  return TSR_OK;
}

/* Wrapped host memory has the application's address; device memory has no
 * address another library could use (the core falls back then). */
tsr_status vulkan_buffer_export(void *handle, int32_t *kind, uint64_t *address) {
  const vulkan_buffer *buffer = handle;
  if (!buffer->host)
    return TSR_ERROR_UNSUPPORTED;
  *kind = TSR_EXTERNAL_HOST_POINTER;
  *address = (uint64_t)(uintptr_t)buffer->host;
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Tensors as bindings                                                       */
/* ------------------------------------------------------------------------ */

int64_t vulkan_tensor_span(const tsr_plugin_tensor *t) {
  int64_t last = 0;
  for (int32_t i = 0; i < t->rank; i++) {
    if (t->shape[i] == 0)
      return 0;
    last += (t->shape[i] - 1) * (t->strides[i] < 0 ? -t->strides[i] : t->strides[i]);
  }
  return last + 1;
}

uint32_t vulkan_stride_of(const tsr_plugin_tensor *t, int dim) {
  return t->shape[dim] > 1 ? (uint32_t)t->strides[dim] : 0u;
}

bool vulkan_bind_tensor(const vulkan_device *device, const tsr_plugin_tensor *t,
                        vulkan_binding *out, uint32_t *first, char *why, size_t why_capacity) {
  const vulkan_buffer *buffer = t->buffer;
  const vulkan_device_props *p = device->props;
  uint64_t size = tsr_plugin_dtype_size(t->dtype);
  uint64_t start = buffer->offset + t->offset;
  uint64_t aligned = start / p->storage_alignment * p->storage_alignment;
  uint64_t skip = start - aligned;
  if (size == 0 || skip % size != 0) {
    snprintf(why, why_capacity,
             "a tensor's byte offset %llu (in a buffer whose memory starts %llu bytes past a "
             "%llu-byte boundary) leaves its first element unaligned to its %llu-byte elements",
             (unsigned long long)t->offset,
             (unsigned long long)(buffer->offset % p->storage_alignment),
             (unsigned long long)p->storage_alignment, (unsigned long long)size);
    return false;
  }
  /* Whether the tensor fits one binding is decided on what the core's
   * problem signature keeps of the offset, its alignment (up to 256 bytes,
   * which bounds the storage alignment): with the largest skip an address
   * of that alignment can have, so that every problem of one signature gets
   * the same answer. */
  uint64_t align = start & (~start + 1); /* lowest set bit; 0 for address 0 */
  uint64_t worst = align == 0 || align >= p->storage_alignment ? 0 : p->storage_alignment - align;
  uint64_t span = (uint64_t)vulkan_tensor_span(t);
  uint64_t elements = worst / size + span;
  if (elements > UINT32_MAX || worst + span * size > p->max_storage_range) {
    snprintf(why, why_capacity,
             "a tensor of %llu elements spans %llu bytes; one binding holds at most %llu bytes "
             "and 2^32 elements on this device",
             (unsigned long long)span, (unsigned long long)(worst + span * size),
             (unsigned long long)p->max_storage_range);
    return false;
  }
  /* Allocations are whole multiples of ALLOCATION_ALIGNMENT, and wrapped
   * host memory is imported in whole multiples of at least the storage
   * alignment, so the range may end on the 16-byte boundary past the last
   * byte: 32-bit word and 4-element views of 16-bit data then cover the
   * last element. */
  uint64_t end = align_up(buffer->offset + (buffer->bytes ? buffer->bytes : 1), 16);
  uint64_t range = end - aligned;
  if (range > p->max_storage_range)
    range = p->max_storage_range;
  out->buffer = buffer->handle;
  out->offset = aligned;
  out->range = range;
  *first = (uint32_t)(skip / size);
  return true;
}
