/* SPDX-License-Identifier: Apache-2.0 */
/* Queues, copies, events and launches: one in-order cl_command_queue with
 * profiling per tessera queue. Enqueue errors are returned by the call that
 * hit them; errors the device reports later, and the faults kernels find in
 * device-resident indices, come back from queue_finish. */
#include <stdlib.h>
#include <string.h>

#include "kernels/opencl_types.h"

#include "opencl_internal.h"

_Static_assert(TSR_CL_FAULT_COUNT == TSR_PLUGIN_FAULT_COUNT &&
                   TSR_CL_FAULT_NONE == TSR_PLUGIN_FAULT_NONE &&
                   TSR_CL_FAULT_CE_TARGET == TSR_PLUGIN_FAULT_CE_TARGET &&
                   TSR_CL_FAULT_CU_SEQLENS_Q == TSR_PLUGIN_FAULT_CU_SEQLENS_Q &&
                   TSR_CL_FAULT_CU_SEQLENS_KV == TSR_PLUGIN_FAULT_CU_SEQLENS_KV &&
                   TSR_CL_FAULT_SEQLENS_KV == TSR_PLUGIN_FAULT_SEQLENS_KV &&
                   TSR_CL_FAULT_BLOCK_TABLE == TSR_PLUGIN_FAULT_BLOCK_TABLE &&
                   TSR_CL_FAULT_MAX_SEQLEN_Q == TSR_PLUGIN_FAULT_MAX_SEQLEN_Q &&
                   TSR_CL_FAULT_MAX_SEQLEN_KV == TSR_PLUGIN_FAULT_MAX_SEQLEN_KV &&
                   TSR_CL_FAULT_KV_SLOT == TSR_PLUGIN_FAULT_KV_SLOT,
               "the kernels' fault kinds are plugin.h's");

/* The queue's status buffer: the fault words, then one word events fill. */
enum {
  STATUS_FAULT_BYTES = TSR_PLUGIN_FAULT_COUNT * 4,
  STATUS_EVENT_OFFSET = STATUS_FAULT_BYTES,
  STATUS_BYTES = STATUS_FAULT_BYTES + 8
};

static const opencl_plugin *plugin_of(const opencl_queue *queue) {
  return queue->device->plugin;
}

static const opencl_api *api_of(const opencl_queue *queue) {
  return &queue->device->plugin->cl;
}

/* Every fault word back to TSR_PLUGIN_FAULT_NONE (blocking). */
static cl_int faults_reset(const opencl_queue *queue) {
  int32_t none[TSR_PLUGIN_FAULT_COUNT];
  tsr_plugin_faults_clear(none);
  return api_of(queue)->clEnqueueWriteBuffer(queue->handle, queue->status, CL_TRUE, 0, sizeof none,
                                             none, 0, NULL, NULL);
}

tsr_status opencl_queue_create(void *handle, void **out) {
  opencl_device *device = handle;
  opencl_plugin *plugin = device->plugin;
  opencl_queue *queue = calloc(1, sizeof *queue);
  if (!queue)
    return tsr_plugin_fail(&plugin->host, TSR_ERROR_OUT_OF_MEMORY, "queue_create: out of memory");
  queue->device = device;
  cl_int error = CL_SUCCESS;
  queue->handle = plugin->cl.clCreateCommandQueue(device->context, device->props->id,
                                                  CL_QUEUE_PROFILING_ENABLE, &error);
  if (!queue->handle || error != CL_SUCCESS) {
    free(queue);
    return opencl_fail(plugin, error, "clCreateCommandQueue");
  }
  /* Events time a 4-byte fill of the word after the faults: a real command,
   * which every implementation profiles (not every one profiles markers). */
  queue->status =
      plugin->cl.clCreateBuffer(device->context, CL_MEM_READ_WRITE, STATUS_BYTES, NULL, &error);
  if (!queue->status || error != CL_SUCCESS) {
    plugin->cl.clReleaseCommandQueue(queue->handle);
    free(queue);
    return opencl_fail(plugin, error, "clCreateBuffer (queue status)");
  }
  error = faults_reset(queue);
  if (error != CL_SUCCESS) {
    plugin->cl.clReleaseMemObject(queue->status);
    plugin->cl.clReleaseCommandQueue(queue->handle);
    free(queue);
    return opencl_fail(plugin, error, "clEnqueueWriteBuffer (queue status)");
  }
  *out = queue;
  return TSR_OK;
}

