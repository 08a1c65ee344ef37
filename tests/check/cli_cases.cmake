# SPDX-License-Identifier: Apache-2.0
# Command-line tests of `tessera`, one scenario per ctest (-DCASE=...).
# Run by ctest as:
#   cmake -DCASE=name -DTESSERA=<tessera> -DPLUGIN_PATH=<plugins.d>
#         -DFAULTY_PATH=<faulty plugins.d> -DNARROW_PATH=<narrow plugins.d>
#         [-DPYTHON3=<python3>] -DWORK_DIR=<scratch dir> -P cli_cases.cmake
# Each scenario runs the tool, then checks its exit status and output, so a
# wrong message fails the test as surely as a wrong exit status.
foreach(var CASE TESSERA PLUGIN_PATH FAULTY_PATH NARROW_PATH WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "cli_cases.cmake: -D${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
# A clean environment: only the plugins and tuning files these tests name.
foreach(var TESSERA_BACKENDS TESSERA_DISABLE_BACKENDS TESSERA_ADD_PLUGIN_PATH TESSERA_DEVICE
            TESSERA_CONFIG TESSERA_LOG TESSERA_FAULT TESSERA_NARROW_CLOCK)
  unset(ENV{${var}})
endforeach()
set(ENV{TESSERA_PLUGIN_PATH} ${PLUGIN_PATH})
set(ENV{XDG_CONFIG_HOME} ${WORK_DIR}/xdg-config)
set(ENV{XDG_CACHE_HOME} ${WORK_DIR}/xdg-cache)
set(ENV{TESSERA_TUNING_DB} ${WORK_DIR}/no-user-db.tsv)

# run(EXIT zero|nonzero|<status> ARGS args... [EXPECT regex...] [REJECT regex...])
# Runs tessera with ARGS; fails unless the exit status is as told (a number:
# exactly that status), every EXPECT regex matches stdout+stderr and no
# REJECT regex does.
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
  if(R_EXIT MATCHES "^[0-9]+$" AND NOT status STREQUAL R_EXIT)
    message(FATAL_ERROR "'tessera ${shown}' exited with ${status}, expected ${R_EXIT}")
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

# OpenBLAS's SkylakeX kernels need AVX-512: forced on a CPU without it
# (OPENBLAS_CORETYPE=SkylakeX) they stop on an illegal instruction, which
# bench reports, leaving that column empty.
set(cpu_avx512f FALSE)
if(EXISTS /proc/cpuinfo)
  file(READ /proc/cpuinfo cpuinfo)
  if(cpuinfo MATCHES "flags[^\n]* avx512f[ \n]")
    set(cpu_avx512f TRUE)
  endif()
endif()

# expect_json(FILE regex...): every regex matches the file's text.
function(expect_json file)
  file(READ ${file} text)
  foreach(regex ${ARGN})
    if(NOT text MATCHES "${regex}")
      message(FATAL_ERROR "${file} does not match \"${regex}\":\n${text}")
    endif()
  endforeach()
endfunction()

if(CASE STREQUAL "devices_verbose")
  run(EXIT zero ARGS devices --verbose
      EXPECT "cpu:0" "cpu: loaded, ABI 2, [1-9][0-9]* device" "manifest: .*cpu\\.conf")

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
  run(EXIT 2 ARGS check --bogus EXPECT "unknown option '--bogus'")

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
             "softmax +f32 +1024x1024 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +- +[0-9.]+ [0-9]+% copy +[0-9.]+ ")
  file(READ ${WORK_DIR}/bench.json json)
  foreach(needle "\"op\": \"softmax\"" "\"median_ms\": [0-9]" "\"idle_call_ms\": [0-9]" "\"peak_fraction\": [0-9]"
                 "\"peak\": \"copy\"" "\"copy_gbs_around\": [0-9]" "\"copy_gbs\": [0-9]" "\"fma_peak\": {\"gflops\": [0-9]"
                 "\"suite\": \"default\"" "\"min_ms\": [0-9]" "\"max_ms\": [0-9]" "\"flags\": \\[")
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
    set(skylakex "${number} +${number}")
    if(NOT cpu_avx512f)
      set(skylakex "- +-")
    endif()
    foreach(size 256 512)
      if(NOT LAST_OUTPUT MATCHES
         "gemm +f32 +${size}x${size}x${size} [^\n]*% fma +- +${number} +${number} +${skylakex} +${number} +${number} +(${number}|-) +([~^]+|-)\n")
        message(FATAL_ERROR "the f32 ${size}^3 row lacks OpenBLAS times and ratios")
      endif()
    endforeach()
    if(NOT LAST_OUTPUT MATCHES "OPENBLAS_CORETYPE=SkylakeX +core SkylakeX")
      message(FATAL_ERROR "OPENBLAS_CORETYPE=SkylakeX did not reach the child")
    endif()
    file(READ ${WORK_DIR}/bench.json json)
    if(NOT json MATCHES "\"openblas_prescott_over_tessera\": [0-9]" OR
       (cpu_avx512f AND NOT json MATCHES "\"openblas_skylakex_over_tessera\": [0-9]"))
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
             "suite cpu-kernels: [01] PASS, [01] FAIL, 0 n/a")
  file(READ ${WORK_DIR}/suite.json json)
  foreach(needle "\"suite\": \"cpu-kernels\"" "\"criteria\": \\["
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
    set(skylakex "SkylakeX \\(core SkylakeX\\) +[0-9.]+ +>= 0.95 +[0-9.]+ +(PASS|FAIL)")
    if(NOT cpu_avx512f)
      set(skylakex "SkylakeX \\(core SkylakeX\\) +- +>= 0.95 +- +n/a \\(OpenBLAS SkylakeX not timed\\)")
    endif()
    foreach(variant "${skylakex}"
                    "as installed \\(core [A-Za-z0-9]+\\) +[0-9.]+ +>= 4 +[0-9.]+ +(PASS|FAIL)"
                    "Prescott \\(core Prescott\\) +[0-9.]+ +>= 4 +[0-9.]+ +(PASS|FAIL)")
      if(NOT LAST_OUTPUT MATCHES "gemm f32 1024x1024x1024: tessera / OpenBLAS ${variant}")
        message(FATAL_ERROR "no judged criterion against OpenBLAS ${variant}")
      endif()
    endforeach()
  endif()
  # A criterion whose reference row was left out cannot be judged.
  run(EXIT zero ARGS bench --suite cpu --short --op attention --device cpu
      EXPECT "attention f32 1x8x8x2048x2048x128: GFLOP/s / tessera's gemm f32 4096x4096x4096 +- +>= 0.5 +- +n/a \\(reference row not run\\)")
  run(EXIT nonzero ARGS bench --suite gpu
      EXPECT "unknown suite 'gpu': no gpu.suite in [^ ]*/share/tessera/bench/suites \\(suites there: cpu-kernels, cuda-llm, default, serving, vulkan-vs-cuda; short names: cpu, cuda, vulkan\\)")
  # suite vulkan runs on Vulkan GPUs (with CUDA devices as the reference);
  # the CPU, and a CPU Vulkan device not named, are skipped, each saying so.
  # Where none is, the suite ran nothing: a failure, not a silent success.
  run(EXIT 1 ARGS bench --suite vulkan --short
      EXPECT "skipped: suite vulkan-vs-cuda runs on Vulkan devices \\(and CUDA ones for reference\\)"
             "bench: no case matched"
      REJECT "suite vulkan-vs-cuda: [1-9]")

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
  # The reference device passes everything it takes (not the serving forms
  # of attention: it lacks kv_append): the bounds leave room for rounding to
  # the output dtype. Reports are written and well formed.
  set(ENV{TESSERA_PLUGIN_PATH} ${FAULTY_PATH})
  set(json ${WORK_DIR}/check.json)
  set(junit ${WORK_DIR}/check.xml)
  run(EXIT zero ARGS check --all --json ${json} --junit ${junit}
      EXPECT "faulty:0 +[0-9]+ PASS" "check: [1-9][0-9]* passed, 0 failed, 0 errors, [0-9]+ skipped")
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

elseif(CASE STREQUAL "help_command")
  # Each command's --help is that command's usage, with its options.
  run(EXIT 0 ARGS check --help
      EXPECT "usage: tessera check " "--quick" "--json FILE" "--list"
      REJECT "usage: tessera bench" "tessera COMMAND")
  run(EXIT 0 ARGS bench --help
      EXPECT "usage: tessera bench " "--shape SHAPE" "--dtype D" "--list" "gemm +MxNxK"
             "\\^ " "~ "
      REJECT "usage: tessera check" "tessera COMMAND")
  run(EXIT 0 ARGS help bench EXPECT "usage: tessera bench " REJECT "usage: tessera check")
  run(EXIT 0 ARGS run --help EXPECT "usage: tessera run " "--short" "--list"
      REJECT "usage: tessera bench")
  run(EXIT 0 ARGS tune -h EXPECT "usage: tessera tune " "gemm +MxNxK" REJECT "usage: tessera run")
  run(EXIT 0 ARGS devices --help EXPECT "usage: tessera devices " REJECT "usage: tessera tune")
  run(EXIT 2 ARGS help frobnicate EXPECT "unknown command 'frobnicate'")
  # Unknown options are usage errors that name the option.
  foreach(command check bench devices run)
    run(EXIT 2 ARGS ${command} --frobnicate
        EXPECT "${command}: unknown option '--frobnicate' \\(see 'tessera ${command} --help'\\)")
  endforeach()
  run(EXIT 2 ARGS tune --device cpu --op gemm --shape 8x8x8 --frobnicate
      EXPECT "tune: unknown option '--frobnicate'")
  run(EXIT 2 ARGS check stray EXPECT "check: unexpected argument 'stray'")
  run(EXIT 2 ARGS check --json EXPECT "option --json needs a value")

elseif(CASE STREQUAL "side_by_side")
  # Devices are checked side by side, a thread each: every record keeps its
  # device (the faulty device's gemm fails, the CPU's passes), and checking
  # one device at a time (--jobs 1) gives the same matrix and counts.
  set(ENV{TESSERA_PLUGIN_PATH} "${FAULTY_PATH}:${PLUGIN_PATH}")
  set(ENV{TESSERA_FAULT} bias)
  set(args check --device faulty:0 --device cpu:0 --op gemm --quick --verbose)
  run(EXIT 1 ARGS ${args}
      EXPECT "PASS  cpu:0 gemm" "FAIL  faulty:0 gemm" "FAIL faulty:0 gemm [a-z0-9]+ case"
      REJECT "FAIL +cpu:0" "ERROR")
  string(REGEX REPLACE " in [0-9.]+ s " " " side_by_side "${LAST_OUTPUT}")
  string(REGEX MATCHALL "(PASS|FAIL)  [^\n]*#[0-9]+" side_lines "${side_by_side}")
  run(EXIT 1 ARGS ${args} --jobs 1)
  string(REGEX REPLACE " in [0-9.]+ s " " " one_by_one "${LAST_OUTPUT}")
  string(REGEX MATCHALL "(PASS|FAIL)  [^\n]*#[0-9]+" one_lines "${one_by_one}")
  list(SORT side_lines)
  list(SORT one_lines)
  if(NOT side_lines STREQUAL one_lines)
    message(FATAL_ERROR "--jobs 1 and side by side disagree:\n${one_lines}\n${side_lines}")
  endif()
  string(REGEX REPLACE "^.*\ndevice" "device" side_summary "${side_by_side}")
  string(REGEX REPLACE "^.*\ndevice" "device" one_summary "${one_by_one}")
  if(NOT side_summary STREQUAL one_summary)
    message(FATAL_ERROR "--jobs 1 and side by side report differently")
  endif()
  unset(ENV{TESSERA_FAULT})
  run(EXIT 2 ARGS check --all --jobs 0 EXPECT "check: --jobs needs a count of devices from 1 to")

elseif(CASE STREQUAL "no_case")
  # A check or bench that runs nothing says so and fails, naming its filters.
  set(ENV{TESSERA_PLUGIN_PATH} ${NARROW_PATH})
  run(EXIT 0 ARGS check --device narrow:0 --op softmax --dtype f32 --case 0
      EXPECT "check: 1 passed, 0 failed, 0 errors, 0 skipped")
  run(EXIT 1 ARGS check --device narrow:0 --op gemm
      EXPECT "check: no case matched \\(--device narrow:0 --op gemm\\)"
             "narrow:0 does not support gemm")
  run(EXIT 1 ARGS check --all --op softmax --dtype bf16 --quick
      EXPECT "check: no case matched \\(--all --op softmax --dtype bf16 --quick\\)")
  run(EXIT 1 ARGS check --device narrow:0 --op rope --list EXPECT "check: no case matched")
  run(EXIT 1 ARGS bench --device narrow:0 --op gemm --short
      EXPECT "bench: no case matched \\(--device narrow:0 --op gemm\\)"
      REJECT "copy: ")
  run(EXIT 1 ARGS bench --device narrow:0 --op softmax --dtype bf16 --shape 64x64 --short
      EXPECT "bench: no case matched \\(--device narrow:0 --op softmax --dtype bf16 --shape 64x64\\)")
  run(EXIT 2 ARGS check --device nosuch:0 --op gemm
      EXPECT "no device 'nosuch:0'" "check: no case matched \\(--device nosuch:0 --op gemm\\)")
  run(EXIT 2 ARGS bench --device nosuch:0
      EXPECT "no device 'nosuch:0'" "bench: no case matched \\(--device nosuch:0\\)")
  # A suite's --shape that none of its rows has.
  set(ENV{TESSERA_PLUGIN_PATH} ${PLUGIN_PATH})
  run(EXIT 1 ARGS bench --suite cpu --short --shape 3x3x3
      EXPECT "bench: no case matched \\(--suite cpu --device cpu --shape 3x3x3\\)"
      REJECT "FMA peak")

elseif(CASE STREQUAL "bench_shape")
  # --shape benchmarks that shape of the op (the SHAPE syntax of tune and
  # explain), in each dtype given or supported.
  set(ENV{TESSERA_PLUGIN_PATH} ${NARROW_PATH})
  set(ENV{TESSERA_NARROW_CLOCK} steady)
  run(EXIT 0 ARGS bench --device narrow:0 --op softmax --shape 96x80 --short
      EXPECT "softmax +f32 +96x80 +1\\.000 " REJECT "1024x1024" "softmax +(f16|bf16)")
  unset(ENV{TESSERA_NARROW_CLOCK})
  set(ENV{TESSERA_PLUGIN_PATH} ${PLUGIN_PATH})
  run(EXIT 0 ARGS bench --device cpu --op gemm --dtype bf16 --shape 2x48x40x24 --short
      EXPECT "gemm +bf16 +2x48x40x24 +[0-9.]+ " REJECT "gemm +f32" "512x512x512")
  run(EXIT 0 ARGS bench --device cpu --op attention --dtype f32 --shape 1x2x1x16x16x8 --causal
                  --short --list
      EXPECT "attention +f32 +1x2x1x16x16x8 causal")
  # Shapes that do not parse, or do not fit the op, are usage errors.
  run(EXIT 2 ARGS bench --op softmax --shape 96xx80 EXPECT "'96xx80'")
  run(EXIT 2 ARGS bench --op gemm --shape 8x8 EXPECT "shape '8x8' does not fit gemm")
  run(EXIT 2 ARGS bench --shape 64x64 EXPECT "bench: --shape needs --op")
  run(EXIT 2 ARGS bench --suite cpu --shape 1024x1024xq EXPECT "'1024x1024xq'")
  run(EXIT 2 ARGS bench --op softmax --shape 64x64 --dtype f64 EXPECT "unknown dtype 'f64'")

elseif(CASE STREQUAL "run_sizes")
  # run benchmarks the full sizes unless --short; --list shows what each
  # step would run without running it.
  run(EXIT 0 ARGS bench --device cpu --list
      EXPECT "gemm +f32 +2048x2048x2048" "rmsnorm +bf16 +4096x4096"
      REJECT "256x256x256" "copy: ")
  run(EXIT 0 ARGS bench --device cpu --short --list
      EXPECT "gemm +f32 +256x256x256" REJECT "2048x2048x2048")
  run(EXIT 0 ARGS run --list
      EXPECT "run: tessera check --all --list\n" "run: tessera bench --all --list\n"
             "gemm +f32 +2048x2048x2048"
      REJECT "256x256x256" "bench --all --short")
  run(EXIT 0 ARGS run --short --list
      EXPECT "run: tessera check --all --quick --list\n" "run: tessera bench --all --short --list\n"
             "gemm +f32 +256x256x256"
      REJECT "2048x2048x2048")

elseif(CASE STREQUAL "bench_flags")
  # Spread and flags, on a device with a simulated clock (narrow_plugin.c):
  # steady 1 ms runs and a 40 GB/s copy give no flag ...
  set(ENV{TESSERA_PLUGIN_PATH} ${NARROW_PATH})
  set(json ${WORK_DIR}/bench.json)
  set(bench_args bench --device narrow:0 --op softmax --shape 64x64 --short --json ${json})
  set(ENV{TESSERA_NARROW_CLOCK} steady)
  run(EXIT 0 ARGS ${bench_args}
      EXPECT "median ms +min +max +idle call "
             "softmax +f32 +64x64 +1\\.000 +1\\.000 +1\\.000 +[0-9.]+ +- +0\\.03 +0% copy +40\\.0 [^\n]* -\n"
             "flags: \\^ = " "~ = disturbed")
  expect_json(${json} "\"median_ms\": 1," "\"min_ms\": 1," "\"max_ms\": 1," "\"spread\": 1,"
              "\"copy_gbs_before\": 40" "\"copy_gbs_after\": 40" "\"flags\": \\[\\]")
  # ... runs far faster than the copy are above the ceiling ...
  set(ENV{TESSERA_NARROW_CLOCK} fast)
  run(EXIT 0 ARGS ${bench_args} EXPECT "softmax +f32 +64x64 [^\n]*% copy [^\n]* \\^\n")
  expect_json(${json} "\"flags\": \\[\"above_ceiling\"\\]")
  # ... runs of 1 and 2 ms are spread (max/min 2) ...
  set(ENV{TESSERA_NARROW_CLOCK} spread)
  run(EXIT 0 ARGS ${bench_args} EXPECT "softmax +f32 +64x64 +[0-9.]+ +1\\.000 +2\\.000 [^\n]* ~\n")
  expect_json(${json} "\"min_ms\": 1," "\"max_ms\": 2," "\"spread\": 2," "\"flags\": \\[\"spread\"\\]")
  # ... and a copy that halves its speed during the row drifted.
  set(ENV{TESSERA_NARROW_CLOCK} drift)
  run(EXIT 0 ARGS ${bench_args} EXPECT "softmax +f32 +64x64 [^\n]* ~\n")
  expect_json(${json} "\"copy_gbs_before\": 40," "\"copy_gbs_after\": 20,"
              "\"flags\": \\[\"copy_drift\"\\]")

elseif(CASE STREQUAL "report_json")
  # Reports name the tessera version and each device (name, arch, driver,
  # tuning key), so that those of different machines can sit side by side.
  set(ENV{TESSERA_PLUGIN_PATH} "${PLUGIN_PATH}:${NARROW_PATH}")
  set(ENV{TESSERA_NARROW_CLOCK} steady)
  run(EXIT 0 ARGS check --device cpu --op softmax --case 0 --json ${WORK_DIR}/check.json)
  run(EXIT 0 ARGS bench --device narrow:0 --op softmax --shape 64x64 --short
                  --json ${WORK_DIR}/bench.json)
  foreach(tool check bench)
    execute_process(COMMAND ${PYTHON3} -m json.tool ${WORK_DIR}/${tool}.json
                    RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
    if(NOT status EQUAL 0)
      message(FATAL_ERROR "${tool}.json is not valid JSON: ${err}")
    endif()
    execute_process(COMMAND ${PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/report_keys.py ${tool}
                            ${WORK_DIR}/${tool}.json
                    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
    message("---- report_keys.py ${tool} ----\n${out}${err}")
    if(NOT status EQUAL 0)
      message(FATAL_ERROR "${tool}.json lacks what a report must carry")
    endif()
  endforeach()

else()
  message(FATAL_ERROR "cli_cases.cmake: unknown case ${CASE}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
