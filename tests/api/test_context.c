/* SPDX-License-Identifier: Apache-2.0 */
/* Context, plugin reports, devices and selectors, names, tensor helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_test.h"

static void test_context_create(void) {
  tsr_context *context = NULL;
  CHECK_STATUS(tsr_context_create(NULL, NULL), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_context_create", "out");

  tsr_context_options options = TSR_CONTEXT_OPTIONS_INIT;
  options.struct_size = 0;
  CHECK_STATUS(tsr_context_create(&options, &context), TSR_ERROR_STRUCT_SIZE);
  CHECK_ERROR("tsr_context_create", "struct_size");
  CHECK(context == NULL);
  options.struct_size = sizeof options - 1;
  CHECK_STATUS(tsr_context_create(&options, &context), TSR_ERROR_STRUCT_SIZE);
  CHECK(context == NULL);

  options = (tsr_context_options)TSR_CONTEXT_OPTIONS_INIT;
  CHECK_STATUS(tsr_context_create(&options, &context), TSR_OK);
  CHECK(context != NULL);
  tsr_context_destroy(context);
  context = NULL;

  CHECK_STATUS(tsr_context_create(NULL, &context), TSR_OK);
  CHECK(context != NULL);
  CHECK_STR(tsr_last_error(), "");
  tsr_context_destroy(context);
  tsr_context_destroy(NULL); /* allowed */

  /* Dropping every backend still gives a valid context, with no device
   * (lavapipe and PoCL make the Vulkan and OpenCL plugins CPU-type devices
   * too). */
  options = (tsr_context_options)TSR_CONTEXT_OPTIONS_INIT;
  options.disable_backends = "cpu,cuda,hip,opencl,vulkan";
  context = NULL;
  CHECK_STATUS(tsr_context_create(&options, &context), TSR_OK);
  if (context) {
    uint32_t count = 99;
    CHECK_STATUS(tsr_device_count(context, &count), TSR_OK);
    CHECK_INT(count, 0);
    tsr_device *device = NULL;
    CHECK_STATUS(tsr_device_open(context, "best", &device), TSR_ERROR_NOT_FOUND);
    CHECK_ERROR("tsr_device_open", "best");
    CHECK_STATUS(tsr_device_open(context, "cpu", &device), TSR_ERROR_NOT_FOUND);
    uint32_t plugins = 0;
    CHECK_STATUS(tsr_plugin_count(context, &plugins), TSR_OK);
    bool cpu_filtered = false;
    for (uint32_t i = 0; i < plugins; i++) {
      tsr_plugin_report report;
      memset(&report, 0, sizeof report);
      report.struct_size = sizeof report;
      CHECK_STATUS(tsr_plugin_get_report(context, i, &report), TSR_OK);
      if (strcmp(report.name, "cpu") == 0)
        cpu_filtered = report.state == TSR_PLUGIN_FILTERED;
    }
    CHECK(cpu_filtered);
    tsr_context_destroy(context);
  }

  /* Keeping only the CPU backend keeps its device. */
  options = (tsr_context_options)TSR_CONTEXT_OPTIONS_INIT;
  options.backends = "cpu";
  context = NULL;
  CHECK_STATUS(tsr_context_create(&options, &context), TSR_OK);
  if (context) {
    uint32_t count = 0;
    CHECK_STATUS(tsr_device_count(context, &count), TSR_OK);
    CHECK(count >= 1);
    tsr_context_destroy(context);
  }
}

