/* SPDX-License-Identifier: Apache-2.0 */
/* The first use of tsr__library_dir from many threads at once, built with
 * ThreadSanitizer together with the loader's sources: an unsynchronised
 * one-time initialisation is a data race TSan reports (the test then exits
 * with TSAN_OPTIONS' exitcode), and every thread must see the same directory. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

enum { THREADS = 8 };

static pthread_barrier_t start;
static const char *seen[THREADS];

/* loader.c's host services reach the tuning database; not linked here. */
bool tsr__tuning_lookup(const char *device_key, const char *op, const char *dtype,
                        const char *shape_class, char *variant, size_t variant_capacity,
                        char *source, size_t source_capacity) {
  (void)device_key;
  (void)op;
  (void)dtype;
  (void)shape_class;
  (void)variant;
  (void)variant_capacity;
  (void)source;
  (void)source_capacity;
  return false;
}

static void *first_use(void *arg) {
  int index = (int)(intptr_t)arg;
  pthread_barrier_wait(&start);
  seen[index] = tsr__library_dir();
  return NULL;
}

int main(void) {
  pthread_t threads[THREADS];
  pthread_barrier_init(&start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++)
    pthread_create(&threads[i], NULL, first_use, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&start);
  int failures = 0;
  for (int i = 0; i < THREADS; i++) {
    if (seen[i] == NULL || seen[i][0] != '/' || strcmp(seen[i], seen[0]) != 0) {
      fprintf(stderr, "FAIL: thread %d saw \"%s\", thread 0 \"%s\"\n", i, seen[i] ? seen[i] : "",
              seen[0] ? seen[0] : "");
      failures++;
    }
  }
  printf("library dir: %s\n%s\n", seen[0] ? seen[0] : "", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