void opencl_queue_destroy(void *handle) {
  opencl_queue *queue = handle;
  if (!queue)
    return;
  const opencl_api *cl = api_of(queue);
  cl->clFinish(queue->handle);
  if (queue->scratch)
    cl->clReleaseMemObject(queue->scratch);
  cl->clReleaseMemObject(queue->status);
  cl->clReleaseCommandQueue(queue->handle);
  free(queue);
}

/* Waits for the queue; a device error, or a fault a kernel recorded (a bad
 * cross-entropy target, attention indices, a kv_append slot), is returned
 * here, once: the words are read only when an op that can fault was queued
 * since the last finish, and reset after a fault. */
tsr_status opencl_queue_finish(void *handle) {
  opencl_queue *queue = handle;
  const opencl_plugin *plugin = plugin_of(queue);
  cl_int error = api_of(queue)->clFinish(queue->handle);
  if (queue->failed != TSR_OK) {
    tsr_status status = queue->failed;
    queue->failed = TSR_OK;
    return tsr_plugin_fail(&plugin->host, status, "queued work failed on the device");
  }
  if (error != CL_SUCCESS)
    return opencl_fail(plugin, error, "clFinish");
  if (!queue->status_armed)
    return TSR_OK;
  queue->status_armed = false;
  int32_t words[TSR_PLUGIN_FAULT_COUNT];
  error = api_of(queue)->clEnqueueReadBuffer(queue->handle, queue->status, CL_TRUE, 0, sizeof words,
                                             words, 0, NULL, NULL);
  if (error != CL_SUCCESS)
    return opencl_fail(plugin, error, "clEnqueueReadBuffer (queue status)");
  bool any = false;
  for (int i = 0; i < TSR_PLUGIN_FAULT_COUNT; i++)
    any = any || words[i] != TSR_PLUGIN_FAULT_NONE;
  if (!any)
    return TSR_OK;
  error = faults_reset(queue);
  if (error != CL_SUCCESS)
    return opencl_fail(plugin, error, "clEnqueueWriteBuffer (queue status)");
  return tsr_plugin_fault_report(&plugin->host, words, &queue->fault_context);
}

tsr_status opencl_queue_faults(opencl_queue *queue, cl_mem *out) {
  queue->status_armed = true;
  *out = queue->status;
  return TSR_OK;
}

tsr_status opencl_queue_status(opencl_queue *queue, int64_t vocab, int64_t ignore_index,
                               cl_mem *out) {
  queue->fault_context.vocab = vocab;
  queue->fault_context.ignore_index = ignore_index;
  return opencl_queue_faults(queue, out);
}

/* ------------------------------------------------------------------------ */
/* Reads, writes, copies, fills                                              */
/* ------------------------------------------------------------------------ */

tsr_status opencl_buffer_write(void *handle, void *b, uint64_t offset, const void *src,
                               uint64_t bytes) {
  opencl_queue *queue = handle;
  const opencl_buffer *buffer = b;
  if (bytes == 0)
    return TSR_OK;
  cl_int error = api_of(queue)->clEnqueueWriteBuffer(queue->handle, buffer->mem, CL_TRUE, offset,
                                                     bytes, src, 0, NULL, NULL);
  return error == CL_SUCCESS ? TSR_OK
                             : opencl_fail(plugin_of(queue), error, "clEnqueueWriteBuffer");
}

tsr_status opencl_buffer_read(void *handle, void *b, uint64_t offset, void *dst, uint64_t bytes) {
  opencl_queue *queue = handle;
  const opencl_buffer *buffer = b;
  if (bytes == 0)
    return TSR_OK;
  cl_int error = api_of(queue)->clEnqueueReadBuffer(queue->handle, buffer->mem, CL_TRUE, offset,
                                                    bytes, dst, 0, NULL, NULL);
  return error == CL_SUCCESS ? TSR_OK : opencl_fail(plugin_of(queue), error, "clEnqueueReadBuffer");
}

tsr_status opencl_buffer_copy(void *handle, void *src, uint64_t src_offset, void *dst,
                              uint64_t dst_offset, uint64_t bytes) {
  opencl_queue *queue = handle;
  if (bytes == 0)
    return TSR_OK;
  /* The core refuses overlapping ranges of one buffer (TSR_ERROR_OVERLAP),
   * as clEnqueueCopyBuffer does. */
  const opencl_buffer *from = src, *to = dst;
  cl_int error = api_of(queue)->clEnqueueCopyBuffer(queue->handle, from->mem, to->mem, src_offset,
                                                    dst_offset, bytes, 0, NULL, NULL);
  return error == CL_SUCCESS ? TSR_OK : opencl_fail(plugin_of(queue), error, "clEnqueueCopyBuffer");
}

