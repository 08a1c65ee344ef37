# SPDX-License-Identifier: Apache-2.0
# `tessera devices --verbose` must name a skipped plugin and say why, say why a
# loaded plugin found no device (its last log message, without TESSERA_LOG),
# and list the directories searched, in order, with whether each exists.
# Run by ctest: cmake -DCLI=... -DCPU_MANIFEST=... -DNO_ENTRY_LIBRARY=...
#                     -DNO_DEVICES_LIBRARY=... -DARCH=... -DWORK_DIR=...
#                     -P cli_verbose.cmake
foreach(var CLI CPU_MANIFEST NO_ENTRY_LIBRARY NO_DEVICES_LIBRARY ARCH WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "cli_verbose.cmake: -D${var}=... is required")
  endif()
endforeach()

set(plugins_dir ${WORK_DIR}/plugins.d)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${plugins_dir})
file(COPY ${CPU_MANIFEST} DESTINATION ${plugins_dir})
file(WRITE ${plugins_dir}/noentry.conf "library = ${NO_ENTRY_LIBRARY}\nabi = 1\narch = ${ARCH}\n")
file(WRITE ${plugins_dir}/nodevices.conf "library = ${NO_DEVICES_LIBRARY}\nabi = 1\narch = ${ARCH}\n")

set(ENV{TESSERA_PLUGIN_PATH} ${WORK_DIR}/missing.d:${plugins_dir})
set(ENV{XDG_CONFIG_HOME} ${WORK_DIR}/xdg)
foreach(var TESSERA_BACKENDS TESSERA_DISABLE_BACKENDS TESSERA_ADD_PLUGIN_PATH TESSERA_DEVICE
            TESSERA_LOG)
  unset(ENV{${var}})
endforeach()
execute_process(COMMAND ${CLI} devices --verbose RESULT_VARIABLE status
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE ${WORK_DIR})

message("---- tessera devices --verbose (stdout) ----\n${out}---- stderr ----\n${err}----")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "tessera devices --verbose exited with ${status}")
endif()
set(all "${out}${err}")
foreach(needle noentry tsr_plugin_entry cpu "no widget found: /dev/widget0 is missing (fixture)"
               "${WORK_DIR}/missing.d (does not exist)" "${plugins_dir} (exists, 3 manifests)")
  string(FIND "${all}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "tessera devices --verbose does not mention \"${needle}\"")
  endif()
endforeach()
# In search order: the missing directory first.
string(FIND "${out}" "${WORK_DIR}/missing.d (" missing_at)
string(FIND "${out}" "${plugins_dir} (" plugins_at)
if(missing_at GREATER plugins_at)
  message(FATAL_ERROR "tessera devices --verbose lists the directories out of order")
endif()
