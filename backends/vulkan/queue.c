/* SPDX-License-Identifier: Apache-2.0 */
/* Queues, transfers and events. A tessera queue records into a command
 * buffer of its own pool and submits it to the device's one VkQueue (shared
 * under a lock) with a timeline semaphore that counts its submissions; a
 * command buffer returns to the queue's spares once the timeline passes it.
 * Every recorded command is preceded by a full compute/transfer memory
 * barrier, so ops and copies on a queue see each other's writes in order.
 * Work is submitted when a transfer, an event wait or finish needs it, and
 * every 64 commands so the device starts while the host records more.
 * Events are timeline values plus a timestamp query, recorded without a
 * submission of their own. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan_internal.h"

enum {
  FLUSH_EVERY = 64,
  QUERY_COUNT = 4096,
  STAGING_MIN = 4 << 20,
  STAGING_MAX = 64 << 20,
  FAULT_BYTES = TSR_PLUGIN_FAULT_COUNT * 4
};

static const vulkan_plugin *plugin_of(const vulkan_queue *queue) {
  return queue->device->plugin;
}

/* Moves command buffers the device has finished with to the spares. */
static void retire(vulkan_queue *queue) {
  vulkan_device *device = queue->device;
  uint64_t done = 0;
  if (device->vk.vkGetSemaphoreCounterValue(device->handle, queue->timeline, &done) != VK_SUCCESS)
    return;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < queue->flight_count; i++) {
    vulkan_submission s = queue->flight[i];
    if (s.value <= done && queue->spare_count < queue->spare_capacity) {
      queue->spare[queue->spare_count++] = s.command;
    } else if (s.value <= done) {
      device->vk.vkFreeCommandBuffers(device->handle, queue->pool, 1, &s.command);
    } else {
      queue->flight[kept++] = s;
    }
  }
  queue->flight_count = kept;
}

static tsr_status begin(vulkan_queue *queue) {
  if (queue->open)
    return TSR_OK;
  vulkan_device *device = queue->device;
  VkCommandBuffer command = NULL;
  if (queue->spare_count == 0)
    retire(queue);
  if (queue->spare_count > 0) {
    command = queue->spare[--queue->spare_count];
    device->vk.vkResetCommandBuffer(command, 0);
  } else {
    VkCommandBufferAllocateInfo allocate = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                            .commandPool = queue->pool,
                                            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                            .commandBufferCount = 1};
    VkResult result = device->vk.vkAllocateCommandBuffers(device->handle, &allocate, &command);
    if (result != VK_SUCCESS)
      return vulkan_fail(device->plugin, result, "vkAllocateCommandBuffers");
  }
  VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult result = device->vk.vkBeginCommandBuffer(command, &info);
  if (result != VK_SUCCESS) {
    device->vk.vkFreeCommandBuffers(device->handle, queue->pool, 1, &command);
    return vulkan_fail(device->plugin, result, "vkBeginCommandBuffer");
  }
  queue->open = command;
  queue->open_dispatches = 0;
  return TSR_OK;
}

static void barrier(vulkan_queue *queue, VkPipelineStageFlags dst_stages,
                    VkAccessFlags dst_access) {
  VkMemoryBarrier b = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                       .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                       .dstAccessMask = dst_access};
  queue->device->vk.vkCmdPipelineBarrier(
      queue->open, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
      dst_stages, 0, 1, &b, 0, NULL, 0, NULL);
}

/* Opens a command buffer if needed and orders the next command after every
 * earlier one on this queue. */
static tsr_status prepare(vulkan_queue *queue) {
  if (queue->failed != TSR_OK) {
    return tsr_plugin_fail(&plugin_of(queue)->host, queue->failed,
                           "an earlier submission on this queue failed");
  }
  tsr_status status = begin(queue);
  if (status != TSR_OK)
    return status;
  barrier(queue, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
              VK_ACCESS_TRANSFER_WRITE_BIT);
  return TSR_OK;
}