static void test_plugin_reports(tsr_context *context) {
  uint32_t count = 0;
  CHECK_STATUS(tsr_plugin_count(context, &count), TSR_OK);
  CHECK(count >= 1);
  CHECK_STATUS(tsr_plugin_count(NULL, &count), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_plugin_count", "context");
  CHECK_STATUS(tsr_plugin_count(context, NULL), TSR_ERROR_NULL_ARGUMENT);

  bool cpu_loaded = false;
  for (uint32_t i = 0; i < count; i++) {
    tsr_plugin_report report;
    memset(&report, 0, sizeof report);
    report.struct_size = sizeof report;
    CHECK_STATUS(tsr_plugin_get_report(context, i, &report), TSR_OK);
    CHECK_INT(report.struct_size, sizeof report);
    if (strcmp(report.name, "cpu") == 0) {
      CHECK_INT(report.state, TSR_PLUGIN_LOADED);
      CHECK_INT(report.abi_version, 2); /* the CPU plugin speaks ABI 2 */
      CHECK(report.device_count >= 1);
      CHECK_STR(report.reason, "");
      CHECK(strstr(report.manifest, "cpu.conf") != NULL);
      cpu_loaded = report.state == TSR_PLUGIN_LOADED;
    }
  }
  CHECK(cpu_loaded);

  tsr_plugin_report report;
  memset(&report, 0, sizeof report);
  report.struct_size = sizeof report;
  CHECK(tsr_plugin_get_report(context, count, &report) != TSR_OK);
  CHECK_ERROR("tsr_plugin_get_report", "index");
  report.struct_size = 8;
  CHECK_STATUS(tsr_plugin_get_report(context, 0, &report), TSR_ERROR_STRUCT_SIZE);
  CHECK_STATUS(tsr_plugin_get_report(context, 0, NULL), TSR_ERROR_NULL_ARGUMENT);
}

/* Index of the device the selector opens, or -1 when it fails. */
static int index_of(tsr_context *context, tsr_device *device) {
  uint32_t count = 0;
  tsr_device_count(context, &count);
  for (uint32_t i = 0; i < count; i++) {
    tsr_device *candidate = NULL;
    if (tsr_device_get(context, i, &candidate) == TSR_OK && candidate == device)
      return (int)i;
  }
  return -1;
}

static void test_devices(tsr_context *context) {
  uint32_t count = 0;
  CHECK_STATUS(tsr_device_count(context, &count), TSR_OK);
  CHECK(count >= 1);
  CHECK_STATUS(tsr_device_count(NULL, &count), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_device_count(context, NULL), TSR_ERROR_NULL_ARGUMENT);

  /* Stable order: GPUs, then other, then CPU. */
  int cpu_index = -1;
  bool any_gpu = false;
  int last_rank = -1;
  for (uint32_t i = 0; i < count; i++) {
    tsr_device *device = NULL;
    CHECK_STATUS(tsr_device_get(context, i, &device), TSR_OK);
    REQUIRE(device != NULL);
    tsr_device_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_STATUS(tsr_device_get_info(device, &info), TSR_OK);
    int rank = info.type == TSR_DEVICE_GPU              ? 0
               : info.type == TSR_DEVICE_INTEGRATED_GPU ? 1
               : info.type == TSR_DEVICE_OTHER          ? 2
                                                        : 3;
    CHECK(rank >= last_rank);
    last_rank = rank;
    any_gpu |= info.type == TSR_DEVICE_GPU || info.type == TSR_DEVICE_INTEGRATED_GPU;
    if (cpu_index < 0 && strcmp(info.backend, "cpu") == 0)
      cpu_index = (int)i;
    CHECK(info.name[0] != '\0');
    CHECK(info.device_key[0] != '\0');
    char expected_selector[64];
    snprintf(expected_selector, sizeof expected_selector, "%s:%u", info.backend,
             info.backend_index);
    CHECK_STR(info.selector, expected_selector);
  }
  REQUIRE(cpu_index >= 0);
  tsr_device *beyond = NULL;
  CHECK_STATUS(tsr_device_get(context, count, &beyond), TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_device_get", "index");
  CHECK(beyond == NULL);

  /* The CPU device's info. */
  tsr_device *cpu = NULL;
  CHECK_STATUS(tsr_device_get(context, (uint32_t)cpu_index, &cpu), TSR_OK);
  tsr_device_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK_STATUS(tsr_device_get_info(cpu, &info), TSR_OK);
  CHECK_STR(info.backend, "cpu");
  CHECK_STR(info.selector, "cpu:0");
  CHECK_INT(info.backend_index, 0);
  CHECK_INT(info.type, TSR_DEVICE_CPU);
  CHECK(info.memory_bytes > 0);
  CHECK(info.compute_units >= 1);
  CHECK(info.host_visible != 0);
  CHECK(info.arch[0] != '\0');
  CHECK(info.dtype_mask & (1u << TSR_DTYPE_F32));
  CHECK(info.dtype_mask & (1u << TSR_DTYPE_F16));
  CHECK(info.dtype_mask & (1u << TSR_DTYPE_BF16));
  for (int op = 0; op < TSR_OP_COUNT_; op++) {
    char label[96];
    snprintf(label, sizeof label, "cpu op_mask has %s", tsr_op_name((tsr_op)op));
    api_check((info.op_mask & (1u << op)) != 0, __FILE__, __LINE__, label);
  }
  CHECK(strncmp(info.device_key, "cpu", 3) == 0);
  info.struct_size = 4;
  CHECK_STATUS(tsr_device_get_info(cpu, &info), TSR_ERROR_STRUCT_SIZE);
  CHECK_ERROR("tsr_device_get_info", "struct_size");
  CHECK_STATUS(tsr_device_get_info(NULL, &info), TSR_ERROR_NULL_ARGUMENT);
  CHECK_STATUS(tsr_device_get_info(cpu, NULL), TSR_ERROR_NULL_ARGUMENT);

  /* Selectors. */
  tsr_device *device = NULL;
  CHECK_STATUS(tsr_device_open(context, "cpu", &device), TSR_OK);
  CHECK(device == cpu);
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, "cpu:0", &device), TSR_OK);
  CHECK(device == cpu);
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, "best", &device), TSR_OK);
  CHECK_INT(index_of(context, device), 0);
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, "0", &device), TSR_OK);
  CHECK_INT(index_of(context, device), 0);
  char index_selector[16];
  snprintf(index_selector, sizeof index_selector, "%d", cpu_index);
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, index_selector, &device), TSR_OK);
  CHECK(device == cpu);

  device = NULL;
  tsr_status gpu_status = tsr_device_open(context, "gpu", &device);
  if (any_gpu) {
    CHECK_STATUS(gpu_status, TSR_OK);
  } else {
    CHECK_STATUS(gpu_status, TSR_ERROR_NOT_FOUND);
    CHECK_ERROR("tsr_device_open", "gpu");
    CHECK(device == NULL);
  }
  CHECK_STATUS(tsr_device_open(context, "nonsense", &device), TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_device_open", "nonsense");
  CHECK_STATUS(tsr_device_open(context, "cpu:7", &device), TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_device_open", "cpu:7");
  CHECK_STATUS(tsr_device_open(context, "cpu:x", &device), TSR_ERROR_NOT_FOUND);
  CHECK_STATUS(tsr_device_open(context, "9999", &device), TSR_ERROR_NOT_FOUND);
  CHECK_STATUS(tsr_device_open(NULL, "cpu", &device), TSR_ERROR_NULL_ARGUMENT);
  CHECK_ERROR("tsr_device_open", "context");
  CHECK_STATUS(tsr_device_open(context, "cpu", NULL), TSR_ERROR_NULL_ARGUMENT);

  /* NULL and "" read TESSERA_DEVICE, else mean "best". */
  unsetenv("TESSERA_DEVICE");
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, NULL, &device), TSR_OK);
  CHECK_INT(index_of(context, device), 0);
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, "", &device), TSR_OK);
  CHECK_INT(index_of(context, device), 0);
  setenv("TESSERA_DEVICE", "cpu:0", 1);
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, NULL, &device), TSR_OK);
  CHECK(device == cpu);
  setenv("TESSERA_DEVICE", "nonsense", 1);
  CHECK_STATUS(tsr_device_open(context, NULL, &device), TSR_ERROR_NOT_FOUND);
  CHECK_ERROR("tsr_device_open", "TESSERA_DEVICE");
  /* An explicit selector wins over the variable. */
  device = NULL;
  CHECK_STATUS(tsr_device_open(context, "cpu", &device), TSR_OK);
  CHECK(device == cpu);
  unsetenv("TESSERA_DEVICE");
}

