# Command-line tests of `tessera`, one scenario per ctest (-DCASE=...).
# Run by ctest as:
#   cmake -DCASE=name -DTESSERA=<tessera> -DPLUGIN_PATH=<plugins.d>
#         -DFAULTY_PATH=<faulty plugins.d> -DWORK_DIR=<scratch dir> -P cli_cases.cmake
# Each scenario runs the tool, then checks its exit status and output, so a
# wrong message fails the test as surely as a wrong exit status.
foreach(var CASE TESSERA PLUGIN_PATH FAULTY_PATH WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "cli_cases.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
# A clean environment: only the plugins and tuning files these tests name.
foreach(var TESSERA_BACKENDS TESSERA_DISABLE_BACKENDS TESSERA_ADD_PLUGIN_PATH TESSERA_DEVICE
            TESSERA_CONFIG TESSERA_LOG TESSERA_FAULT)
  unset(ENV{${var}})
endforeach()
set(ENV{TESSERA_PLUGIN_PATH} ${PLUGIN_PATH})
set(ENV{XDG_CONFIG_HOME} ${WORK_DIR}/xdg-config)
set(ENV{XDG_CACHE_HOME} ${WORK_DIR}/xdg-cache)
set(ENV{TESSERA_TUNING_DB} ${WORK_DIR}/no-user-db.tsv)

# run(EXIT zero|nonzero ARGS args... [EXPECT regex...] [REJECT regex...])
# Runs tessera with ARGS; fails unless the exit status is as told, every
# EXPECT regex matches stdout+stderr and no REJECT regex does.
function(run)
  cmake_parse_arguments(R "" "EXIT" "ARGS;EXPECT;REJECT" ${ARGN})
  execute_process(COMMAND ${TESSERA} ${R_ARGS} RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${R_ARGS}")
  message("---- tessera ${shown} (exit ${status}) ----\n${out}---- stderr ----\n${err}----")
  set(all "${out}${err}")
  if(R_EXIT STREQUAL "zero" AND NOT status EQUAL 0)
    message(FATAL_ERROR "'tessera ${shown}' exited with ${status}, expected 0")
  endif()
  if(R_EXIT STREQUAL "nonzero" AND (status EQUAL 0 OR NOT status MATCHES "^[0-9]+$"))
    message(FATAL_ERROR "'tessera ${shown}' exited with ${status}, expected a failure status")
  endif()
  foreach(regex ${R_EXPECT})
    if(NOT all MATCHES "${regex}")
      message(FATAL_ERROR "'tessera ${shown}': output does not match \"${regex}\"")
    endif()
  endforeach()
  foreach(regex ${R_REJECT})
    if(all MATCHES "${regex}")
      message(FATAL_ERROR "'tessera ${shown}': output matches \"${regex}\" but must not")
    endif()
  endforeach()
  set(LAST_OUTPUT "${all}" PARENT_SCOPE)
endfunction()

if(CASE STREQUAL "devices_verbose")
  run(EXIT zero ARGS devices --verbose
      EXPECT "cpu:0" "cpu: loaded, ABI 1, [1-9][0-9]* device" "manifest: .*cpu\\.conf")

elseif(CASE STREQUAL "info")
  run(EXIT zero ARGS info cpu:0
      EXPECT "selector: +cpu:0" "backend: +cpu" "compute units: +[1-9]" "ops: +gemm"
             "device key: +cpu")

elseif(CASE STREQUAL "tune_explain")
  set(db ${WORK_DIR}/tuning.tsv)
  run(EXIT zero ARGS explain --device cpu --op gemm --dtype f32 --shape 24x40x16
      EXPECT "rule: +heuristic" "candidates \\([1-9]")
  run(EXIT zero ARGS tune --device cpu --op gemm --dtype f32 --shape 24x40x16 --db ${db}
      EXPECT "fastest: " "recorded .* in ${db}")
  if(NOT EXISTS ${db})
    message(FATAL_ERROR "tessera tune did not write ${db}")
  endif()
  file(READ ${db} rows)
  message("---- ${db} ----\n${rows}----")
  if(NOT rows MATCHES "gemm[ \t]+f32[ \t]")
    message(FATAL_ERROR "${db} has no gemm f32 row")
  endif()
  run(EXIT zero ARGS explain --device cpu --op gemm --dtype f32 --shape 24x40x16 --db ${db}
      EXPECT "rule: +tuning database" "source: +${db}:[0-9]+")
  # The database given through the environment works the same way.
  set(ENV{TESSERA_TUNING_DB} ${db})
  run(EXIT zero ARGS explain --device cpu --op gemm --dtype f32 --shape 24x40x16
      EXPECT "rule: +tuning database")

elseif(CASE STREQUAL "reproduce_case")
  # The command a failure line prints runs exactly one case.
  run(EXIT zero ARGS check --device cpu:0 --op gemm --dtype bf16 --case 7
      EXPECT "check: 1 passed, 0 failed, 0 errors, 0 skipped" "cpu:0 +1 PASS")
  run(EXIT nonzero ARGS check --device cpu:0 --op gemm --case 999
      EXPECT "gemm has cases 0 to [0-9]+, not 999")
  run(EXIT nonzero ARGS check --device cpu:0 --case 3 EXPECT "--case needs --op")

elseif(CASE STREQUAL "unknown_op")
  run(EXIT nonzero ARGS check --device cpu --op no_such_op
      EXPECT "unknown op 'no_such_op' \\(ops: gemm, grouped_gemm, attention")
  run(EXIT nonzero ARGS tune --device cpu --op no_such_op --shape 8x8x8
      EXPECT "unknown op 'no_such_op'")
  run(EXIT nonzero ARGS explain --device cpu --op gemm --shape 8x8 EXPECT "shape '8x8' does not fit gemm")
  run(EXIT nonzero ARGS check --dtype f64 EXPECT "unknown dtype 'f64'")
  run(EXIT nonzero ARGS frobnicate EXPECT "unknown command 'frobnicate'")
  run(EXIT nonzero ARGS check --bogus EXPECT "unknown argument '--bogus'")

elseif(CASE STREQUAL "unknown_device")
  run(EXIT nonzero ARGS check --device nosuch:3 --op gemm --case 0 EXPECT "no device 'nosuch:3'")
  run(EXIT nonzero ARGS info nosuch:3 EXPECT "no device 'nosuch:3'")
  run(EXIT nonzero ARGS bench --device cuda:9 --short EXPECT "no device 'cuda:9'")

elseif(CASE STREQUAL "help")
  run(EXIT zero ARGS help EXPECT "usage: tessera" "attention +BxHqxHkvxSqxSkvxD" "rope +BxSxHxD")
  run(EXIT zero ARGS --version EXPECT "tessera [0-9]+\\.[0-9]+\\.[0-9]+")
  run(EXIT nonzero ARGS EXPECT "usage: tessera")

elseif(CASE STREQUAL "bench_short")
  run(EXIT zero ARGS bench --device cpu --short --op softmax --json ${WORK_DIR}/bench.json
      EXPECT "copy bandwidth: [0-9.]+ GB/s" "softmax +f32 +1024x1024")
  file(READ ${WORK_DIR}/bench.json json)
  if(NOT json MATCHES "\"op\": \"softmax\"" OR NOT json MATCHES "\"median_ms\": [0-9]")
    message(FATAL_ERROR "bench.json lacks the softmax row:\n${json}")
  endif()

elseif(CASE STREQUAL "faulty_none")
  # The reference device passes everything: the bounds leave room for
  # rounding to the output dtype. Reports are written and well formed.
  set(ENV{TESSERA_PLUGIN_PATH} ${FAULTY_PATH})
  set(json ${WORK_DIR}/check.json)
  set(junit ${WORK_DIR}/check.xml)
  run(EXIT zero ARGS check --all --json ${json} --junit ${junit}
      EXPECT "faulty:0 +[0-9]+ PASS" "check: [1-9][0-9]* passed, 0 failed, 0 errors, 0 skipped")
  file(READ ${json} json_text)
  file(READ ${junit} junit_text)
  foreach(needle "\"status\": \"pass\"" "\"op\": \"attention\"" "\"reproduce\": \"tessera check")
    string(FIND "${json_text}" "${needle}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "check.json lacks ${needle}")
    endif()
  endforeach()
  foreach(needle "<testsuites name=\"tessera check\"" "<testsuite name=\"faulty:0\""
                 "classname=\"faulty:0.rope\"" "failures=\"0\"")
    string(FIND "${junit_text}" "${needle}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "check.xml lacks ${needle}")
    endif()
  endforeach()

elseif(CASE MATCHES "^faulty_([a-z_]+)__([a-z_]+)$")
  # faulty_<fault>__<op>: the fault must fail cases of that op (and only
  # that op), each failure naming the command that reproduces it.
  set(fault ${CMAKE_MATCH_1})
  set(op ${CMAKE_MATCH_2})
  set(ENV{TESSERA_PLUGIN_PATH} ${FAULTY_PATH})
  set(ENV{TESSERA_FAULT} ${fault})
  set(junit ${WORK_DIR}/check.xml)
  run(EXIT nonzero ARGS check --all --junit ${junit}
      EXPECT "FAIL faulty:0 ${op} [a-z0-9]+ case [0-9]+ \\[[^\n]*\\]: [^\n]* \\| reproduce: tessera check --device faulty:0 --op ${op} --dtype [a-z0-9]+ --case [0-9]+"
      REJECT "ERROR faulty:0")
  # Only the faulty op fails (the bias fault touches gemm alone, ...).
  string(REGEX MATCHALL "FAIL faulty:0 [a-z_]+ " fails "${LAST_OUTPUT}")
  list(REMOVE_DUPLICATES fails)
  if(NOT fails STREQUAL "FAIL faulty:0 ${op} ")
    message(FATAL_ERROR "fault ${fault} failed other ops too: ${fails}")
  endif()
  file(READ ${junit} junit_text)
  if(NOT junit_text MATCHES "<failure message=")
    message(FATAL_ERROR "check.xml records no failure for fault ${fault}")
  endif()
  # The printed command reproduces the failure on its own.
  string(REGEX MATCH "reproduce: (tessera check [^\n]*)" line "${LAST_OUTPUT}")
  string(REPLACE "tessera check " "" again "${CMAKE_MATCH_1}")
  separate_arguments(again UNIX_COMMAND "${again}")
  run(EXIT nonzero ARGS check ${again} EXPECT "check: 0 passed, 1 failed")

elseif(CASE MATCHES "^faulty_([a-z_]+)$")
  # Faults every op shows: stray writes, unwritten elements, modified inputs.
  set(fault ${CMAKE_MATCH_1})
  set(ENV{TESSERA_PLUGIN_PATH} ${FAULTY_PATH})
  set(ENV{TESSERA_FAULT} ${fault})
  if(fault STREQUAL "overrun")
    set(expect "guard band after [a-z_]+ overwritten")
  elseif(fault STREQUAL "unwritten")
    set(expect "= nan \\(not finite\\)")
  elseif(fault STREQUAL "input")
    set(expect "input [a-z_]+ modified")
  else()
    set(expect "relative error")
  endif()
  run(EXIT nonzero ARGS check --all --quick EXPECT "${expect}" "check: [0-9]+ passed, [1-9][0-9]* failed")

elseif(CASE STREQUAL "compare")
  # Two devices on the same inputs: each against the reference and against
  # each other.
  set(ENV{TESSERA_PLUGIN_PATH} "${PLUGIN_PATH}:${FAULTY_PATH}")
  run(EXIT zero ARGS check --compare cpu:0,faulty:0 --quick
      EXPECT "cpu:0~faulty:0 +[0-9]+ PASS" "0 failed, 0 errors")

else()
  message(FATAL_ERROR "cli_cases.cmake: unknown case ${CASE}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
