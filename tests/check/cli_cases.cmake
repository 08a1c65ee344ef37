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
             "device key: +cpu" "\ndetails:")

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
  # The widest FMA loop the CPU and the OS support, as /proc/cpuinfo sees it.
  set(isa "generic")
  if(EXISTS /proc/cpuinfo)
    file(READ /proc/cpuinfo cpuinfo)
    if(cpuinfo MATCHES "flags[^\n]* avx512f[ \n]")
      set(isa "avx512f")
    elseif(cpuinfo MATCHES "flags[^\n]* avx2[ \n]" AND cpuinfo MATCHES "flags[^\n]* fma[ \n]")
      set(isa "avx2\\+fma")
    endif()
  endif()
  run(EXIT zero ARGS bench --device cpu --short --op softmax --json ${WORK_DIR}/bench.json
      EXPECT "copy: +[0-9.]+ GB/s \\(read \\+ write"
             "FMA peak: +[0-9.]+ GFLOP/s \\(f32, ${isa} loop of independent FMAs on [1-9][0-9]* threads"
             "softmax +f32 +1024x1024 +[0-9.]+ +- +[0-9.]+ [0-9]+% copy +[0-9.]+ ")
  file(READ ${WORK_DIR}/bench.json json)
  foreach(needle "\"op\": \"softmax\"" "\"median_ms\": [0-9]" "\"peak_fraction\": [0-9]"
                 "\"peak\": \"copy\"" "\"copy_gbs_around\": [0-9]" "\"copy_gbs\": [0-9]" "\"fma_peak\": {\"gflops\": [0-9]"
                 "\"suite\": \"default\"")
    if(NOT json MATCHES "${needle}")
      message(FATAL_ERROR "bench.json lacks ${needle}:\n${json}")
    endif()
  endforeach()

elseif(CASE STREQUAL "bench_openblas")
  # f32 GEMM rows carry OpenBLAS's times (three variants, each in a child
  # process that proves it used the same inputs) when the library is there.
  run(EXIT zero ARGS bench --device cpu --short --op gemm --json ${WORK_DIR}/bench.json
      EXPECT "gemm +f32 +256x256x256 +[0-9.]+ +[0-9.]+ " "gemm +bf16 +512x512x512"
      REJECT "differ from tessera|differs from tessera")
  if(LAST_OUTPUT MATCHES "OpenBLAS: +as installed +core ")
    set(number "[0-9]+\\.[0-9]+")
    foreach(size 256 512)
      if(NOT LAST_OUTPUT MATCHES
         "gemm +f32 +${size}x${size}x${size} [^\n]*% fma +- +${number} +${number} +${number} +${number} +${number} +${number} +(${number}|-)\n")
        message(FATAL_ERROR "the f32 ${size}^3 row lacks OpenBLAS times and ratios")
      endif()
    endforeach()
    if(NOT LAST_OUTPUT MATCHES "OPENBLAS_CORETYPE=SkylakeX +core SkylakeX")
      message(FATAL_ERROR "OPENBLAS_CORETYPE=SkylakeX did not reach the child")
    endif()
    file(READ ${WORK_DIR}/bench.json json)
    if(NOT json MATCHES "\"openblas_skylakex_over_tessera\": [0-9]")
      message(FATAL_ERROR "bench.json lacks the OpenBLAS ratios:\n${json}")
    endif()
  else()
    message("OpenBLAS is not installed: only the tessera rows were checked")
    if(NOT LAST_OUTPUT MATCHES "not available")
      message(FATAL_ERROR "bench says neither what OpenBLAS core it used nor why it has none")
    endif()
  endif()