static tsr_status wait_value(vulkan_queue *queue, uint64_t value) {
  vulkan_device *device = queue->device;
  VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &queue->timeline,
                              .pValues = &value};
  VkResult result = device->vk.vkWaitSemaphores(device->handle, &wait, UINT64_MAX);
  if (result != VK_SUCCESS) {
    queue->failed = vulkan_fail(device->plugin, result, "waiting for queued work");
    return queue->failed;
  }
  return TSR_OK;
}

tsr_status vulkan_queue_flush(vulkan_queue *queue, bool wait) {
  vulkan_device *device = queue->device;
  if (queue->open) {
    /* Make the device's writes visible to the host for mapped memory. */
    barrier(queue, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VkCommandBuffer command = queue->open;
    queue->open = NULL;
    VkResult result = device->vk.vkEndCommandBuffer(command);
    if (queue->flight_count == queue->flight_capacity) {
      uint32_t capacity = queue->flight_capacity ? queue->flight_capacity * 2 : 16;
      vulkan_submission *grown = realloc(queue->flight, capacity * sizeof *grown);
      if (!grown) {
        device->vk.vkFreeCommandBuffers(device->handle, queue->pool, 1, &command);
        return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                               "out of host memory for a submission");
      }
      queue->flight = grown;
      queue->flight_capacity = capacity;
    }
    uint64_t value = queue->submitted + 1;
    if (result == VK_SUCCESS) {
      VkTimelineSemaphoreSubmitInfo timeline = {
          .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
          .signalSemaphoreValueCount = 1,
          .pSignalSemaphoreValues = &value};
      VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                             .pNext = &timeline,
                             .commandBufferCount = 1,
                             .pCommandBuffers = &command,
                             .signalSemaphoreCount = 1,
                             .pSignalSemaphores = &queue->timeline};
      pthread_mutex_lock(&device->queue_lock);
      result = device->vk.vkQueueSubmit(device->queue, 1, &submit, VK_NULL_HANDLE);
      pthread_mutex_unlock(&device->queue_lock);
    }
    if (result != VK_SUCCESS) {
      device->vk.vkFreeCommandBuffers(device->handle, queue->pool, 1, &command);
      queue->failed = vulkan_fail(device->plugin, result, "vkQueueSubmit");
      return queue->failed;
    }
    queue->submitted = value;
    queue->flight[queue->flight_count++] = (vulkan_submission){command, value};
  }
  if (wait && queue->submitted > 0) {
    tsr_status status = wait_value(queue, queue->submitted);
    if (status != TSR_OK)
      return status;
    retire(queue);
  }
  return TSR_OK;
}

/* After recording a command: submit every FLUSH_EVERY so work starts. */
static tsr_status recorded(vulkan_queue *queue) {
  if (++queue->open_dispatches >= FLUSH_EVERY)
    return vulkan_queue_flush(queue, false);
  return TSR_OK;
}

tsr_status vulkan_dispatch(vulkan_queue *queue, const vulkan_pipeline *pipeline,
                           const vulkan_binding *bindings, uint32_t n_bindings, const void *push,
                           uint32_t push_bytes, uint32_t groups_x, uint32_t groups_y,
                           uint32_t groups_z) {
  vulkan_device *device = queue->device;
  const vulkan_device_props *p = device->props;
  if (n_bindings > VULKAN_MAX_BINDINGS || push_bytes > VULKAN_PUSH_BYTES) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_INVALID_VALUE,
                           "a dispatch with %u bindings and %u push bytes "
                           "(max %d and %d)",
                           n_bindings, push_bytes, VULKAN_MAX_BINDINGS, VULKAN_PUSH_BYTES);
  }
  if (groups_x > p->max_workgroup_count[0] || groups_y > p->max_workgroup_count[1] ||
      groups_z > p->max_workgroup_count[2]) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "%u x %u x %u workgroups exceed the device's %u x %u x %u", groups_x,
                           groups_y, groups_z, p->max_workgroup_count[0], p->max_workgroup_count[1],
                           p->max_workgroup_count[2]);
  }
  if (groups_x == 0 || groups_y == 0 || groups_z == 0)
    return TSR_OK;
  tsr_status status = prepare(queue);
  if (status != TSR_OK)
    return status;
  VkDescriptorBufferInfo infos[VULKAN_MAX_BINDINGS];
  VkWriteDescriptorSet writes[VULKAN_MAX_BINDINGS];
  for (uint32_t i = 0; i < n_bindings; i++) {
    infos[i] = (VkDescriptorBufferInfo){bindings[i].buffer, bindings[i].offset, bindings[i].range};
    writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstBinding = i,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &infos[i]};
  }
  VkCommandBuffer c = queue->open;
  device->vk.vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->handle);
  if (n_bindings)
    device->vk.vkCmdPushDescriptorSetKHR(c, VK_PIPELINE_BIND_POINT_COMPUTE, device->layout, 0,
                                         n_bindings, writes);
  if (push_bytes) {
    /* Push constants go in whole words. */
    uint32_t words[VULKAN_PUSH_BYTES / 4] = {0};
    memcpy(words, push, push_bytes);
    device->vk.vkCmdPushConstants(c, device->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                  (push_bytes + 3) & ~3u, words);
  }
  device->vk.vkCmdDispatch(c, groups_x, groups_y, groups_z);
  return recorded(queue);
}

