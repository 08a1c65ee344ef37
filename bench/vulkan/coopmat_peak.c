/* SPDX-License-Identifier: Apache-2.0 */
/* coopmat_peak: raw throughput of cooperative-matrix multiply-add (VK_NV_cooperative_matrix)
 * and of plain f32 FMA, one compute shader at a time, timed with timestamp queries.
 *
 *   coopmat_peak [--device N] [--allow-cpu] [--groups N] [--iters N] [--dump DIR]
 *                FILE.spv:FLOP[:ITERS]...
 *
 * --dump DIR writes, per shader, the driver's pipeline cache (DIR/NAME.cache: on NVIDIA the
 * compiled machine code, which nv_cache_sass.py extracts) and the driver's internal
 * representations where it offers any (DIR/NAME.eE.rR.txt or .bin).
 *
 * FLOP: floating-point operations one workgroup does per loop iteration (2 per multiply-add).
 * Each shader has one storage buffer at set 0 binding 0, of which every workgroup owns a 64 KiB
 * slice, and a push constant `uint iters`. libvulkan.so.1 is dlopen'ed, not linked. */
#define _POSIX_C_SOURCE 200809L
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VK_KHR_cooperative_matrix is newer than Debian 12's headers (1.3.239): declare what we read. */
typedef struct {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize, AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  uint32_t scope;
} KhrCoopMatProps;
typedef VkResult(VKAPI_PTR *PFN_KhrCoopMatProps)(VkPhysicalDevice, uint32_t *, KhrCoopMatProps *);

#define ST(name) .sType = VK_STRUCTURE_TYPE_##name /* shorter designated initialisers */
#define SLICE 65536u                               /* output bytes each workgroup may write */
#define WARMUP 3
#define TIMED 10

/* Entry points, named like the prototypes that VK_NO_PROTOTYPES leaves out. */
// clang-format off
#define INSTANCE_FNS(X) X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) \
  X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2) \
  X(vkGetPhysicalDeviceFeatures2) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) \
  X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
#define DEVICE_FNS(X) X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) \
  X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) \
  X(vkDestroyPipelineLayout) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateShaderModule) \
  X(vkDestroyShaderModule) X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateCommandPool) \
  X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) \
  X(vkEndCommandBuffer) \
  X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch) \
  X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkCreateQueryPool) X(vkDestroyQueryPool) \
  X(vkGetQueryPoolResults) X(vkCreateFence) X(vkDestroyFence) X(vkResetFences) X(vkWaitForFences) \
  X(vkQueueSubmit) X(vkCreatePipelineCache) X(vkDestroyPipelineCache) X(vkGetPipelineCacheData)
// clang-format on
#define DECLARE(f) static PFN_##f f;
INSTANCE_FNS(DECLARE)
DEVICE_FNS(DECLARE)
static PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;

static void die(const char *what, const char *detail) {
  fprintf(stderr, "coopmat_peak: %s%s\n", what, detail ? detail : "");
  exit(1);
}

/* Names of the core VkResult errors, -1 .. -13, for the messages. */
static const char *result_name(VkResult r) {
  // clang-format off
  static const char *e[] = {"", "OUT_OF_HOST_MEMORY", "OUT_OF_DEVICE_MEMORY",
    "INITIALIZATION_FAILED", "DEVICE_LOST", "MEMORY_MAP_FAILED", "LAYER_NOT_PRESENT",
    "EXTENSION_NOT_PRESENT", "FEATURE_NOT_PRESENT", "INCOMPATIBLE_DRIVER", "TOO_MANY_OBJECTS",
    "FORMAT_NOT_SUPPORTED", "FRAGMENTED_POOL", "UNKNOWN"};
  // clang-format on
  return r < 0 && r >= -13 ? e[-r] : "";
}

/* Every Vulkan call that returns a VkResult goes through CHECK: a failure names the call. */
#define CHECK(call) check_vk((call), #call, __LINE__)
static void check_vk(VkResult r, const char *call, int line) {
  if (r == VK_SUCCESS)
    return;
  fprintf(stderr, "coopmat_peak: line %d: %s failed: VkResult %d %s\n", line, call, r,
          result_name(r));
  exit(1);
}

/* Function-pointer lookups; POSIX lets dlsym's and the loader's pointers be cast back. */
static PFN_vkVoidFunction need(PFN_vkVoidFunction f, const char *name) {
  if (!f)
    die("the Vulkan loader/driver gives no ", name);
  return f;
}
#define LOAD_I(inst, f) f = (PFN_##f)need(vkGetInstanceProcAddr(inst, #f), #f);
#define LOAD_D(dev, f) f = (PFN_##f)need(vkGetDeviceProcAddr(dev, #f), #f);
#define LOAD_INST(f) LOAD_I(inst, f)
#define LOAD_DEV(f) LOAD_D(dev, f)

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(e[i].extensionName, name))
      return true;
  return false;
}

