/* SPDX-License-Identifier: Apache-2.0 */
/* The driver table's stream and event entries over the HIP runtime: one
 * non-blocking stream per queue (it does not synchronise with the null
 * stream), events with timing. */
#include "hip_internal.h"

static int stream_create(void *context, void **stream) {
  const hip_api *api = context;
  hipStream_t created = NULL;
  hipError_t result = api->hipStreamCreateWithFlags(&created, hipStreamNonBlocking);
  *stream = created;
  return result;
}

static int stream_destroy(void *context, void *stream) {
  const hip_api *api = context;
  return api->hipStreamDestroy(stream);
}

static int stream_sync(void *context, void *stream) {
  const hip_api *api = context;
  return api->hipStreamSynchronize(stream);
}

static int event_create(void *context, void **event) {
  const hip_api *api = context;
  hipEvent_t created = NULL;
  hipError_t result = api->hipEventCreateWithFlags(&created, hipEventDefault);
  *event = created;
  return result;
}

static int event_destroy(void *context, void *event) {
  const hip_api *api = context;
  return api->hipEventDestroy(event);
}

static int event_record(void *context, void *event, void *stream) {
  const hip_api *api = context;
  return api->hipEventRecord(event, stream);
}

static int event_sync(void *context, void *event) {
  const hip_api *api = context;
  return api->hipEventSynchronize(event);
}

static int event_elapsed(void *context, void *start, void *end, float *ms) {
  const hip_api *api = context;
  return api->hipEventElapsedTime(ms, start, end);
}

/* The device an application's stream belongs to, as device_enter's
 * context (ordinal + 1); the null stream is the current device's. */
static int stream_owner(void *context, void *stream, void **device_context) {
  const hip_api *api = context;
  hipDevice_t device = -1;
  hipError_t result = api->hipStreamGetDevice(stream, &device);
  *device_context = (void *)(intptr_t)(device + 1);
  return result;
}

void hip_queue_entries(gpu_driver *driver) {
  driver->stream_create = stream_create;
  driver->stream_destroy = stream_destroy;
  driver->stream_sync = stream_sync;
  driver->event_create = event_create;
  driver->event_destroy = event_destroy;
  driver->event_record = event_record;
  driver->event_sync = event_sync;
  driver->event_elapsed = event_elapsed;
  const hip_api *api = driver->context;
  driver->stream_owner = api->hipStreamGetDevice ? stream_owner : NULL;
}