static void test_names(void) {
  static const struct {
    tsr_status status;
    const char *name;
  } statuses[] = {
      {TSR_OK, "TSR_OK"},
      {TSR_ERROR_NULL_ARGUMENT, "TSR_ERROR_NULL_ARGUMENT"},
      {TSR_ERROR_INVALID_VALUE, "TSR_ERROR_INVALID_VALUE"},
      {TSR_ERROR_STRUCT_SIZE, "TSR_ERROR_STRUCT_SIZE"},
      {TSR_ERROR_DTYPE_MISMATCH, "TSR_ERROR_DTYPE_MISMATCH"},
      {TSR_ERROR_RANK, "TSR_ERROR_RANK"},
      {TSR_ERROR_SHAPE_MISMATCH, "TSR_ERROR_SHAPE_MISMATCH"},
      {TSR_ERROR_BAD_SIZE, "TSR_ERROR_BAD_SIZE"},
      {TSR_ERROR_OUT_OF_BOUNDS, "TSR_ERROR_OUT_OF_BOUNDS"},
      {TSR_ERROR_WRONG_DEVICE, "TSR_ERROR_WRONG_DEVICE"},
      {TSR_ERROR_UNSUPPORTED, "TSR_ERROR_UNSUPPORTED"},
      {TSR_ERROR_OUT_OF_MEMORY, "TSR_ERROR_OUT_OF_MEMORY"},
      {TSR_ERROR_NOT_FOUND, "TSR_ERROR_NOT_FOUND"},
      {TSR_ERROR_BACKEND, "TSR_ERROR_BACKEND"},
      {TSR_ERROR_IO, "TSR_ERROR_IO"},
      {TSR_ERROR_OVERLAP, "TSR_ERROR_OVERLAP"},
  };
  for (size_t i = 0; i < API_COUNT(statuses); i++)
    CHECK_STR(tsr_status_name(statuses[i].status), statuses[i].name);
  const char *unknown = tsr_status_name((tsr_status)1234);
  CHECK(unknown != NULL && strncmp(unknown, "TSR_", 4) == 0);
  for (size_t i = 0; i < API_COUNT(statuses); i++)
    CHECK(strcmp(unknown, statuses[i].name) != 0);

  CHECK_STR(tsr_dtype_name(TSR_DTYPE_F32), "f32");
  CHECK_STR(tsr_dtype_name(TSR_DTYPE_F16), "f16");
  CHECK_STR(tsr_dtype_name(TSR_DTYPE_BF16), "bf16");
  CHECK_STR(tsr_dtype_name(TSR_DTYPE_I32), "i32");
  CHECK_STR(tsr_dtype_name(TSR_DTYPE_INVALID), "invalid");
  CHECK_STR(tsr_dtype_name((tsr_dtype)77), "invalid");
  CHECK_INT(tsr_dtype_size(TSR_DTYPE_F32), 4);
  CHECK_INT(tsr_dtype_size(TSR_DTYPE_F16), 2);
  CHECK_INT(tsr_dtype_size(TSR_DTYPE_BF16), 2);
  CHECK_INT(tsr_dtype_size(TSR_DTYPE_I32), 4);
  CHECK_INT(tsr_dtype_size(TSR_DTYPE_INVALID), 0);
  CHECK_INT(tsr_dtype_size((tsr_dtype)77), 0);
  for (int d = 1; d < TSR_DTYPE_COUNT_; d++)
    CHECK_INT(tsr_dtype_from_name(tsr_dtype_name((tsr_dtype)d)), d);
  CHECK_INT(tsr_dtype_from_name("f64"), TSR_DTYPE_INVALID);
  CHECK_INT(tsr_dtype_from_name(NULL), TSR_DTYPE_INVALID);

  static const char *const op_names[TSR_OP_COUNT_] = {
      "gemm", "grouped_gemm", "attention", "rmsnorm",       "layernorm", "softmax",
      "rope", "swiglu",       "gelu",      "cross_entropy", "kv_append"};
  for (int op = 0; op < TSR_OP_COUNT_; op++) {
    CHECK_STR(tsr_op_name((tsr_op)op), op_names[op]);
    CHECK_INT(tsr_op_from_name(op_names[op]), op);
  }
  CHECK(tsr_op_name(TSR_OP_COUNT_) == NULL);
  CHECK(tsr_op_name((tsr_op)-1) == NULL);
  CHECK_INT(tsr_op_from_name("matmul"), TSR_OP_COUNT_);
  CHECK_INT(tsr_op_from_name(NULL), TSR_OP_COUNT_);

  char version[32];
  snprintf(version, sizeof version, "%d.%d.%d", TSR_VERSION_MAJOR, TSR_VERSION_MINOR,
           TSR_VERSION_PATCH);
  CHECK_STR(tsr_version(), version);
}

