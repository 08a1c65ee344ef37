/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU plugin's buffers (aligned host memory, huge pages for large ones,
 * or the application's memory wrapped in place), transfers, and the copy
 * the queue worker runs for buffer_copy. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "cpu_plugin.h"

/* ------------------------------------------------------------------------ */
/* Copies                                                                    */
/* ------------------------------------------------------------------------ */

/* Below this a copy runs on the queue's thread with memcpy; above it the
 * pool's threads take equal parts. */
enum { COPY_PARALLEL_BYTES = 1 << 20 };
/* From this size the destination would not stay in the caches anyway, so
 * non-temporal stores skip reading its lines first (read-for-ownership). */
enum { COPY_STREAMING_BYTES = 8 << 20 };

#if defined(__x86_64__)
/* Non-temporal copy of whole 64-byte lines to a 64-byte-aligned dst, as two
 * interleaved sequential streams (more reads in flight than one), with
 * software prefetch ahead of each. */
static void copy_lines_streaming(char *dst, const char *src, size_t lines) {
  size_t half = lines / 2;
  const size_t ahead = 4096;
  for (size_t i = 0; i < half; i++) {
    for (int stream = 0; stream < 2; stream++) {
      size_t offset = (i + (size_t)stream * half) * 64;
      const char *s = src + offset;
      __m128i *d = (__m128i *)(void *)(dst + offset);
      _mm_prefetch(s + ahead, _MM_HINT_T0);
      __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)s);
      __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
      __m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
      __m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
      _mm_stream_si128(d, x0);
      _mm_stream_si128(d + 1, x1);
      _mm_stream_si128(d + 2, x2);
      _mm_stream_si128(d + 3, x3);
    }
  }
  if (lines % 2)
    memcpy(dst + (lines - 1) * 64, src + (lines - 1) * 64, 64);
  _mm_sfence(); /* streaming stores are weakly ordered: finish them here */
}
#endif

typedef struct copy_job {
  char *dst;
  const char *src;
  uint64_t bytes;
  bool streaming;
} copy_job;

static void copy_part(void *context, int64_t t, int64_t parts, int worker) {
  const copy_job *job = context;
  (void)worker;
  /* Part boundaries on 4 KiB multiples of the destination. */
  uint64_t pages = (job->bytes + 4095) / 4096;
  uint64_t begin = pages * (uint64_t)t / (uint64_t)parts * 4096;
  uint64_t end = pages * (uint64_t)(t + 1) / (uint64_t)parts * 4096;
  end = end < job->bytes ? end : job->bytes;
  if (begin >= end)
    return;
  char *dst = job->dst + begin;
  const char *src = job->src + begin;
  size_t size = (size_t)(end - begin);
#if defined(__x86_64__)
  if (job->streaming) {
    size_t head = (size_t)((64 - ((uintptr_t)dst & 63)) & 63);
    head = head < size ? head : size;
    memcpy(dst, src, head);
    size_t lines = (size - head) / 64;
    copy_lines_streaming(dst + head, src + head, lines);
    size_t done = head + lines * 64;
    memcpy(dst + done, src + done, size - done);
    return;
  }
#endif
  memcpy(dst, src, size);
}

/* memmove semantics; large non-overlapping copies are split over the pool's
 * threads (one core alone cannot keep enough reads in flight to reach the
 * memory bandwidth). */