tsr_status opencl_fill(opencl_queue *queue, cl_mem mem, uint64_t offset, uint64_t bytes,
                       uint32_t value) {
  if (bytes == 0)
    return TSR_OK;
  cl_uint pattern = value;
  cl_int error = api_of(queue)->clEnqueueFillBuffer(queue->handle, mem, &pattern, sizeof pattern,
                                                    offset, bytes, 0, NULL, NULL);
  return error == CL_SUCCESS ? TSR_OK : opencl_fail(plugin_of(queue), error, "clEnqueueFillBuffer");
}

tsr_status opencl_queue_scratch(opencl_queue *queue, uint64_t bytes, cl_mem *out) {
  if (bytes == 0)
    bytes = 4;
  if (!queue->scratch || queue->scratch_bytes < bytes) {
    /* Grow by half again, so a run of growing ops does not reallocate at
     * each; the old buffer is released at once (OpenCL keeps it alive until
     * the commands using it finish). */
    uint64_t grown = bytes + bytes / 2;
    if (grown > queue->device->props->max_allocation)
      grown = bytes;
    const opencl_api *cl = api_of(queue);
    cl_int error = CL_SUCCESS;
    cl_mem mem = cl->clCreateBuffer(queue->device->context, CL_MEM_READ_WRITE, grown, NULL, &error);
    if (!mem || error != CL_SUCCESS)
      return opencl_fail(plugin_of(queue), error == CL_SUCCESS ? CL_OUT_OF_RESOURCES : error,
                         "clCreateBuffer (scratch)");
    if (queue->scratch)
      cl->clReleaseMemObject(queue->scratch);
    queue->scratch = mem;
    queue->scratch_bytes = grown;
  }
  *out = queue->scratch;
  return TSR_OK;
}

tsr_status opencl_queue_upload(opencl_queue *queue, const void *data, uint64_t bytes, cl_mem *out) {
  cl_int error = CL_SUCCESS;
  *out =
      api_of(queue)->clCreateBuffer(queue->device->context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                    bytes ? bytes : 4, (void *)data, &error);
  if (!*out || error != CL_SUCCESS)
    return opencl_fail(plugin_of(queue), error == CL_SUCCESS ? CL_OUT_OF_RESOURCES : error,
                       "clCreateBuffer (upload)");
  return TSR_OK;
}

/* ------------------------------------------------------------------------ */
/* Launches                                                                  */
/* ------------------------------------------------------------------------ */