tsr_status vulkan_fill(vulkan_queue *queue, const vulkan_binding *b, uint64_t bytes,
                       uint32_t value) {
  tsr_status status = prepare(queue);
  if (status != TSR_OK)
    return status;
  queue->device->vk.vkCmdFillBuffer(queue->open, b->buffer, b->offset, bytes, value);
  return recorded(queue);
}

tsr_status vulkan_queue_scratch(vulkan_queue *queue, uint64_t bytes, vulkan_binding *out) {
  vulkan_device *device = queue->device;
  if (bytes > device->props->max_storage_range) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED,
                           "%llu bytes of scratch exceed the device's storage range of %llu",
                           (unsigned long long)bytes,
                           (unsigned long long)device->props->max_storage_range);
  }
  if (!queue->scratch || queue->scratch->bytes < bytes) {
    /* Work already queued may use the old scratch: let it finish first. */
    tsr_status status = vulkan_queue_flush(queue, true);
    if (status != TSR_OK)
      return status;
    uint64_t want = queue->scratch ? queue->scratch->bytes * 2 : (1u << 20);
    if (want < bytes)
      want = bytes;
    if (want > device->props->max_storage_range)
      want = bytes;
    vulkan_buffer_destroy(device, queue->scratch);
    queue->scratch = NULL;
    status = vulkan_buffer_create(device, want, false, &queue->scratch);
    if (status != TSR_OK)
      return status;
  }
  out->buffer = queue->scratch->handle;
  out->offset = queue->scratch->offset;
  out->range = queue->scratch->bytes;
  return TSR_OK;
}

tsr_status vulkan_queue_upload(vulkan_queue *queue, const void *data, uint32_t bytes,
                               vulkan_binding *out) {
  vulkan_device *device = queue->device;
  if (bytes == 0 || bytes % 4 || bytes > VULKAN_UPLOAD_BYTES) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_INVALID_VALUE,
                           "an upload of %u bytes (a multiple of 4 from 4 to %d)", bytes,
                           VULKAN_UPLOAD_BYTES);
  }
  if (!queue->upload) {
    tsr_status status = vulkan_buffer_create(device, VULKAN_UPLOAD_BYTES, false, &queue->upload);
    if (status != TSR_OK)
      return status;
  }
  tsr_status status = prepare(queue);
  if (status != TSR_OK)
    return status;
  device->vk.vkCmdUpdateBuffer(queue->open, queue->upload->handle, queue->upload->offset, bytes,
                               data);
  *out = (vulkan_binding){queue->upload->handle, queue->upload->offset, bytes};
  return recorded(queue);
}

/* ------------------------------------------------------------------------ */
/* Queue objects                                                             */
/* ------------------------------------------------------------------------ */

