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
 * submission of their own.
 * Several devices: the barrier at each command also orders it after every
 * command submitted earlier to the device's VkQueue by any tessera queue, so
 * a queue waits for another queue's submitted event by submission order
 * alone. A gate holds the queue's later command buffers on the host (see
 * vulkan_gates) until gate_open submits them. */
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

/* A gate (queue_gate): its ticket among the queue's gates. */
struct vulkan_gate {
  vulkan_queue *queue;
  uint64_t ticket;
  vulkan_gate *next; /* in gates.early once opened ahead of an earlier gate */
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

/* Waits for the queue's timeline to reach `value`, reading no queue state
 * that its owner changes (event waits on other threads use it). */
static tsr_status wait_timeline(const vulkan_queue *queue, uint64_t value) {
  vulkan_device *device = queue->device;
  VkSemaphoreWaitInfo wait = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1,
                              .pSemaphores = &queue->timeline,
                              .pValues = &value};
  VkResult result = device->vk.vkWaitSemaphores(device->handle, &wait, UINT64_MAX);
  return result == VK_SUCCESS ? TSR_OK
                              : vulkan_fail(device->plugin, result, "waiting for queued work");
}

static tsr_status wait_value(vulkan_queue *queue, uint64_t value) {
  tsr_status status = wait_timeline(queue, value);
  if (status != TSR_OK)
    queue->failed = status;
  return status;
}

/* Hands one command buffer (none: a batch that only signals) to the
 * device's VkQueue, signalling `value` on the queue's timeline when done. */
static VkResult submit_batch(vulkan_queue *queue, VkCommandBuffer command, uint64_t value) {
  vulkan_device *device = queue->device;
  VkTimelineSemaphoreSubmitInfo timeline = {.sType =
                                                VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                            .signalSemaphoreValueCount = 1,
                                            .pSignalSemaphoreValues = &value};
  VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                         .pNext = &timeline,
                         .commandBufferCount = command ? 1 : 0,
                         .pCommandBuffers = command ? &command : NULL,
                         .signalSemaphoreCount = 1,
                         .pSignalSemaphores = &queue->timeline};
  pthread_mutex_lock(&device->queue_lock);
  VkResult result = device->vk.vkQueueSubmit(device->queue, 1, &submit, VK_NULL_HANDLE);
  pthread_mutex_unlock(&device->queue_lock);
  return result;
}

/* Submits the held command buffers that no closed gate holds any more, in
 * order; the caller holds gates.lock. A failed submission still signals its
 * value (an empty batch), so that no wait hangs on it, and is reported by
 * queue_finish. */
static void release_held(vulkan_queue *queue) {
  vulkan_gates *g = &queue->gates;
  const vulkan_plugin *plugin = queue->device->plugin;
  uint32_t n = 0;
  for (; n < g->held_count && g->held[n].gates_before <= g->released; n++) {
    VkResult result = submit_batch(queue, g->held[n].command, g->held[n].value);
    if (result != VK_SUCCESS) {
      if (g->failed == TSR_OK)
        g->failed = result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY
                        ? TSR_ERROR_OUT_OF_MEMORY
                        : TSR_ERROR_BACKEND;
      tsr_plugin_log(&plugin->host, TSR_LOG_ERROR,
                     "submitting work a gate released: vkQueueSubmit: %s",
                     vulkan_result_name(result));
      result = submit_batch(queue, VK_NULL_HANDLE, g->held[n].value);
      if (result != VK_SUCCESS)
        tsr_plugin_log(&plugin->host, TSR_LOG_ERROR,
                       "signalling past work that failed to submit: vkQueueSubmit: %s",
                       vulkan_result_name(result));
    }
    g->live = g->held[n].value;
  }
  if (n > 0) {
    g->held_count -= n;
    memmove(g->held, g->held + n, g->held_count * sizeof *g->held);
  }
}

/* Submits an ended command buffer, or holds it while a gate of the queue is
 * closed (then submitted by gate_open). `what` names what failed. */
