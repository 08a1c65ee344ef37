# SPDX-License-Identifier: Apache-2.0
# CLI scenarios of the CUDA plugin, run by ctest:
#   cmake -DCASE=devices_verbose -DTESSERA=... -DPLUGIN_PATH=... -P cli_cases.cmake
# devices_verbose: with the driver forced missing, `tessera devices --verbose`
#   lists the cuda plugin as loaded with 0 devices, and TESSERA_LOG=debug says
#   why.
foreach(var CASE TESSERA PLUGIN_PATH)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "cli_cases.cmake: -D${var}=... is required")
  endif()
endforeach()
set(ENV{TESSERA_PLUGIN_PATH} ${PLUGIN_PATH})
foreach(var TESSERA_BACKENDS TESSERA_DISABLE_BACKENDS TESSERA_ADD_PLUGIN_PATH TESSERA_DEVICE
            TESSERA_CONFIG TESSERA_LOG)
  unset(ENV{${var}})
endforeach()

function(require haystack needle what)
  string(FIND "${haystack}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what} does not mention \"${needle}\"")
  endif()
endfunction()

if(CASE STREQUAL "devices_verbose")
  set(ENV{TESSERA_CUDA_DRIVER} /nonexistent/libcuda-for-tessera-tests.so.1)
  set(ENV{TESSERA_LOG} debug)
  execute_process(COMMAND ${TESSERA} devices --verbose RESULT_VARIABLE status
                  OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("---- tessera devices --verbose (stdout) ----\n${out}---- stderr ----\n${err}----")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "tessera devices --verbose exited with ${status}")
  endif()
  require("${out}" "cuda: loaded, ABI 2, 0 devices" "tessera devices --verbose")
  require("${err}" "libcuda-for-tessera-tests.so.1" "the debug log")
  require("${err}" "no devices" "the debug log")
else()
  message(FATAL_ERROR "cli_cases.cmake: unknown CASE '${CASE}'")
endif()