void cpu_copy_memory(cpu_pool *pool, char *dst, const char *src, uint64_t bytes) {
  bool overlap = dst < src + bytes && src < dst + bytes;
  int threads = cpu_pool_threads(pool);
  if (overlap || bytes < COPY_PARALLEL_BYTES || threads < 2) {
    memmove(dst, src, (size_t)bytes);
    return;
  }
  copy_job job = {dst, src, bytes, bytes >= COPY_STREAMING_BYTES};
  cpu_pool_run_threads(pool, threads, copy_part, &job);
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------ */

/* Buffers from this size are aligned to 2 MiB and offered transparent huge
 * pages: a streaming kernel then takes one TLB miss per 2 MiB, not per 4 KiB. */
enum { CPU_HUGE_PAGE_BYTES = 2 << 20, CPU_HUGE_BUFFER_MIN_BYTES = 8 << 20 };

tsr_status cpu_buffer_alloc(void *handle, uint64_t bytes, void **out) {
  cpu_device *device = handle;
  uint64_t alignment =
      bytes >= CPU_HUGE_BUFFER_MIN_BYTES ? CPU_HUGE_PAGE_BYTES : CPU_BUFFER_ALIGNMENT;
  uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0)
    rounded = alignment;
  cpu_buffer *buffer = malloc(sizeof *buffer);
  void *data = rounded >= bytes && (uint64_t)(size_t)rounded == rounded
                   ? aligned_alloc((size_t)alignment, (size_t)rounded)
                   : NULL;
  if (!buffer || !data) {
    free(buffer);
    free(data);
    return tsr_plugin_fail(&device->plugin->host, TSR_ERROR_OUT_OF_MEMORY,
                           "cannot allocate %llu bytes of host memory", (unsigned long long)bytes);
  }
#if defined(MADV_HUGEPAGE)
  if (alignment == CPU_HUGE_PAGE_BYTES)
    madvise(data, (size_t)rounded, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
  buffer->data = data;
  buffer->bytes = bytes;
  buffer->wrapped = false;
  *out = buffer;
  return TSR_OK;
}

/* The application's host memory used in place: ops read and write it
 * directly, transfers copy to and from it, and buffer_free forgets it. Any
 * address: byte copies need none, and ops refuse a tensor whose address is
 * not a multiple of its element size (ops.c), the only alignment the
 * kernels assume (their vector loads are unaligned ones, and streaming
 * stores align themselves). */
tsr_status cpu_buffer_wrap(void *handle, int32_t kind, void *pointer, uint64_t bytes, void **out) {
  cpu_device *device = handle;
  const tsr_plugin_host *host = &device->plugin->host;
  if (kind != TSR_EXTERNAL_HOST_POINTER)
    return tsr_plugin_fail(host, TSR_ERROR_UNSUPPORTED,
                           "buffer_wrap: kind = %d is not host memory "
                           "(TSR_EXTERNAL_HOST_POINTER = %d), the only memory the cpu plugin uses",
                           (int)kind, (int)TSR_EXTERNAL_HOST_POINTER);
  if (!pointer || !out)
    return tsr_plugin_fail(host, TSR_ERROR_NULL_ARGUMENT, "buffer_wrap: %s is NULL",
                           !pointer ? "pointer" : "out");
  if (bytes == 0 || bytes > (uint64_t)(UINTPTR_MAX - (uintptr_t)pointer))
    return tsr_plugin_fail(host, TSR_ERROR_BAD_SIZE,
                           "buffer_wrap: bytes = %llu at %p (must be 1 or more and end inside "
                           "the address space)",
                           (unsigned long long)bytes, pointer);
  cpu_buffer *buffer = malloc(sizeof *buffer);
  if (!buffer)
    return tsr_plugin_fail(host, TSR_ERROR_OUT_OF_MEMORY, "out of host memory for a buffer");
  buffer->data = pointer;
  buffer->bytes = bytes;
  buffer->wrapped = true;
  *out = buffer;
  return TSR_OK;
}

/* Every cpu buffer is host memory: its address, allocated or wrapped. */
tsr_status cpu_buffer_export(void *buffer_handle, int32_t *kind, uint64_t *address) {
  const cpu_buffer *buffer = buffer_handle;
  *kind = TSR_EXTERNAL_HOST_POINTER;
  *address = (uint64_t)(uintptr_t)buffer->data;
  return TSR_OK;
}

/* The core has waited for every queue that was given work on the buffer
 * (plugin rule: buffer_free comes after that work), so it goes at once. */
void cpu_buffer_free(void *handle, void *buffer_handle) {
  (void)handle;
  cpu_buffer *buffer = buffer_handle;
  if (!buffer)
    return;
  if (!buffer->wrapped)
    free(buffer->data);
  free(buffer);
}

void *cpu_buffer_host_pointer(void *handle, void *buffer_handle) {
  (void)handle;
  return ((cpu_buffer *)buffer_handle)->data;
}

static bool check_range(const cpu_plugin *plugin, const char *what, const cpu_buffer *buffer,
                        uint64_t offset, uint64_t bytes) {
  return tsr_plugin_range_inside(&plugin->host, what, buffer->bytes, offset, bytes);
}

/* buffer_write (host to buffer) and buffer_read: after the queue's earlier
 * work, at once. */
static tsr_status transfer(cpu_queue *queue, cpu_buffer *buffer, uint64_t offset, void *host,
                           uint64_t bytes, bool write) {
  if (!check_range(queue->device->plugin, write ? "write" : "read", buffer, offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  cpu_wait_idle(queue);
  if (bytes > 0) {
    char *data = (char *)buffer->data + offset;
    memcpy(write ? data : host, write ? host : data, (size_t)bytes);
  }
  return TSR_OK;
}

tsr_status cpu_buffer_write(void *handle, void *buffer_handle, uint64_t offset, const void *src,
                            uint64_t bytes) {
  return transfer(handle, buffer_handle, offset, (void *)src, bytes, true); /* src is only read */
}

tsr_status cpu_buffer_read(void *handle, void *buffer_handle, uint64_t offset, void *dst,
                           uint64_t bytes) {
  return transfer(handle, buffer_handle, offset, dst, bytes, false);
}

tsr_status cpu_buffer_copy(void *handle, void *src_handle, uint64_t src_offset, void *dst_handle,
                           uint64_t dst_offset, uint64_t bytes) {
  cpu_queue *queue = handle;
  cpu_plugin *plugin = queue->device->plugin;
  cpu_buffer *src = src_handle, *dst = dst_handle;
  if (!check_range(plugin, "copy source", src, src_offset, bytes) ||
      !check_range(plugin, "copy destination", dst, dst_offset, bytes))
    return TSR_ERROR_OUT_OF_BOUNDS;
  if (bytes == 0)
    return TSR_OK;
  command *c = cpu_command_new(plugin, COMMAND_COPY);
  if (!c)
    return TSR_ERROR_OUT_OF_MEMORY;
  c->copy_src = (const char *)src->data + src_offset;
  c->copy_dst = (char *)dst->data + dst_offset;
  c->copy_bytes = bytes;
  cpu_enqueue(queue, c);
  return TSR_OK;
}
