# SPDX-License-Identifier: Apache-2.0
# `tessera devices --json` must print valid JSON (python3 -m json.tool) with
# the devices, the plugin reports and the directories searched, strings
# escaped: a manifest name with a quote and a backslash, a library path with a
# tab, and a manifest name that is not UTF-8.
# Run by ctest: cmake -DCLI=... -DPYTHON=... -DCPU_MANIFEST=...
#                     -DNO_DEVICES_LIBRARY=... -DARCH=... -DWORK_DIR=...
#                     -P cli_json.cmake
foreach(var CLI PYTHON CPU_MANIFEST NO_DEVICES_LIBRARY ARCH WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "cli_json.cmake: -D${var}=... is required")
  endif()
endforeach()

set(plugins_dir ${WORK_DIR}/plugins.d)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${plugins_dir})
file(COPY ${CPU_MANIFEST} DESTINATION ${plugins_dir})
file(WRITE ${plugins_dir}/nodevices.conf "library = ${NO_DEVICES_LIBRARY}\nabi = 1\narch = ${ARCH}\n")
file(WRITE "${plugins_dir}/q\"uo\\te.conf" "library = /nonexistent/tab\there.so\narch = ${ARCH}\n")
string(ASCII 255 not_utf8)
file(WRITE "${plugins_dir}/bad${not_utf8}name.conf" "library = /nonexistent/x.so\n")

set(ENV{TESSERA_PLUGIN_PATH} ${WORK_DIR}/missing.d:${plugins_dir})
set(ENV{XDG_CONFIG_HOME} ${WORK_DIR}/xdg)
foreach(var TESSERA_BACKENDS TESSERA_DISABLE_BACKENDS TESSERA_ADD_PLUGIN_PATH TESSERA_DEVICE
            TESSERA_LOG)
  unset(ENV{${var}})
endforeach()
execute_process(COMMAND ${CLI} devices --json RESULT_VARIABLE status
                OUTPUT_FILE ${WORK_DIR}/devices.json ERROR_VARIABLE err)
file(READ ${WORK_DIR}/devices.json out)
message("---- tessera devices --json (stdout) ----\n${out}---- stderr ----\n${err}----")
if(NOT status EQUAL 0)
  file(REMOVE_RECURSE ${WORK_DIR})
  message(FATAL_ERROR "tessera devices --json exited with ${status}")
endif()

execute_process(COMMAND ${PYTHON} -m json.tool ${WORK_DIR}/devices.json
                RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  file(REMOVE_RECURSE ${WORK_DIR})
  message(FATAL_ERROR "tessera devices --json is not valid JSON: ${err}")
endif()

# The content, read back by Python's json module.
file(WRITE ${WORK_DIR}/check.py [=[
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
plugins_dir, missing_dir = sys.argv[2], sys.argv[3]
cpu = [d for d in doc["devices"] if d["backend"] == "cpu"]
assert cpu, "no cpu device"
for key in ("selector", "backend", "name", "vendor", "type", "memory_bytes", "compute_units",
            "device_key", "driver_version"):
    assert key in cpu[0], "device lacks " + key
assert isinstance(cpu[0]["memory_bytes"], int) and cpu[0]["selector"] == "cpu:0"
plugins = {p["name"]: p for p in doc["plugins"]}
for p in plugins.values():
    for key in ("name", "manifest", "library", "state", "reason"):
        assert key in p, "plugin report lacks " + key
assert plugins["cpu"]["state"] == "loaded", plugins["cpu"]
assert "no widget found" in plugins["nodevices"]["reason"], plugins["nodevices"]
quoted = plugins['q"uo\\te']
assert quoted["library"] == "/nonexistent/tab\there.so", quoted
assert quoted["state"] == "skipped", quoted
assert any(name.startswith("bad") and name.endswith("name") for name in plugins), plugins.keys()
dirs = [(d["path"], d["exists"]) for d in doc["search_dirs"]]
assert dirs[0] == (missing_dir, False) and dirs[1] == (plugins_dir, True), dirs
print("devices --json: content as expected")
]=])
execute_process(COMMAND ${PYTHON} ${WORK_DIR}/check.py ${WORK_DIR}/devices.json ${plugins_dir}
                        ${WORK_DIR}/missing.d
                RESULT_VARIABLE status OUTPUT_VARIABLE check_out ERROR_VARIABLE err)
file(REMOVE_RECURSE ${WORK_DIR})
message("${check_out}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "tessera devices --json: unexpected content: ${err}")
endif()