static const char *ctype(uint32_t t) { /* VkComponentTypeNV/KHR */
  static const char *n[] = {"f16", "f32", "f64", "s8",  "s16", "s32",
                            "s64", "u8",  "u16", "u32", "u64"};
  return t < 11 ? n[t] : t == 1000141000u ? "bf16" : "other";
}

/* What we need from a shader's SPIR-V: its local size and the capabilities that need features. */
typedef struct {
  uint32_t *code, words, local[3];
  bool coopmat_nv, float16, sb16, vk_memory_model;
} Spirv;

static bool read_spirv(const char *path, Spirv *s) {
  memset(s, 0, sizeof *s);
  FILE *f = fopen(path, "rb");
  long n = f && !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
  bool ok = n >= 20 && n % 4 == 0 && !fseek(f, 0, SEEK_SET) && (s->code = malloc((size_t)n)) &&
            fread(s->code, 1, (size_t)n, f) == (size_t)n && s->code[0] == 0x07230203u;
  if (f)
    fclose(f);
  s->words = ok ? (uint32_t)(n / 4) : 0;
  for (uint32_t i = 5, len; ok && i < s->words; i += len) { /* word 0: length << 16 | opcode */
    uint32_t op = s->code[i] & 0xffff, *a = s->code + i + 1;
    len = s->code[i] >> 16;
    if (len == 0 || i + len > s->words)
      return false;
    if (op == 17 && len == 2) { /* OpCapability */
      s->float16 |= a[0] == 9;
      s->sb16 |= a[0] == 4433;                       /* StorageBuffer16BitAccess */
      s->vk_memory_model |= a[0] == 5345;            /* VulkanMemoryModel */
      s->coopmat_nv |= a[0] == 5357;                 /* CooperativeMatrixNV */
    } else if (op == 16 && len == 6 && a[1] == 17) { /* OpExecutionMode LocalSize x y z */
      memcpy(s->local, a + 2, sizeof s->local);
    }
  }
  return ok;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f))
    die("cannot write ", path);
}