static VkResult submit_or_hold(vulkan_queue *queue, VkCommandBuffer command, uint64_t value,
                               const char **what) {
  vulkan_gates *g = &queue->gates;
  VkResult result = VK_SUCCESS;
  pthread_mutex_lock(&g->lock);
  if (g->held_count == 0 && g->released == g->issued) {
    *what = "vkQueueSubmit";
    result = submit_batch(queue, command, value);
    if (result == VK_SUCCESS)
      g->live = value;
  } else {
    *what = "holding work behind a gate";
    if (g->held_count == g->held_capacity) {
      uint32_t capacity = g->held_capacity ? g->held_capacity * 2 : 16;
      vulkan_held *grown = realloc(g->held, capacity * sizeof *grown);
      if (grown) {
        g->held = grown;
        g->held_capacity = capacity;
      }
    }
    if (g->held_count < g->held_capacity)
      g->held[g->held_count++] = (vulkan_held){command, value, g->issued};
    else
      result = VK_ERROR_OUT_OF_HOST_MEMORY;
  }
  pthread_mutex_unlock(&g->lock);
  return result;
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
    const char *what = "vkEndCommandBuffer";
    if (result == VK_SUCCESS)
      result = submit_or_hold(queue, command, value, &what);
    if (result != VK_SUCCESS) {
      device->vk.vkFreeCommandBuffers(device->handle, queue->pool, 1, &command);
      queue->failed = vulkan_fail(device->plugin, result, what);
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
  while (queue->gates.early) {
    vulkan_gate *next = queue->gates.early->next;
    free(queue->gates.early);
    queue->gates.early = next;
  }
  free(queue->gates.held);
  pthread_mutex_destroy(&queue->gates.lock);
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
  queue->gates.failed = TSR_OK;
  pthread_mutex_init(&queue->gates.lock, NULL);
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
  /* The core opens every gate first; one left closed would make the waits
   * below hang, so its work is released rather than kept. */
  pthread_mutex_lock(&queue->gates.lock);
  if (queue->gates.released < queue->gates.issued) {
    tsr_plugin_log(&device->plugin->host, TSR_LOG_WARN,
                   "a queue destroyed with %llu gates closed: their work runs now",
                   (unsigned long long)(queue->gates.issued - queue->gates.released));
    queue->gates.released = queue->gates.issued;
    release_held(queue);
  }
  pthread_mutex_unlock(&queue->gates.lock);
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
  if (buffer->mapped && (queue->device->host_cached || buffer->host)) {
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
  pthread_mutex_lock(&queue->gates.lock);
  if (queue->gates.failed != TSR_OK && queue->failed == TSR_OK)
    queue->failed = queue->gates.failed;
  queue->gates.failed = TSR_OK;
  pthread_mutex_unlock(&queue->gates.lock);
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

/* Submits the command buffer holding `event` if it is still open (or
 * holds it behind a closed gate). Fails where that buffer was lost to a
 * failed submission: nothing would ever signal the event's value. */
static tsr_status submit_event(const vulkan_event *event) {
  vulkan_queue *queue = event->queue;
  if (event->value > queue->submitted) {
    tsr_status status = vulkan_queue_flush(queue, false);
    if (status != TSR_OK)
      return status;
  }
  if (event->value > queue->submitted)
    return tsr_plugin_fail(&plugin_of(queue)->host, TSR_ERROR_BACKEND,
                           "the event's work was never submitted (an earlier submission on its "
                           "queue failed)");
  return TSR_OK;
}

tsr_status vulkan_event_flush(void *handle) {
  vulkan_event *event = handle;
  tsr_status status = submit_event(event);
  if (status == TSR_OK)
    event->flushed = true;
  return status;
}

tsr_status vulkan_event_wait(void *handle) {
  vulkan_event *event = handle;
  if (event->flushed) /* perhaps on another thread than the queue's owner */
    return wait_timeline(event->queue, event->value);
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

/* ------------------------------------------------------------------------ */
/* Several devices                                                           */
/* ------------------------------------------------------------------------ */

/* An event of this VkDevice that its queue has handed to the VkQueue is
 * ordered before this queue's later work by the barrier each command starts
 * with (it covers everything submitted earlier to that VkQueue): nothing is
 * queued. One still held behind a closed gate cannot be waited for in the
 * VkQueue without stalling every queue of the device (and the gate's
 * opener may need one of them), nor an event of another VkDevice at all:
 * TSR_ERROR_UNSUPPORTED, and the core waits on the host. */
tsr_status vulkan_queue_wait_event(void *handle, void *event_handle) {
  vulkan_queue *queue = handle;
  const vulkan_event *event = event_handle;
  vulkan_queue *source = event->queue;
  if (source == queue)
    return TSR_OK; /* a queue runs in order */
  if (source->device->handle != queue->device->handle)
    return TSR_ERROR_UNSUPPORTED;
  if (!event->flushed)
    return tsr_plugin_fail(&plugin_of(queue)->host, TSR_ERROR_INVALID_VALUE,
                           "queue_wait_event: event_flush did not run on the event");
  /* Passed already: nothing to wait for. Otherwise the core waits on the
   * host and gates this queue: the device-side barriers would order this
   * queue's later GPU work, but not its host-side reads of mapped memory,
   * which wait only for this queue's own timeline. */
  uint64_t reached = 0;
  VkResult result = source->device->vk.vkGetSemaphoreCounterValue(source->device->handle,
                                                                  source->timeline, &reached);
  return result == VK_SUCCESS && reached >= event->value ? TSR_OK : TSR_ERROR_UNSUPPORTED;
}

/* The open command buffer goes first (it holds the work before the gate);
 * every buffer ended after this call waits in gates.held until this gate
 * and all earlier ones are open. */
tsr_status vulkan_queue_gate(void *handle, void **out) {
  vulkan_queue *queue = handle;
  const tsr_plugin_host *host = &plugin_of(queue)->host;
  if (queue->failed != TSR_OK)
    return tsr_plugin_fail(host, queue->failed, "an earlier submission on this queue failed");
  vulkan_gate *gate = calloc(1, sizeof *gate);
  if (!gate)
    return tsr_plugin_fail(host, TSR_ERROR_OUT_OF_MEMORY, "out of host memory for a gate");
  tsr_status status = vulkan_queue_flush(queue, false);
  if (status != TSR_OK) {
    free(gate);
    return status;
  }
  gate->queue = queue;
  pthread_mutex_lock(&queue->gates.lock);
  gate->ticket = ++queue->gates.issued;
  pthread_mutex_unlock(&queue->gates.lock);
  /* A held batch of the gate's own takes the next timeline value, so that
   * whatever waits for this queue's timeline (finish, event waits, reads and
   * writes of mapped memory that record no command) waits for the gate. */
  if (prepare(queue) == TSR_OK)
    vulkan_queue_flush(queue, false); /* a failure stays in queue->failed for finish */
  *out = gate;                        /* issued: the core opens it whatever happened above */
  return TSR_OK;
}

/* Raises `released` only over a run of open tickets, then submits what no
 * closed gate holds any more. The gate is freed here or, when opened ahead
 * of an earlier one, once that one opens. */
void vulkan_gate_open(void *handle) {
  vulkan_gate *gate = handle;
  if (!gate)
    return;
  vulkan_queue *queue = gate->queue;
  vulkan_gates *g = &queue->gates;
  pthread_mutex_lock(&g->lock);
  vulkan_gate **link = &g->early;
  while (*link && (*link)->ticket < gate->ticket)
    link = &(*link)->next;
  gate->next = *link;
  *link = gate;
  while (g->early && g->early->ticket == g->released + 1) {
    vulkan_gate *opened = g->early;
    g->early = opened->next;
    g->released++;
    free(opened);
  }
  release_held(queue);
  pthread_mutex_unlock(&g->lock);
}