tsr_status opencl_launch(opencl_queue *queue, const opencl_kernel *kernel, const opencl_arg *args,
                         uint32_t n, uint32_t dims, const size_t global[3], const size_t local[3]) {
  const opencl_api *cl = api_of(queue);
  if (local) {
    size_t items = 1;
    for (uint32_t d = 0; d < dims; d++)
      items *= local[d];
    if (items > kernel->max_work_group)
      return tsr_plugin_fail(&plugin_of(queue)->host, TSR_ERROR_UNSUPPORTED,
                             "a work-group of %zu items exceeds the kernel's limit of %zu on %s",
                             items, kernel->max_work_group, queue->device->props->name);
  }
  for (uint32_t d = 0; d < dims; d++)
    if (global[d] == 0)
      return TSR_OK;
  opencl_kernel *k = (opencl_kernel *)kernel; /* the lock only: arguments live in the kernel */
  pthread_mutex_lock(&k->lock);
  cl_int error = CL_SUCCESS;
  for (uint32_t i = 0; i < n && error == CL_SUCCESS; i++)
    error = cl->clSetKernelArg(k->handle, i, args[i].size, args[i].value);
  const char *what = "clSetKernelArg";
  if (error == CL_SUCCESS) {
    what = "clEnqueueNDRangeKernel";
    error = cl->clEnqueueNDRangeKernel(queue->handle, k->handle, dims, NULL, global, local, 0, NULL,
                                       NULL);
  }
  pthread_mutex_unlock(&k->lock);
  return error == CL_SUCCESS ? TSR_OK : opencl_fail(plugin_of(queue), error, what);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

tsr_status opencl_event_record(void *handle, void **out) {
  opencl_queue *queue = handle;
  opencl_event *event = calloc(1, sizeof *event);
  if (!event)
    return tsr_plugin_fail(&plugin_of(queue)->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for an event");
  cl_uint pattern = 0;
  cl_int error =
      api_of(queue)->clEnqueueFillBuffer(queue->handle, queue->status, &pattern, sizeof pattern,
                                         STATUS_EVENT_OFFSET, 4, 0, NULL, &event->handle);
  if (error != CL_SUCCESS) {
    free(event);
    return opencl_fail(plugin_of(queue), error, "clEnqueueFillBuffer (event)");
  }
  /* Submitted now, so a wait on it never waits for a flush that nobody does. */
  api_of(queue)->clFlush(queue->handle);
  event->queue = queue;
  *out = event;
  return TSR_OK;
}

tsr_status opencl_event_wait(void *handle) {
  opencl_event *event = handle;
  cl_int error = api_of(event->queue)->clWaitForEvents(1, &event->handle);
  return error == CL_SUCCESS ? TSR_OK
                             : opencl_fail(plugin_of(event->queue), error, "clWaitForEvents");
}

tsr_status opencl_event_elapsed_ms(void *start_handle, void *end_handle, double *ms) {
  opencl_event *start = start_handle, *end = end_handle;
  const opencl_api *cl = api_of(start->queue);
  cl_event both[2] = {start->handle, end->handle};
  cl_int error = cl->clWaitForEvents(2, both);
  cl_ulong t0 = 0, t1 = 0;
  if (error == CL_SUCCESS)
    error =
        cl->clGetEventProfilingInfo(start->handle, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL);
  if (error == CL_SUCCESS)
    error =
        cl->clGetEventProfilingInfo(end->handle, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
  if (error != CL_SUCCESS)
    return opencl_fail(plugin_of(start->queue), error, "clGetEventProfilingInfo");
  *ms = t1 >= t0 ? (double)(t1 - t0) * 1e-6 : 0.0;
  return TSR_OK;
}

void opencl_event_destroy(void *handle) {
  opencl_event *event = handle;
  if (!event)
    return;
  api_of(event->queue)->clReleaseEvent(event->handle);
  free(event);
}

/* ------------------------------------------------------------------------ */
/* Several devices                                                           */
/* ------------------------------------------------------------------------ */

/* A gate: a user event a barrier on the queue waits for. */
typedef struct opencl_gate {
  const opencl_plugin *plugin;
  cl_event user;
} opencl_gate;

/* Each device has a context of its own, and a wait list takes only events
 * of the queue's context: another device's event is
 * TSR_ERROR_UNSUPPORTED, and the core waits on the host. The event was
 * flushed when recorded. */
tsr_status opencl_queue_wait_event(void *handle, void *event_handle) {
  opencl_queue *queue = handle;
  const opencl_event *event = event_handle;
  if (event->queue == queue)
    return TSR_OK; /* an in-order queue */
  if (event->queue->device->context != queue->device->context)
    return TSR_ERROR_UNSUPPORTED;
  cl_int error =
      api_of(queue)->clEnqueueBarrierWithWaitList(queue->handle, 1, &event->handle, NULL);
  return error == CL_SUCCESS
             ? TSR_OK
             : opencl_fail(plugin_of(queue), error, "clEnqueueBarrierWithWaitList (event wait)");
}

/* Later commands of the in-order queue wait behind the barrier, so gates
 * opened out of order release nothing queued after a closed one. */
tsr_status opencl_queue_gate(void *handle, void **out) {
  opencl_queue *queue = handle;
  const opencl_api *cl = api_of(queue);
  opencl_gate *gate = calloc(1, sizeof *gate);
  if (!gate)
    return tsr_plugin_fail(&plugin_of(queue)->host, TSR_ERROR_OUT_OF_MEMORY,
                           "out of host memory for a gate");
  gate->plugin = plugin_of(queue);
  cl_int error = CL_SUCCESS;
  gate->user = cl->clCreateUserEvent(queue->device->context, &error);
  if (!gate->user || error != CL_SUCCESS) {
    free(gate);
    return opencl_fail(plugin_of(queue), error == CL_SUCCESS ? CL_OUT_OF_RESOURCES : error,
                       "clCreateUserEvent (gate)");
  }
  error = cl->clEnqueueBarrierWithWaitList(queue->handle, 1, &gate->user, NULL);
  if (error != CL_SUCCESS) {
    cl->clReleaseEvent(gate->user);
    free(gate);
    return opencl_fail(plugin_of(queue), error, "clEnqueueBarrierWithWaitList (gate)");
  }
  *out = gate;
  return TSR_OK;
}

void opencl_gate_open(void *handle) {
  opencl_gate *gate = handle;
  if (!gate)
    return;
  const opencl_api *cl = &gate->plugin->cl;
  cl_int error = cl->clSetUserEventStatus(gate->user, CL_COMPLETE);
  if (error != CL_SUCCESS)
    tsr_plugin_log(&gate->plugin->host, TSR_LOG_ERROR, "opening a gate: clSetUserEventStatus: %s",
                   opencl_error_name(error));
  cl->clReleaseEvent(gate->user);
  free(gate);
}
