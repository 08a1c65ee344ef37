# SPDX-License-Identifier: Apache-2.0
# The GPU layer's files, for a GPU plugin's CMakeLists (backends/cuda, later
# backends/hip) to build into its library: include(../gpu/sources.cmake),
# then add ${TESSERA_GPU_SOURCES} to its sources, ${TESSERA_GPU_INCLUDES} to
# its include directories, and compile its kernel module with
# -I ${TESSERA_GPU_KERNEL_DIR} (its module includes portable.cu).
set(TESSERA_GPU_DIR ${CMAKE_CURRENT_LIST_DIR})
set(TESSERA_GPU_KERNEL_DIR ${TESSERA_GPU_DIR}/kernels)
set(TESSERA_GPU_INCLUDES ${TESSERA_GPU_DIR} ${TESSERA_GPU_KERNEL_DIR})
set(TESSERA_GPU_SOURCES
  ${TESSERA_GPU_DIR}/configs.c
  ${TESSERA_GPU_DIR}/device.c
  ${TESSERA_GPU_DIR}/memory.c
  ${TESSERA_GPU_DIR}/ops.c
  ${TESSERA_GPU_DIR}/ops_gemm.c
  ${TESSERA_GPU_DIR}/queue.c
  ${TESSERA_GPU_DIR}/select.c)
file(GLOB TESSERA_GPU_KERNEL_SOURCES CONFIGURE_DEPENDS ${TESSERA_GPU_KERNEL_DIR}/*.cu
     ${TESSERA_GPU_KERNEL_DIR}/*.h)