static void release_queue(vulkan_queue *queue) {
  vulkan_device *device = queue->device;
  if (queue->submitted > 0)
    wait_value(queue, queue->submitted);
  if (queue->open) {
    device->vk.vkEndCommandBuffer(queue->open);
    queue->open = NULL;
  }
  if (queue->pool)
    device->vk.vkDestroyCommandPool(device->handle, queue->pool, NULL); /* frees its buffers */
  if (queue->timeline)
    device->vk.vkDestroySemaphore(device->handle, queue->timeline, NULL);
  if (queue->timestamps)
    device->vk.vkDestroyQueryPool(device->handle, queue->timestamps, NULL);
  vulkan_buffer_destroy(device, queue->staging);
  vulkan_buffer_destroy(device, queue->scratch);
  vulkan_buffer_destroy(device, queue->upload);
  vulkan_buffer_destroy(device, queue->faults);
  free(queue->flight);
  free(queue->spare);
  free(queue);
}

tsr_status vulkan_queue_create(void *handle, void **out) {
  vulkan_device *device = handle;
  vulkan_queue *queue = calloc(1, sizeof *queue);
  VkCommandBuffer *spare = calloc(32, sizeof *spare);
  if (!queue || !spare) {
    free(queue);
    free(spare);
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a queue");
  }
  queue->device = device;
  queue->spare = spare;
  queue->spare_capacity = 32;
  queue->failed = TSR_OK;
  VkCommandPoolCreateInfo pool = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = device->props->queue_family};
  VkResult result = device->vk.vkCreateCommandPool(device->handle, &pool, NULL, &queue->pool);
  const char *what = "vkCreateCommandPool";
  if (result == VK_SUCCESS) {
    VkSemaphoreTypeCreateInfo type = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                      .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                      .initialValue = 0};
    VkSemaphoreCreateInfo semaphore = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                       .pNext = &type};
    result = device->vk.vkCreateSemaphore(device->handle, &semaphore, NULL, &queue->timeline);
    what = "creating a timeline semaphore";
  } else {
    queue->pool = NULL;
  }
  if (result == VK_SUCCESS && device->props->timestamp_bits > 0) {
    VkQueryPoolCreateInfo query = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                   .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                   .queryCount = QUERY_COUNT};
    result = device->vk.vkCreateQueryPool(device->handle, &query, NULL, &queue->timestamps);
    what = "creating a timestamp query pool";
    if (result != VK_SUCCESS)
      queue->timestamps = NULL;
  }
  if (result != VK_SUCCESS) {
    tsr_status status = vulkan_fail(device->plugin, result, what);
    release_queue(queue);
    return status;
  }
  /* The fault words kernels report bad device-side indices through. */
  tsr_status status = vulkan_buffer_create(device, FAULT_BYTES, false, &queue->faults);
  if (status == TSR_OK) {
    vulkan_binding b = {queue->faults->handle, queue->faults->offset, FAULT_BYTES};
    status = vulkan_fill(queue, &b, FAULT_BYTES, (uint32_t)TSR_PLUGIN_FAULT_NONE);
  }
  if (status == TSR_OK)
    status = vulkan_queue_flush(queue, true);
  if (status != TSR_OK) {
    release_queue(queue);
    return status;
  }
  pthread_mutex_lock(&device->queue_lock);
  queue->next_in_device = device->queues;
  device->queues = queue;
  pthread_mutex_unlock(&device->queue_lock);
  *out = queue;
  return TSR_OK;
}

void vulkan_queue_destroy(void *handle) {
  vulkan_queue *queue = handle;
  if (!queue)
    return;
  vulkan_device *device = queue->device;
  pthread_mutex_lock(&device->queue_lock);
  for (vulkan_queue **link = &device->queues; *link; link = &(*link)->next_in_device) {
    if (*link == queue) {
      *link = queue->next_in_device;
      break;
    }
  }
  pthread_mutex_unlock(&device->queue_lock);
  vulkan_queue_flush(queue, true);
  release_queue(queue);
}

/* ------------------------------------------------------------------------ */
/* Transfers                                                                 */
/* ------------------------------------------------------------------------ */

static bool check_range(const vulkan_plugin *plugin, const char *what, const vulkan_buffer *buffer,
                        uint64_t offset, uint64_t bytes) {
  if (offset > buffer->bytes || bytes > buffer->bytes - offset) {
    return tsr_plugin_fail(
        &plugin->host, false, "%s of %llu bytes at offset %llu overruns a buffer of %llu", what,
        (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)buffer->bytes);
  }
  return true;
}