static void test_tensors(void) {
  const int64_t shape[3] = {2, 3, 4};
  tsr_buffer *fake = (tsr_buffer *)(uintptr_t)0x1000; /* never dereferenced */
  tsr_tensor t = tsr_tensor_make(fake, 64, TSR_DTYPE_BF16, 3, shape);
  CHECK(t.buffer == fake);
  CHECK_INT(t.offset, 64);
  CHECK_INT(t.dtype, TSR_DTYPE_BF16);
  CHECK_INT(t.rank, 3);
  CHECK_INT(t.shape[0], 2);
  CHECK_INT(t.shape[1], 3);
  CHECK_INT(t.shape[2], 4);
  CHECK_INT(t.strides[0], 12);
  CHECK_INT(t.strides[1], 4);
  CHECK_INT(t.strides[2], 1);
  CHECK_INT(tsr_tensor_numel(&t), 24);

  tsr_tensor swapped = tsr_tensor_transpose(t, 0, 2);
  CHECK_INT(swapped.shape[0], 4);
  CHECK_INT(swapped.shape[1], 3);
  CHECK_INT(swapped.shape[2], 2);
  CHECK_INT(swapped.strides[0], 1);
  CHECK_INT(swapped.strides[1], 4);
  CHECK_INT(swapped.strides[2], 12);
  CHECK_INT(swapped.offset, 64);
  CHECK(swapped.buffer == fake);
  CHECK_INT(tsr_tensor_numel(&swapped), 24);
  /* Out-of-range dimensions leave the view as it was. */
  tsr_tensor same = tsr_tensor_transpose(t, 0, 3);
  CHECK_INT(same.shape[0], 2);
  CHECK_INT(same.strides[0], 12);
  same = tsr_tensor_transpose(t, -1, 1);
  CHECK_INT(same.shape[1], 3);

  const int64_t one[1] = {7};
  tsr_tensor vector = tsr_tensor_make(NULL, 0, TSR_DTYPE_F32, 1, one);
  CHECK_INT(vector.strides[0], 1);
  CHECK_INT(tsr_tensor_numel(&vector), 7);

  tsr_tensor empty;
  memset(&empty, 0, sizeof empty);
  CHECK_INT(tsr_tensor_numel(&empty), 0);
  CHECK_INT(tsr_tensor_numel(NULL), 0);
  tsr_tensor negative = t;
  negative.shape[1] = -3;
  CHECK_INT(tsr_tensor_numel(&negative), 0);
  tsr_tensor huge = t;
  huge.shape[0] = INT64_MAX;
  CHECK_INT(tsr_tensor_numel(&huge), 0);
}

int main(void) {
  test_context_create();
  tsr_context *context = api_context();
  test_plugin_reports(context);
  test_devices(context);
  tsr_context_destroy(context);
  test_names();
  test_tensors();
  return api_finish("test_context");
}