elseif(CASE STREQUAL "bench_suite")
  # The acceptance suite's rows, each judged against its threshold; a
  # verdict is a finding about speed, so the exit status stays 0 either way.
  run(EXIT zero ARGS bench --suite cpu --short --op rmsnorm --json ${WORK_DIR}/suite.json
      EXPECT "rmsnorm +f32 +8192x8192 "
             "rmsnorm f32 8192x8192: GB/s / copy bandwidth +[0-9.]+ +>= 0.8 +- +(PASS|FAIL)"
             "suite cpu: [01] PASS, [01] FAIL, 0 n/a")
  file(READ ${WORK_DIR}/suite.json json)
  foreach(needle "\"suite\": \"cpu\"" "\"criteria\": \\["
                 "\"criterion\": \"rmsnorm f32 8192x8192: GB/s / copy bandwidth\""
                 "\"threshold\": 0.8" "\"verdict\": \"(PASS|FAIL)\"")
    if(NOT json MATCHES "${needle}")
      message(FATAL_ERROR "suite.json lacks ${needle}:\n${json}")
    endif()
  endforeach()
  # The OpenBLAS criteria of one GEMM row (--shape picks it).
  run(EXIT zero ARGS bench --suite cpu --short --op gemm --shape 1024x1024x1024
      EXPECT "gemm +f32 +1024x1024x1024 "
      REJECT "gemm +f32 +2048x2048x2048" "differ from tessera|differs from tessera")
  if(LAST_OUTPUT MATCHES "OpenBLAS: +as installed +core ")
    foreach(variant "SkylakeX \\(core SkylakeX\\) +[0-9.]+ +>= 0.95"
                    "as installed \\(core [A-Za-z0-9]+\\) +[0-9.]+ +>= 4"
                    "Prescott \\(core Prescott\\) +[0-9.]+ +>= 4")
      if(NOT LAST_OUTPUT MATCHES "gemm f32 1024x1024x1024: tessera / OpenBLAS ${variant} +[0-9.]+ +(PASS|FAIL)")
        message(FATAL_ERROR "no judged criterion against OpenBLAS ${variant}")
      endif()
    endforeach()
  endif()
  # A criterion whose reference row was left out cannot be judged.
  run(EXIT zero ARGS bench --suite cpu --short --op attention --device cpu
      EXPECT "attention f32 1x8x8x2048x2048x128: GFLOP/s / tessera's gemm f32 4096x4096x4096 +- +>= 0.5 +- +n/a \\(reference row not run\\)")
  run(EXIT nonzero ARGS bench --suite gpu
      EXPECT "unknown suite 'gpu' \\(suites: default, cpu, cuda, vulkan\\)")
  # suite vulkan runs on Vulkan GPUs (with CUDA devices as the reference);
  # the CPU, and a CPU Vulkan device not named, are skipped, each saying so.
  run(EXIT zero ARGS bench --suite vulkan --short
      EXPECT "skipped: suite vulkan runs on Vulkan devices \\(and CUDA ones for reference\\)"
      REJECT "suite vulkan: [1-9]")

elseif(CASE STREQUAL "openblas_child")
  # The hidden subcommand bench runs OpenBLAS through checks its arguments
  # before loading anything.
  run(EXIT nonzero ARGS __openblas-sgemm EXPECT "--probe or --shape MxNxK")
  run(EXIT nonzero ARGS __openblas-sgemm --shape 4x8 EXPECT "shape '4x8' does not fit gemm")
  run(EXIT nonzero ARGS __openblas-sgemm --shape 8x8x8 --sets 7 EXPECT "--sets 1..3")

elseif(CASE STREQUAL "cublaslt_probe")
  # bench's cuBLASLt loader: a path that is not there is reported, not fatal;
  # bench on a device without CUDA never asks for it.
  set(ENV{TESSERA_CUBLASLT} /nonexistent/libcublasLt.so.13)
  run(EXIT nonzero ARGS __cublaslt-probe
      EXPECT "cuBLASLt: not available: TESSERA_CUBLASLT=/nonexistent/libcublasLt.so.13")
  set(ENV{TESSERA_CUBLASLT} ${WORK_DIR})
  file(MAKE_DIRECTORY ${WORK_DIR})
  run(EXIT nonzero ARGS __cublaslt-probe EXPECT "no libcublasLt.so.13/.12/.so there")
  unset(ENV{TESSERA_CUBLASLT})

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
