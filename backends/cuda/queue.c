/* SPDX-License-Identifier: Apache-2.0 */
/* Streams and events over libcuda: a queue is a non-blocking stream (or the
 * application's, whose context cuStreamGetCtx tells), an event a timing
 * CUDA event. Queues, their status word and finish are the
 * GPU layer's (backends/gpu/queue.c). */
#include "cuda_internal.h"

static int stream_create(void *context, void **stream) {
  const cuda_api *api = context;
  CUstream created = NULL;
  CUresult result = api->cuStreamCreate(&created, CU_STREAM_NON_BLOCKING);
  *stream = created;
  return result;
}

static int stream_destroy(void *context, void *stream) {
  const cuda_api *api = context;
  return api->cuStreamDestroy(stream);
}

static int stream_sync(void *context, void *stream) {
  const cuda_api *api = context;
  return api->cuStreamSynchronize(stream);
}

static int event_create(void *context, void **event) {
  const cuda_api *api = context;
  CUevent created = NULL;
  CUresult result = api->cuEventCreate(&created, CU_EVENT_DEFAULT);
  *event = created;
  return result;
}

static int event_destroy(void *context, void *event) {
  const cuda_api *api = context;
  return api->cuEventDestroy(event);
}

static int event_record(void *context, void *event, void *stream) {
  const cuda_api *api = context;
  return api->cuEventRecord(event, stream);
}

static int event_sync(void *context, void *event) {
  const cuda_api *api = context;
  return api->cuEventSynchronize(event);
}

static int event_elapsed(void *context, void *start, void *end, float *ms) {
  const cuda_api *api = context;
  return api->cuEventElapsedTime(ms, start, end);
}

/* The context an application's stream belongs to (queue_wrap). The default
 * stream (0) is the current context's, the device's after device_enter. */
static int stream_owner(void *context, void *stream, void **device_context) {
  const cuda_api *api = context;
  CUcontext owner = NULL;
  CUresult result = api->cuStreamGetCtx(stream, &owner);
  *device_context = owner;
  return result;
}

void cuda_queue_entries(gpu_driver *driver) {
  driver->stream_create = stream_create;
  driver->stream_destroy = stream_destroy;
  driver->stream_sync = stream_sync;
  driver->event_create = event_create;
  driver->event_destroy = event_destroy;
  driver->event_record = event_record;
  driver->event_sync = event_sync;
  driver->event_elapsed = event_elapsed;
  const cuda_api *api = driver->context;
  driver->stream_owner = api->cuStreamGetCtx ? stream_owner : NULL;
}