static tsr_status ensure_staging(vulkan_queue *queue, uint64_t bytes) {
  if (queue->staging && queue->staging->bytes >= bytes)
    return TSR_OK;
  uint64_t want = bytes < STAGING_MIN ? STAGING_MIN : bytes;
  vulkan_buffer_destroy(queue->device, queue->staging);
  queue->staging = NULL;
  return vulkan_buffer_create(queue->device, want, true, &queue->staging);
}

static tsr_status record_copy(vulkan_queue *queue, VkBuffer src, uint64_t src_offset, VkBuffer dst,
                              uint64_t dst_offset, uint64_t bytes) {
  tsr_status status = prepare(queue);
  if (status != TSR_OK)
    return status;
  VkBufferCopy region = {src_offset, dst_offset, bytes};
  queue->device->vk.vkCmdCopyBuffer(queue->open, src, dst, 1, &region);
  return recorded(queue);
}

/* Writes run after earlier work (the queue is drained first) and return
 * when `src` may be reused: mapped memory is written directly; otherwise the
 * data goes through the staging buffer in chunks. */
tsr_status vulkan_buffer_write(void *handle, void *buffer_handle, uint64_t offset, const void *src,
                               uint64_t bytes) {
  vulkan_queue *queue = handle;
  vulkan_buffer *buffer = buffer_handle;
  if (!check_range(plugin_of(queue), "write", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  tsr_status status = vulkan_queue_flush(queue, true);
  if (status != TSR_OK)
    return status;
  if (buffer->mapped) {
    memcpy((char *)buffer->mapped + offset, src, bytes);
    return TSR_OK;
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t chunk = bytes - done < STAGING_MAX ? bytes - done : STAGING_MAX;
    status = ensure_staging(queue, chunk);
    if (status == TSR_OK) {
      memcpy(queue->staging->mapped, (const char *)src + done, chunk);
      status = record_copy(queue, queue->staging->handle, queue->staging->offset, buffer->handle,
                           buffer->offset + offset + done, chunk);
    }
    if (status == TSR_OK)
      status = vulkan_queue_flush(queue, true);
    if (status != TSR_OK)
      return status;
    done += chunk;
  }
  return TSR_OK;
}

tsr_status vulkan_buffer_read(void *handle, void *buffer_handle, uint64_t offset, void *dst,
                              uint64_t bytes) {
  vulkan_queue *queue = handle;
  vulkan_buffer *buffer = buffer_handle;
  if (!check_range(plugin_of(queue), "read", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  tsr_status status = vulkan_queue_flush(queue, true);
  if (status != TSR_OK)
    return status;
  if (buffer->mapped) {
    memcpy(dst, (const char *)buffer->mapped + offset, bytes);
    return TSR_OK;
  }
  for (uint64_t done = 0; done < bytes;) {
    uint64_t chunk = bytes - done < STAGING_MAX ? bytes - done : STAGING_MAX;
    status = ensure_staging(queue, chunk);
    if (status == TSR_OK)
      status = record_copy(queue, buffer->handle, buffer->offset + offset + done,
                           queue->staging->handle, queue->staging->offset, chunk);
    if (status == TSR_OK)
      status = vulkan_queue_flush(queue, true);
    if (status != TSR_OK)
      return status;
    memcpy((char *)dst + done, queue->staging->mapped, chunk);
    done += chunk;
  }
  return TSR_OK;
}

/* 16-byte aligned copies go through kernels/copy.comp (vkCmdCopyBuffer on a
 * compute queue reached about a third of the bandwidth on an H100), in chunks
 * a binding can hold; others through vkCmdCopyBuffer. */
static tsr_status shader_copy(vulkan_queue *queue, const vulkan_buffer *src, uint64_t src_offset,
                              const vulkan_buffer *dst, uint64_t dst_offset, uint64_t bytes) {
  vulkan_device *device = queue->device;
  const vulkan_device_props *p = device->props;
  enum { WG = 256, UNITS = 4 };
  const uint32_t spec[2] = {WG, UNITS};
  const vulkan_pipeline *pipeline = NULL;
  tsr_status status = vulkan_pipeline_get(device, "copy", spec, 2, 0, &pipeline);
  if (status != TSR_OK)
    return status;
  uint64_t chunk_max =
      p->max_storage_range < ((uint64_t)1 << 30) ? p->max_storage_range : ((uint64_t)1 << 30);
  chunk_max = chunk_max / 256 * 256 - 256; /* room for the alignment below */
  for (uint64_t done = 0; done < bytes && status == TSR_OK;) {
    uint64_t chunk = bytes - done < chunk_max ? bytes - done : chunk_max;
    uint64_t s = src->offset + src_offset + done, d = dst->offset + dst_offset + done;
    uint64_t s_aligned = s / p->storage_alignment * p->storage_alignment;
    uint64_t d_aligned = d / p->storage_alignment * p->storage_alignment;
    vulkan_binding b[2] = {{src->handle, s_aligned, s - s_aligned + chunk},
                           {dst->handle, d_aligned, d - d_aligned + chunk}};
    struct {
      uint32_t count, src_first, dst_first;
    } push = {(uint32_t)(chunk / 16), (uint32_t)((s - s_aligned) / 16),
              (uint32_t)((d - d_aligned) / 16)};
    uint64_t groups = (chunk / 16 + (uint64_t)WG * UNITS - 1) / ((uint64_t)WG * UNITS);
    uint32_t gx = groups < p->max_workgroup_count[0] ? (uint32_t)groups : p->max_workgroup_count[0];
    uint32_t gy = (uint32_t)((groups + gx - 1) / gx);
    status = vulkan_dispatch(queue, pipeline, b, 2, &push, sizeof push, gx, gy, 1);
    done += chunk;
  }
  return status;
}

tsr_status vulkan_buffer_copy(void *handle, void *src_handle, uint64_t src_offset, void *dst_handle,
                              uint64_t dst_offset, uint64_t bytes) {
  vulkan_queue *queue = handle;
  vulkan_buffer *src = src_handle, *dst = dst_handle;
  if (!check_range(plugin_of(queue), "copy source", src, src_offset, bytes) ||
      !check_range(plugin_of(queue), "copy destination", dst, dst_offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  /* whole 16-byte units of both bindings (wrapped memory may start anywhere) */
  if ((src->offset + src_offset) % 16 == 0 && (dst->offset + dst_offset) % 16 == 0 &&
      bytes % 16 == 0)
    return shader_copy(queue, src, src_offset, dst, dst_offset, bytes);
  return record_copy(queue, src->handle, src->offset + src_offset, dst->handle,
                     dst->offset + dst_offset, bytes);
}

vulkan_binding vulkan_queue_faults(vulkan_queue *queue) {
  queue->faults_armed = true;
  return (vulkan_binding){queue->faults->handle, queue->faults->offset, FAULT_BYTES};
}

/* Waits for the queue; a failed submission, a lost device, or a fault a
 * shader recorded (a bad cross-entropy target, attention offsets, lengths
 * or block-table entries, kv_append slots) is returned here, once: the
 * words are read, reset to TSR_PLUGIN_FAULT_NONE, and the first kind at
 * fault is reported (tsr_plugin_fault_report). */
tsr_status vulkan_queue_finish(void *handle) {
  vulkan_queue *queue = handle;
  const vulkan_plugin *plugin = plugin_of(queue);
  tsr_status status = vulkan_queue_flush(queue, true);
  if (queue->failed != TSR_OK) {
    status = queue->failed;
    queue->failed = TSR_OK;
    return tsr_plugin_fail(&plugin->host, status, "queued work failed on the device");
  }
  if (status != TSR_OK || !queue->faults_armed)
    return status;
  queue->faults_armed = false;
  int32_t words[TSR_PLUGIN_FAULT_COUNT];
  status = vulkan_buffer_read(queue, queue->faults, 0, words, sizeof words);
  if (status != TSR_OK)
    return status;
  bool any = false;
  for (int i = 0; i < TSR_PLUGIN_FAULT_COUNT; i++)
    any = any || words[i] != TSR_PLUGIN_FAULT_NONE;
  if (!any)
    return TSR_OK;
  vulkan_binding b = {queue->faults->handle, queue->faults->offset, FAULT_BYTES};
  status = vulkan_fill(queue, &b, FAULT_BYTES, (uint32_t)TSR_PLUGIN_FAULT_NONE);
  if (status == TSR_OK)
    status = vulkan_queue_flush(queue, true);
  if (status != TSR_OK)
    return status;
  return tsr_plugin_fault_report(&plugin->host, words, &queue->fault_context);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

/* An event is a timestamp in the open command buffer and the timeline value
 * that buffer will signal. It is not submitted here: a submission per event
 * left the device idle between the start event's submission and the op's,
 * and event pairs timed that idle time (host recording, submit latency)
 * with the op. */
tsr_status vulkan_event_record(void *handle, void **out) {
  vulkan_queue *queue = handle;
  vulkan_device *device = queue->device;
  vulkan_event *event = calloc(1, sizeof *event);
  if (!event) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for an event");
  }
  event->queue = queue;
  event->serial = UINT64_MAX;
  tsr_status status = prepare(queue);
  if (status == TSR_OK && queue->timestamps) {
    event->serial = queue->queries_used++;
    uint32_t query = (uint32_t)(event->serial % QUERY_COUNT);
    device->vk.vkCmdResetQueryPool(queue->open, queue->timestamps, query, 1);
    /* After the barrier prepare() recorded: every earlier command is done. */
    device->vk.vkCmdWriteTimestamp(queue->open, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                   queue->timestamps, query);
  }
  if (status != TSR_OK) {
    free(event);
    return status;
  }
  /* The open command buffer signals submitted + 1 when it is submitted. */
  event->value = queue->submitted + 1;
  status = recorded(queue);
  if (status != TSR_OK) {
    free(event);
    return status;
  }
  *out = event;
  return TSR_OK;
}

/* Submits the command buffer holding `event` if it is still open. */
static tsr_status submit_event(const vulkan_event *event) {
  if (event->value > event->queue->submitted)
    return vulkan_queue_flush(event->queue, false);
  return TSR_OK;
}

tsr_status vulkan_event_wait(void *handle) {
  vulkan_event *event = handle;
  tsr_status status = submit_event(event);
  if (status != TSR_OK)
    return status;
  return wait_value(event->queue, event->value);
}

tsr_status vulkan_event_elapsed_ms(void *start_handle, void *end_handle, double *ms) {
  vulkan_event *start = start_handle, *end = end_handle;
  vulkan_queue *queue = start->queue;
  vulkan_device *device = queue->device;
  if (start->serial == UINT64_MAX || end->serial == UINT64_MAX || queue != end->queue) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_UNSUPPORTED, "%s",
                           queue != end->queue
                               ? "events of two different queues cannot be timed against each other"
                               : "this device's compute queue has no timestamps");
  }
  uint64_t oldest = start->serial < end->serial ? start->serial : end->serial;
  if (queue->queries_used - oldest > QUERY_COUNT) {
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_INVALID_VALUE,
                           "an event is more than %d events old; its timestamp was reused",
                           QUERY_COUNT);
  }
  tsr_status status = submit_event(start);
  if (status == TSR_OK)
    status = submit_event(end);
  if (status == TSR_OK)
    status = wait_value(queue, end->value > start->value ? end->value : start->value);
  if (status != TSR_OK)
    return status;
  uint64_t ticks[2];
  VkResult result = VK_SUCCESS;
  for (int i = 0; i < 2 && result == VK_SUCCESS; i++)
    result = device->vk.vkGetQueryPoolResults(device->handle, queue->timestamps,
                                              (uint32_t)((i ? end : start)->serial % QUERY_COUNT),
                                              1, sizeof ticks[i], &ticks[i], sizeof ticks[i],
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (result != VK_SUCCESS)
    return vulkan_fail(device->plugin, result, "reading timestamps");
  uint32_t bits = device->props->timestamp_bits;
  uint64_t mask = bits >= 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  uint64_t delta = (ticks[1] - ticks[0]) & mask;
  *ms = (double)delta * (double)device->props->timestamp_period * 1e-6;
  return TSR_OK;
}

void vulkan_event_destroy(void *event) {
  free(event);
}
