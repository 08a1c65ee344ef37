# SPDX-License-Identifier: Apache-2.0
# `tessera check --quick` on vulkan:0 in two set-ups (cmake -P, CASE=...):
#   fallbacks   TESSERA_VULKAN_NO_SUBGROUPS=1 and TESSERA_VULKAN_NO_MAPPING=1:
#               the shared-memory reductions and the staging copies
#   validation  TESSERA_VULKAN_VALIDATION=1: VK_LAYER_KHRONOS_validation
#               enabled; any message it reports as an error fails the test
# Prints "SKIPPED:" (the test's skip expression) without a Vulkan device.
set(ENV{TESSERA_PLUGIN_PATH} ${PLUGIN_PATH})
execute_process(COMMAND ${TESSERA} devices OUTPUT_VARIABLE devices ERROR_VARIABLE devices_err)
if(NOT devices MATCHES "vulkan:0")
  message("SKIPPED: no Vulkan device")
  return()
endif()

if(CASE STREQUAL "fallbacks")
  set(ENV{TESSERA_VULKAN_NO_SUBGROUPS} 1)
  set(ENV{TESSERA_VULKAN_NO_MAPPING} 1)
elseif(CASE STREQUAL "validation")
  set(ENV{TESSERA_VULKAN_VALIDATION} 1)
  set(ENV{TESSERA_LOG} info)
else()
  message(FATAL_ERROR "unknown case ${CASE}")
endif()
execute_process(COMMAND ${TESSERA} check --device vulkan:0 --quick
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}")
if(NOT rc EQUAL 0)
  message("${err}")
  message(FATAL_ERROR "tessera check --quick on vulkan:0 failed (exit ${rc})")
endif()
if(CASE STREQUAL "validation")
  if(NOT err MATCHES "vulkan validation layer enabled")
    message("${err}")
    message(FATAL_ERROR "the validation layer was not enabled (vulkan-validationlayers missing?)")
  endif()
  string(REGEX MATCHALL "vulkan validation error: [^\n]*" errors "${err}")
  list(LENGTH errors count)
  if(count GREATER 0)
    list(JOIN errors "\n" shown)
    message(FATAL_ERROR "${count} validation error(s):\n${shown}")
  endif()
  message("validation layer: no errors")
endif()