/* The driver's internal representations of every executable (text ones as text). */
static void dump_representations(VkDevice dev, VkPipeline pipe, const char *dir, const char *name) {
  PFN_vkGetPipelineExecutablePropertiesKHR vkGetPipelineExecutablePropertiesKHR;
  PFN_vkGetPipelineExecutableInternalRepresentationsKHR get_ir;
  LOAD_D(dev, vkGetPipelineExecutablePropertiesKHR)
  get_ir = (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(
      dev, "vkGetPipelineExecutableInternalRepresentationsKHR");
  if (!get_ir)
    return;
  VkPipelineInfoKHR pinfo = {ST(PIPELINE_INFO_KHR), .pipeline = pipe};
  uint32_t nex = 0;
  CHECK(vkGetPipelineExecutablePropertiesKHR(dev, &pinfo, &nex, NULL));
  for (uint32_t e = 0; e < nex; e++) {
    VkPipelineExecutableInfoKHR einfo = {ST(PIPELINE_EXECUTABLE_INFO_KHR), .pipeline = pipe,
                                         .executableIndex = e};
    uint32_t nr = 0;
    CHECK(get_ir(dev, &einfo, &nr, NULL));
    VkPipelineExecutableInternalRepresentationKHR *ir = calloc(nr + 1, sizeof *ir);
    for (uint32_t r = 0; r < nr; r++)
      ir[r] = (VkPipelineExecutableInternalRepresentationKHR){
          ST(PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR)};
    CHECK(get_ir(dev, &einfo, &nr, ir)); /* sizes */
    for (uint32_t r = 0; r < nr; r++)
      ir[r].pData = malloc(ir[r].dataSize + 1);
    CHECK(get_ir(dev, &einfo, &nr, ir));
    for (uint32_t r = 0; r < nr; r++) {
      char path[512];
      snprintf(path, sizeof path, "%s/%s.e%u.r%u.%s", dir, name, e, r,
               ir[r].isText ? "txt" : "bin");
      write_file(path, ir[r].pData,
                 ir[r].isText && ir[r].dataSize ? ir[r].dataSize - 1 : ir[r].dataSize);
      printf("  internal representation %u of executable %u: %s (%s), %zu bytes: %s\n", r, e,
             ir[r].name, ir[r].description, ir[r].dataSize, path);
      free(ir[r].pData);
    }
    if (!nr)
      printf("  executable %u: the driver gives no internal representations\n", e);
    free(ir);
  }
}

static void print_statistics(VkDevice dev, VkPipeline pipe) {
  PFN_vkGetPipelineExecutablePropertiesKHR vkGetPipelineExecutablePropertiesKHR;
  PFN_vkGetPipelineExecutableStatisticsKHR vkGetPipelineExecutableStatisticsKHR;
  LOAD_D(dev, vkGetPipelineExecutablePropertiesKHR)
  LOAD_D(dev, vkGetPipelineExecutableStatisticsKHR)
  VkPipelineInfoKHR pinfo = {ST(PIPELINE_INFO_KHR), .pipeline = pipe};
  VkPipelineExecutablePropertiesKHR ex[8];
  uint32_t nex = 8;
  for (uint32_t i = 0; i < nex; i++)
    ex[i] = (VkPipelineExecutablePropertiesKHR){ST(PIPELINE_EXECUTABLE_PROPERTIES_KHR)};
  VkResult r = vkGetPipelineExecutablePropertiesKHR(dev, &pinfo, &nex, ex);
  CHECK(r == VK_INCOMPLETE ? VK_SUCCESS : r); /* more than 8 executables: print the first 8 */
  for (uint32_t e = 0; e < nex; e++) {
    printf("  executable %u: %s (%s), subgroup size %u\n", e, ex[e].name, ex[e].description,
           ex[e].subgroupSize);
    VkPipelineExecutableInfoKHR einfo = {ST(PIPELINE_EXECUTABLE_INFO_KHR), .pipeline = pipe,
                                         .executableIndex = e};
    uint32_t ns = 0;
    CHECK(vkGetPipelineExecutableStatisticsKHR(dev, &einfo, &ns, NULL));
    VkPipelineExecutableStatisticKHR *st = calloc(ns + 1, sizeof *st);
    for (uint32_t i = 0; i < ns; i++)
      st[i] = (VkPipelineExecutableStatisticKHR){ST(PIPELINE_EXECUTABLE_STATISTIC_KHR)};
    CHECK(vkGetPipelineExecutableStatisticsKHR(dev, &einfo, &ns, st));
    for (uint32_t i = 0; i < ns; i++) {
      VkPipelineExecutableStatisticValueKHR v = st[i].value;
      switch (st[i].format) {
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
        printf("    %-28s = %s", st[i].name, v.b32 ? "true" : "false");
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
        printf("    %-28s = %lld", st[i].name, (long long)v.i64);
        break;
      case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
        printf("    %-28s = %llu", st[i].name, (unsigned long long)v.u64);
        break;
      default:
        printf("    %-28s = %g", st[i].name, v.f64);
      }
      printf("  (%s)\n", st[i].description);
    }
    free(st);
  }
}

int main(int argc, char **argv) {
  int want = -1, nsh = 0;
  bool allow_cpu = false;
  uint32_t groups = 0, iters = 16384; /* ~2-8 ms per coopmat dispatch on an H100 */
  const char *dump = NULL;
  char **shaders = calloc((size_t)argc, sizeof *shaders);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc)
      want = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--groups") && i + 1 < argc)
      groups = (uint32_t)strtoul(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = (uint32_t)strtoul(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
      dump = argv[++i];
    else if (!strcmp(argv[i], "--allow-cpu"))
      allow_cpu = true;
    else if (argv[i][0] == '-')
      die("usage: coopmat_peak [--device N] [--allow-cpu] [--groups N] [--iters N] ",
          "[--dump DIR] FILE.spv:FLOP_PER_WORKGROUP_PER_ITER[:ITERS]...");
    else
      shaders[nsh++] = argv[i];
  }

  void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    die("cannot load the Vulkan loader: ", dlerror());
  vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
  if (!vkGetInstanceProcAddr)
    die("libvulkan.so.1 has no vkGetInstanceProcAddr", NULL);
  VkInstance inst = VK_NULL_HANDLE;
  PFN_vkCreateInstance vkCreateInstance;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
  LOAD_INST(vkCreateInstance)
  LOAD_INST(vkEnumerateInstanceVersion) /* a 1.0 loader lacks it, and then fails here */
  uint32_t api;
  CHECK(vkEnumerateInstanceVersion(&api));
  if (api < VK_API_VERSION_1_2)
    die("the Vulkan loader is older than 1.2", NULL);
  VkApplicationInfo app = {ST(APPLICATION_INFO), .pApplicationName = "coopmat_peak",
                           .apiVersion = api < VK_API_VERSION_1_3 ? api : VK_API_VERSION_1_3};
  VkInstanceCreateInfo ici = {ST(INSTANCE_CREATE_INFO), .pApplicationInfo = &app};
  CHECK(vkCreateInstance(&ici, NULL, &inst));
  INSTANCE_FNS(LOAD_INST)

  /* --device N, else the first device that is not a CPU (lavapipe), unless --allow-cpu. */
  uint32_t npd = 0;
  CHECK(vkEnumeratePhysicalDevices(inst, &npd, NULL));
  VkPhysicalDevice *pds = calloc(npd + 1, sizeof *pds), pd = VK_NULL_HANDLE;
  CHECK(vkEnumeratePhysicalDevices(inst, &npd, pds));
  for (uint32_t i = 0; i < npd; i++) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pds[i], &p);
    printf("device %u: %s (VkPhysicalDeviceType %d)\n", i, p.deviceName, p.deviceType);
    if (!pd && (want >= 0 ? (uint32_t)want == i
                          : allow_cpu || p.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU))
      pd = pds[i];
  }
  if (!pd)
    die("no such device (lavapipe is a CPU device: pass --allow-cpu or --device N)", NULL);

  uint32_t next = 0;
  CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &next, NULL));
  VkExtensionProperties *exts = calloc(next + 1, sizeof *exts);
  CHECK(vkEnumerateDeviceExtensionProperties(pd, NULL, &next, exts));
  bool has_nv = has_ext(exts, next, "VK_NV_cooperative_matrix");
  bool has_khr = has_ext(exts, next, "VK_KHR_cooperative_matrix");
  bool has_exec = has_ext(exts, next, "VK_KHR_pipeline_executable_properties");
  bool has_sm = has_ext(exts, next, "VK_NV_shader_sm_builtins");
  bool has_amd = has_ext(exts, next, "VK_AMD_shader_core_properties");
  VkPhysicalDeviceProperties base;
  vkGetPhysicalDeviceProperties(pd, &base);
  if (base.apiVersion < VK_API_VERSION_1_2)
    die("the device does not support Vulkan 1.2", NULL);
  /* Subgroup size control: core in 1.3, an extension before, with the same structures. */
  bool old_ssc = base.apiVersion < VK_API_VERSION_1_3;
  bool has_ssc = !old_ssc || has_ext(exts, next, "VK_EXT_subgroup_size_control");

  /* Properties: driver, subgroup sizes, and the SM (NVIDIA) or CU (AMD) count for --groups. */
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
      ST(PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV)};
  VkPhysicalDeviceShaderCorePropertiesAMD amd = {ST(PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD)};
  VkPhysicalDeviceSubgroupSizeControlProperties ssp = {
      ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES)};
  VkPhysicalDeviceVulkan11Properties p11 = {ST(PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES)};
  VkPhysicalDeviceVulkan12Properties p12 = {ST(PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES),
                                            .pNext = &p11};
  VkPhysicalDeviceProperties2 props = {ST(PHYSICAL_DEVICE_PROPERTIES_2), .pNext = &p12};
  if (has_ssc)
    ssp.pNext = props.pNext, props.pNext = &ssp;
  if (has_sm)
    sm.pNext = props.pNext, props.pNext = &sm;
  if (has_amd)
    amd.pNext = props.pNext, props.pNext = &amd;
  vkGetPhysicalDeviceProperties2(pd, &props);
  uint32_t dv = base.driverVersion, api_d = base.apiVersion;
  printf("using: %s, %s %s, driverVersion 0x%08x", base.deviceName, p12.driverName, p12.driverInfo,
         dv);
  if (base.vendorID == 0x10de) /* NVIDIA packs 10.8.8.6 bits */
    printf(" = %u.%u.%u", dv >> 22, (dv >> 14) & 0xff, (dv >> 6) & 0xff);
  printf(", Vulkan %u.%u.%u\n", VK_API_VERSION_MAJOR(api_d), VK_API_VERSION_MINOR(api_d),
         VK_API_VERSION_PATCH(api_d));
  uint32_t units = has_sm    ? sm.shaderSMCount
                   : has_amd ? amd.shaderEngineCount * amd.shaderArraysPerEngineCount *
                                   amd.computeUnitsPerShaderArray
                             : 0;
  printf("subgroup size %u (sizes %u..%u), SMs/CUs %u\n", p11.subgroupSize, ssp.minSubgroupSize,
         ssp.maxSubgroupSize, units);
  groups = groups ? groups : units ? 8 * units : 1056;

  /* The coopmat shapes the driver runs: a shader with another shape will fail to build. */
  if (has_nv) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV
        vkGetPhysicalDeviceCooperativeMatrixPropertiesNV;
    LOAD_INST(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get_nv =
        vkGetPhysicalDeviceCooperativeMatrixPropertiesNV; /* a shorter name */
    uint32_t n = 0;
    CHECK(get_nv(pd, &n, NULL));
    VkCooperativeMatrixPropertiesNV *cp = calloc(n + 1, sizeof *cp);
    for (uint32_t i = 0; i < n; i++)
      cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    CHECK(get_nv(pd, &n, cp));
    printf("VK_NV_cooperative_matrix: %u shapes (MxNxK A B C D scope)\n", n);
    for (uint32_t i = 0; i < n; i++)
      printf("  NV  %2ux%2ux%2u %s %s %s %s scope %d\n", cp[i].MSize, cp[i].NSize, cp[i].KSize,
             ctype(cp[i].AType), ctype(cp[i].BType), ctype(cp[i].CType), ctype(cp[i].DType),
             cp[i].scope);
    free(cp);
  } else {
    printf("VK_NV_cooperative_matrix: not supported by this device\n");
  }
  /* A loader older than the KHR extension may still pass the call through to the driver. */
  PFN_KhrCoopMatProps get_khr = (PFN_KhrCoopMatProps)vkGetInstanceProcAddr(
      inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
  if (has_khr && !get_khr)
    printf("VK_KHR_cooperative_matrix: present, but the loader gives no properties call\n");
  if (has_khr && get_khr) {
    uint32_t n = 0;
    CHECK(get_khr(pd, &n, NULL));
    KhrCoopMatProps *cp = calloc(n + 1, sizeof *cp);
    for (uint32_t i = 0; i < n; i++)
      cp[i].sType = (VkStructureType)1000506001; /* COOPERATIVE_MATRIX_PROPERTIES_KHR */
    CHECK(get_khr(pd, &n, cp));
    printf("VK_KHR_cooperative_matrix: %u shapes (MxNxK A B C Result saturating scope)\n", n);
    for (uint32_t i = 0; i < n; i++)
      printf("  KHR %2ux%2ux%2u %s %s %s %s sat %u scope %u\n", cp[i].MSize, cp[i].NSize,
             cp[i].KSize, ctype(cp[i].AType), ctype(cp[i].BType), ctype(cp[i].CType),
             ctype(cp[i].ResultType), cp[i].saturatingAccumulation, cp[i].scope);
    free(cp);
  }

  /* Query the features, then enable only those the shaders use (all supported ones would
   * include robustBufferAccess, which can cost speed). */
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {
      ST(PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV)};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR ex = {
      ST(PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR)};
  VkPhysicalDeviceSubgroupSizeControlFeatures ss = {
      ST(PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES)};
  VkPhysicalDeviceVulkan11Features f11 = {ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES)};
  VkPhysicalDeviceVulkan12Features f12 = {ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), .pNext = &f11};
  VkPhysicalDeviceFeatures2 feats = {ST(PHYSICAL_DEVICE_FEATURES_2), .pNext = &f12};
  const char *dev_exts[4];
  uint32_t ndev_exts = 0;
  if (has_nv)
    cm.pNext = feats.pNext, feats.pNext = &cm, dev_exts[ndev_exts++] = "VK_NV_cooperative_matrix";
  if (has_exec)
    ex.pNext = feats.pNext, feats.pNext = &ex,
    dev_exts[ndev_exts++] = "VK_KHR_pipeline_executable_properties";
  if (has_ssc)
    ss.pNext = feats.pNext, feats.pNext = &ss;
  if (has_ssc && old_ssc)
    dev_exts[ndev_exts++] = "VK_EXT_subgroup_size_control";
  vkGetPhysicalDeviceFeatures2(pd, &feats); /* fills the chain in place ... */
  has_nv = cm.cooperativeMatrix;            /* ... which is then cut down to what we use */
  has_exec = ex.pipelineExecutableInfo;
  cm = (VkPhysicalDeviceCooperativeMatrixFeaturesNV){cm.sType, cm.pNext, has_nv, VK_FALSE};
  ex = (VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR){ex.sType, ex.pNext, has_exec};
  ss = (VkPhysicalDeviceSubgroupSizeControlFeatures){ss.sType, ss.pNext, ss.subgroupSizeControl,
                                                     ss.computeFullSubgroups};
  f11 =
      (VkPhysicalDeviceVulkan11Features){ST(PHYSICAL_DEVICE_VULKAN_1_1_FEATURES),
                                         .storageBuffer16BitAccess = f11.storageBuffer16BitAccess};
  f12 = (VkPhysicalDeviceVulkan12Features){
      ST(PHYSICAL_DEVICE_VULKAN_1_2_FEATURES), .pNext = &f11, .shaderFloat16 = f12.shaderFloat16,
      .vulkanMemoryModel = f12.vulkanMemoryModel,
      .vulkanMemoryModelDeviceScope = f12.vulkanMemoryModelDeviceScope};
  memset(&feats.features, 0, sizeof feats.features);
  /* 32-wide subgroups (NVIDIA warps, which the FLOP counts assume), where compute can ask. */
  bool req32 = ss.subgroupSizeControl && ssp.minSubgroupSize <= 32 && ssp.maxSubgroupSize >= 32 &&
               (ssp.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
  printf("features: NV coopmat %u, shaderFloat16 %u, storageBuffer16BitAccess %u, "
         "vulkanMemoryModel %u, subgroupSizeControl %u (require 32: %s), computeFullSubgroups %u, "
         "pipeline statistics %u\n",
         has_nv, f12.shaderFloat16, f11.storageBuffer16BitAccess, f12.vulkanMemoryModel,
         ss.subgroupSizeControl, req32 ? "yes" : "no", ss.computeFullSubgroups, has_exec);

  /* A compute queue with valid timestamps. */
  uint32_t nqf = 0, qf = UINT32_MAX;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nqf, NULL);
  VkQueueFamilyProperties *qfs = calloc(nqf + 1, sizeof *qfs);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nqf, qfs);
  for (uint32_t i = nqf; i-- > 0;)
    if ((qfs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && qfs[i].timestampValidBits)
      qf = i; /* the lowest such family: on most drivers the graphics+compute one */
  if (qf == UINT32_MAX)
    die("no compute queue with timestamps", NULL);
  uint32_t tbits = qfs[qf].timestampValidBits;
  uint64_t tmask = tbits >= 64 ? UINT64_MAX : (UINT64_C(1) << tbits) - 1;

  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {ST(DEVICE_QUEUE_CREATE_INFO), .queueFamilyIndex = qf,
                                 .queueCount = 1, .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {ST(DEVICE_CREATE_INFO),
                            .pNext = &feats,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci,
                            .enabledExtensionCount = ndev_exts,
                            .ppEnabledExtensionNames = dev_exts};
  VkDevice dev;
  CHECK(vkCreateDevice(pd, &dci, NULL, &dev));
  DEVICE_FNS(LOAD_DEV)
  VkQueue queue;
  vkGetDeviceQueue(dev, qf, 0, &queue);

  /* The output buffer: SLICE bytes per workgroup, device-local if there is such memory. */
  VkBufferCreateInfo bci = {ST(BUFFER_CREATE_INFO), .size = (VkDeviceSize)groups * SLICE,
                            .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
  VkBuffer buf;
  CHECK(vkCreateBuffer(dev, &bci, NULL, &buf));
  VkMemoryRequirements mr;
  vkGetBufferMemoryRequirements(dev, buf, &mr);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  uint32_t mt = UINT32_MAX; /* the first type that fits: device-local if one is, else any */
  for (int pass = 0; pass < 2 && mt == UINT32_MAX; pass++)
    for (uint32_t i = 0; i < mp.memoryTypeCount && mt == UINT32_MAX; i++)
      if ((mr.memoryTypeBits >> i & 1) &&
          (pass || mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
        mt = i;
  VkMemoryAllocateInfo mai = {ST(MEMORY_ALLOCATE_INFO), .allocationSize = mr.size,
                              .memoryTypeIndex = mt};
  VkDeviceMemory mem;
  CHECK(vkAllocateMemory(dev, &mai, NULL, &mem));
  CHECK(vkBindBufferMemory(dev, buf, mem, 0));

  VkDescriptorSetLayoutBinding bind = {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                       VK_SHADER_STAGE_COMPUTE_BIT, NULL};
  VkDescriptorSetLayoutCreateInfo dslci = {ST(DESCRIPTOR_SET_LAYOUT_CREATE_INFO), .bindingCount = 1,
                                           .pBindings = &bind};
  VkDescriptorSetLayout dsl;
  CHECK(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl));
  VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(uint32_t)};
  VkPipelineLayoutCreateInfo plci = {ST(PIPELINE_LAYOUT_CREATE_INFO), .setLayoutCount = 1,
                                     .pSetLayouts = &dsl, .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pcr};
  VkPipelineLayout pl;
  CHECK(vkCreatePipelineLayout(dev, &plci, NULL, &pl));
  VkDescriptorPoolSize dps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
  VkDescriptorPoolCreateInfo dpci = {ST(DESCRIPTOR_POOL_CREATE_INFO), .maxSets = 1,
                                     .poolSizeCount = 1, .pPoolSizes = &dps};
  VkDescriptorPool dp;
  CHECK(vkCreateDescriptorPool(dev, &dpci, NULL, &dp));
  VkDescriptorSetAllocateInfo dsai = {ST(DESCRIPTOR_SET_ALLOCATE_INFO), .descriptorPool = dp,
                                      .descriptorSetCount = 1, .pSetLayouts = &dsl};
  VkDescriptorSet ds;
  CHECK(vkAllocateDescriptorSets(dev, &dsai, &ds));
  VkDescriptorBufferInfo dbi = {buf, 0, VK_WHOLE_SIZE};
  VkWriteDescriptorSet wds = {ST(WRITE_DESCRIPTOR_SET), .dstSet = ds, .descriptorCount = 1,
                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              .pBufferInfo = &dbi};
  vkUpdateDescriptorSets(dev, 1, &wds, 0, NULL);

  VkCommandPoolCreateInfo cpci = {ST(COMMAND_POOL_CREATE_INFO), .queueFamilyIndex = qf};
  VkCommandPool cpool;
  CHECK(vkCreateCommandPool(dev, &cpci, NULL, &cpool));
  VkCommandBufferAllocateInfo cbai = {ST(COMMAND_BUFFER_ALLOCATE_INFO), .commandPool = cpool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
  VkQueryPoolCreateInfo qpci = {ST(QUERY_POOL_CREATE_INFO), .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = 2};
  VkQueryPool qp;
  CHECK(vkCreateQueryPool(dev, &qpci, NULL, &qp));
  VkFenceCreateInfo fci = {ST(FENCE_CREATE_INFO)};
  VkFence fence;
  CHECK(vkCreateFence(dev, &fci, NULL, &fence));

  printf("groups %u, default iters %u, timestampPeriod %g ns, %u valid bits\n", groups, iters,
         base.limits.timestampPeriod, tbits);
  int status = 0;
  for (int si = 0; si < nsh; si++) {
    char *path = shaders[si], *c1 = strchr(path, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    double flop = c1 ? strtod(c1 + 1, NULL) : 0; /* FILE.spv:FLOP[:ITERS] */
    uint32_t it = c2 ? (uint32_t)strtoul(c2 + 1, NULL, 0) : iters;
    if (c1)
      *c1 = '\0';
    char name[64];
    snprintf(name, sizeof name, "%s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    if (strstr(name, ".spv"))
      *strstr(name, ".spv") = '\0';
    Spirv sp;
    if (!read_spirv(path, &sp) || flop <= 0 || it == 0) {
      fprintf(stderr, "coopmat_peak: %s: unreadable SPIR-V, or FLOP/ITERS missing\n", path);
      status = 1;
      free(sp.code);
      continue;
    }
    const char *lacks = sp.coopmat_nv && !has_nv                       ? "VK_NV_cooperative_matrix"
                        : sp.float16 && !f12.shaderFloat16             ? "shaderFloat16"
                        : sp.sb16 && !f11.storageBuffer16BitAccess     ? "storageBuffer16BitAccess"
                        : sp.vk_memory_model && !f12.vulkanMemoryModel ? "vulkanMemoryModel"
                                                                       : NULL;
    if (lacks) {
      printf("SKIP   %-28s the device lacks %s\n", name, lacks);
      free(sp.code);
      continue;
    }
    VkShaderModuleCreateInfo smci = {ST(SHADER_MODULE_CREATE_INFO), .codeSize = sp.words * 4u,
                                     .pCode = sp.code};
    VkShaderModule mod;
    CHECK(vkCreateShaderModule(dev, &smci, NULL, &mod));
    free(sp.code);
    /* Full subgroups only where the local size is a multiple of the (required or max) size. */
    uint32_t sg = req32 ? 32 : ssp.maxSubgroupSize;
    bool full = ss.computeFullSubgroups && sg && sp.local[0] % sg == 0;
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss = {
        ST(PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO), .requiredSubgroupSize = 32};
    VkComputePipelineCreateInfo cpi = {
        ST(COMPUTE_PIPELINE_CREATE_INFO),
        .flags = has_exec
                     ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR |
                           (dump ? VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR : 0)
                     : 0,
        .stage = {ST(PIPELINE_SHADER_STAGE_CREATE_INFO), .pNext = req32 ? &rss : NULL,
                  .flags = full ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod, .pName = "main"},
        .layout = pl};
    VkPipeline pipe;
    /* A cache of its own per shader, so that --dump finds this pipeline's code alone in it. */
    VkPipelineCacheCreateInfo pcci = {ST(PIPELINE_CACHE_CREATE_INFO)};
    VkPipelineCache cache = VK_NULL_HANDLE;
    if (dump)
      CHECK(vkCreatePipelineCache(dev, &pcci, NULL, &cache));
    VkResult r = vkCreateComputePipelines(dev, cache, 1, &cpi, NULL, &pipe);
    vkDestroyShaderModule(dev, mod, NULL);
    if (dump && r == VK_SUCCESS) {
      size_t n = 0;
      CHECK(vkGetPipelineCacheData(dev, cache, &n, NULL));
      unsigned char *data = malloc(n + 1);
      CHECK(vkGetPipelineCacheData(dev, cache, &n, data));
      char path[512];
      snprintf(path, sizeof path, "%s/%s.cache", dump, name);
      write_file(path, data, n);
      printf("%s: pipeline cache %zu bytes: %s\n", name, n, path);
      free(data);
      if (has_exec)
        dump_representations(dev, pipe, dump, name);
    }
    if (dump)
      vkDestroyPipelineCache(dev, cache, NULL);
    if (r != VK_SUCCESS) { /* e.g. a shape the driver does not run: report, go on */
      printf("FAIL   %-28s vkCreateComputePipelines: VkResult %d %s\n", name, r, result_name(r));
      status = 1;
      continue;
    }
    printf("%s: local size %ux%ux%u%s%s, %g FLOP/workgroup/iter, iters %u\n", name, sp.local[0],
           sp.local[1], sp.local[2], req32 ? ", subgroup size 32" : "",
           full ? ", full subgroups" : "", flop, it);
    if (has_exec)
      print_statistics(dev, pipe);

    /* One command buffer, re-submitted: reset queries, timestamp, dispatch, timestamp. */
    VkCommandBuffer cb;
    CHECK(vkAllocateCommandBuffers(dev, &cbai, &cb));
    VkCommandBufferBeginInfo cbbi = {ST(COMMAND_BUFFER_BEGIN_INFO)};
    CHECK(vkBeginCommandBuffer(cb, &cbbi));
    vkCmdResetQueryPool(cb, qp, 0, 2);
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
    vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof it, &it);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
    vkCmdDispatch(cb, groups, 1, 1);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
    CHECK(vkEndCommandBuffer(cb));
    double ms[TIMED];
    for (int rep = 0; rep < WARMUP + TIMED; rep++) { /* a separate submit + wait each */
      VkSubmitInfo sub = {ST(SUBMIT_INFO), .commandBufferCount = 1, .pCommandBuffers = &cb};
      CHECK(vkQueueSubmit(queue, 1, &sub, fence));
      CHECK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
      CHECK(vkResetFences(dev, 1, &fence));
      uint64_t ts[2];
      CHECK(vkGetQueryPoolResults(dev, qp, 0, 2, sizeof ts, ts, sizeof ts[0],
                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
      if (rep >= WARMUP)
        ms[rep - WARMUP] = (double)((ts[1] - ts[0]) & tmask) * base.limits.timestampPeriod * 1e-6;
    }
    for (int i = 1; i < TIMED; i++) /* insertion sort, for the median */
      for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
        double t = ms[j];
        ms[j] = ms[j - 1], ms[j - 1] = t;
      }
    double med = (ms[TIMED / 2 - 1] + ms[TIMED / 2]) / 2;
    printf("RESULT %-28s %9.3f ms (min %.3f max %.3f) %9.2f TFLOP/s\n", name, med, ms[0],
           ms[TIMED - 1], (double)groups * it * flop / (med * 1e-3) / 1e12);
    vkDestroyPipeline(dev, pipe, NULL); /* the pool frees cb */
  }

  vkDestroyFence(dev, fence, NULL);
  vkDestroyQueryPool(dev, qp, NULL);
  vkDestroyCommandPool(dev, cpool, NULL);
  vkDestroyDescriptorPool(dev, dp, NULL);
  vkDestroyPipelineLayout(dev, pl, NULL);
  vkDestroyDescriptorSetLayout(dev, dsl, NULL);
  vkDestroyBuffer(dev, buf, NULL);
  vkFreeMemory(dev, mem, NULL);
  vkDestroyDevice(dev, NULL);
  vkDestroyInstance(inst, NULL);
  free(qfs), free(exts), free(pds), free(shaders);
  dlclose(lib);
  return status;
}
