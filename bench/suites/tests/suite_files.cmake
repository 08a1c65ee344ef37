# SPDX-License-Identifier: Apache-2.0
# Tests of the suite files and their parser, run by ctest as
#   cmake -DTESSERA=<tessera> -DPLUGIN_PATH=<plugins.d> -DSUITES=<bench/suites>
#         -DWORK_DIR=<scratch dir> [-DHAVE_CPU=ON] -P suite_files.cmake
# The shipped suites parse and are found by name (and by their old short
# names) in the build tree's share/tessera/bench/suites; broken and hostile
# files fail with exit status 2 and an error naming FILE:LINE, never a crash.
foreach(var TESSERA PLUGIN_PATH SUITES WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "suite_files.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
foreach(var TESSERA_BACKENDS TESSERA_DISABLE_BACKENDS TESSERA_ADD_PLUGIN_PATH TESSERA_DEVICE
            TESSERA_LOG)
  unset(ENV{${var}})
endforeach()
set(ENV{TESSERA_PLUGIN_PATH} ${PLUGIN_PATH})
set(ENV{XDG_CONFIG_HOME} ${WORK_DIR}/xdg-config)

# run(EXIT zero|<status> ARGS args... [EXPECT regex...] [REJECT regex...])
function(run)
  cmake_parse_arguments(R "" "EXIT" "ARGS;EXPECT;REJECT" ${ARGN})
  execute_process(COMMAND ${TESSERA} ${R_ARGS} RESULT_VARIABLE status OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${R_ARGS}")
  message("---- tessera ${shown} (exit ${status}) ----\n${out}${err}----")
  set(all "${out}${err}")
  if(R_EXIT STREQUAL "zero")
    set(R_EXIT 0)
  endif()
  if(NOT status STREQUAL R_EXIT)
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
endfunction()

# ---- the shipped suites ----

file(GLOB shipped ${SUITES}/*.suite)
list(LENGTH shipped shipped_count)
if(shipped_count LESS 4)
  message(FATAL_ERROR "expected the four suites in ${SUITES}, found: ${shipped}")
endif()
foreach(suite ${shipped})
  # Every suite file carries the licence line (tests/license does not scan .suite).
  file(STRINGS ${suite} head LIMIT_COUNT 3)
  if(NOT head MATCHES "SPDX-License-Identifier: Apache-2.0")
    message(FATAL_ERROR "${suite} lacks '# SPDX-License-Identifier: Apache-2.0' in its first lines")
  endif()
  # By path: it parses (an error would name the file); the rows a device
  # cannot or does not run end in "no case matched" (1) at worst.
  execute_process(COMMAND ${TESSERA} bench --suite ${suite} --list --all
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT (status EQUAL 0 OR status EQUAL 1) OR "${out}${err}" MATCHES "\\.suite(:[0-9]+)?: ")
    message(FATAL_ERROR "${suite} (exit ${status}):\n${out}${err}")
  endif()
endforeach()

# Not found: the message names the directory searched and what is there.
run(EXIT 2 ARGS bench --suite nosuch --list
    EXPECT "unknown suite 'nosuch': no nosuch.suite in [^ ]*/share/tessera/bench/suites \\(suites there: cpu-kernels, cuda-llm, default, serving, vulkan-vs-cuda; short names: cpu, cuda, vulkan\\)")
# A name never leaves the directory; a path must exist.
run(EXIT 2 ARGS bench --suite .cpu-kernels --list EXPECT "unknown suite '.cpu-kernels'")
run(EXIT 2 ARGS bench --suite ${WORK_DIR}/none.suite --list
    EXPECT "none.suite: cannot read: No such file")

if(HAVE_CPU)
  # The same rows by new name, by short name and by path, with the suite's
  # file name in what it prints.
  foreach(name cpu cpu-kernels ${SUITES}/cpu-kernels.suite)
    run(EXIT zero ARGS bench --suite ${name} --list
        EXPECT "gemm +f32 +1024x1024x1024\n" "gemm +bf16 +4096x4096x4096\n"
               "attention +f32 +1x8x8x2048x2048x128\n" "bench --list: 11 rows")
  endforeach()
  run(EXIT 1 ARGS bench --suite cuda --all --list
      EXPECT "skipped: suite cuda-llm runs on CUDA devices")
  run(EXIT 1 ARGS bench --suite vulkan --list
      EXPECT "skipped: suite vulkan-vs-cuda runs on Vulkan devices \\(and CUDA ones for reference\\)")
  # The default suite's rows: full and short sets.
  run(EXIT zero ARGS bench --list EXPECT "gemm +f32 +2048x2048x2048" "grouped_gemm +bf16 +8x2048x1024x1024"
      "bench --list: 16 rows" REJECT "256x256x256")
  run(EXIT zero ARGS bench --list --short EXPECT "gemm +f32 +256x256x256" "bench --list: 12 rows"
      REJECT "2048x2048x2048")
  # A suite of one's own, with criteria: --shape selects its rows.
  file(WRITE ${WORK_DIR}/mine.suite
       "# SPDX-License-Identifier: Apache-2.0\nabout a small check\nruns-on cpu\n"
       "row small gemm f32 64x64x64   # a comment\nrow - softmax bf16 32x128 short\n"
       "criterion small bytes-over-copy >= 0.1 supplementary\n")
  run(EXIT zero ARGS bench --suite ${WORK_DIR}/mine.suite --device cpu --list
      EXPECT "gemm +f32 +64x64x64\n" "bench --list: 1 row " REJECT "softmax")
  run(EXIT zero ARGS bench --suite ${WORK_DIR}/mine.suite --device cpu --list --short
      EXPECT "softmax +bf16 +32x128\n" "bench --list: 2 rows")
  # Criteria scoped with `on`: the CPU judges its own lines and skips the
  # others; bytes-over-read divides by the read bandwidth timed there.
  file(WRITE ${WORK_DIR}/scoped.suite
       "# SPDX-License-Identifier: Apache-2.0\nabout scoped criteria\nruns-on cpu\n"
       "row sm softmax f32 64x4096\n"
       "criterion sm bytes-over-read >= 0 on cpu\n"
       "criterion sm bytes-over-copy >= 0 supplementary on vulkan\n"
       "criterion sm tflops >= 0\n")
  run(EXIT zero ARGS bench --suite ${WORK_DIR}/scoped.suite --device cpu
      EXPECT "cpu:0 +softmax f32 64x4096: GB/s / read bandwidth +[0-9.]+ +>= 0"
             "cpu:0 +softmax f32 64x4096: TFLOP/s" "0 FAIL, 0 n/a"
      REJECT "/ copy bandwidth +[0-9.]")
endif()

# ---- broken and hostile files ----

# broken(NAME "EXPECTED REGEX" LINES...): NAME.suite of those lines fails
# with exit status 2 and the message.
function(broken name expect)
  set(path ${WORK_DIR}/${name}.suite)
  string(REPLACE ";" "\n" text "${ARGN}")
  file(WRITE ${path} "${text}\n")
  run(EXIT 2 ARGS bench --suite ${path} --list EXPECT "${name}\\.suite${expect}")
endfunction()

set(ok "about a test" "row a gemm f32 8x8x8")
broken(unknown-key ":3: unknown key 'rows'" ${ok} "rows b gemm f32 8x8x8")
broken(threshold-junk ":3: '0.9x' is not a threshold" ${ok} "criterion a tflops >= 0.9x")
broken(threshold-nan ":3: 'nan' is not a threshold" ${ok} "criterion a tflops >= nan")
broken(threshold-hex ":3: '0x10' is not a threshold" ${ok} "criterion a tflops >= 0x10")
broken(threshold-huge ":3: '1e999' is not a threshold" ${ok} "criterion a tflops >= 1e999")
broken(threshold-negative ":3: '-1' is not a threshold" ${ok} "criterion a tflops >= -1")
broken(threshold-missing ":3: expected a threshold after '>='" ${ok} "criterion a tflops >=")
broken(no-comparison ":3: expected '>= THRESHOLD' after tflops" ${ok} "criterion a tflops 250")
broken(after-threshold ":3: unexpected 'extra' after the threshold" ${ok}
       "criterion a tflops >= 1 supplementary extra")
broken(on-missing ":3: 'on' needs cpu or a backend name" ${ok} "criterion a tflops >= 1 on")
broken(on-any ":3: 'any' is not cpu or a backend name" ${ok} "criterion a tflops >= 1 on any")
broken(on-selector ":3: 'cuda:0' is not cpu or a backend name" ${ok}
       "criterion a tflops >= 1 supplementary on cuda:0")
broken(on-then-junk ":3: unexpected 'x' after the threshold" ${ok}
       "criterion a tflops >= 1 on cpu x")
broken(on-before-supplementary ":3: unexpected 'supplementary' after the threshold" ${ok}
       "criterion a tflops >= 1 on cpu supplementary")
broken(unknown-op ":2: unknown op 'gemmm'" "about x" "row a gemmm f32 8x8x8")
broken(unknown-dtype ":2: unknown dtype 'f64'" "about x" "row a gemm f64 8x8x8")
broken(bad-shape ":2: shape '8x8' does not fit gemm" "about x" "row a gemm f32 8x8")
broken(shape-overflow ":2: shape '99999999999999999999x8x8' does not fit gemm" "about x"
       "row a gemm f32 99999999999999999999x8x8")
broken(too-large ":2: row gemm f32 1099511627776x1099511627776x8 is too large" "about x"
       "row a gemm f32 1099511627776x1099511627776x8")
broken(row-short ":2: row needs NAME \\(or -\\) OP DTYPE SHAPE" "about x" "row gemm f32 8x8x8")
broken(row-name ":2: row name 'a/b' is not" "about x" "row a/b gemm f32 8x8x8")
broken(row-twice ":3: a row named 'a' is already above" ${ok} "row a gemm f32 16x16x16")
broken(causal-gemm ":2: causal is for attention rows" "about x" "row a gemm f32 8x8x8 causal")
broken(tf32-bf16 ":2: tf32 is for f32 gemm rows" "about x" "row a gemm bf16 8x8x8 tf32")
broken(short-full ":2: 'full' is not a row flag here" "about x" "row a gemm f32 8x8x8 short full")
broken(unknown-row ":3: no row named 'b' above" ${ok} "criterion b tflops >= 1")
broken(row-below ":2: no row named 'a' above" "about x" "criterion a tflops >= 1"
       "row a gemm f32 8x8x8")
broken(unknown-measure ":3: unknown measure 'speed'" ${ok} "criterion a speed >= 1")
broken(over-row-bare ":3: over-row needs a row" ${ok} "criterion a over-row")
broken(openblas-variant ":3: unknown OpenBLAS variant 'haswell'" ${ok}
       "criterion a over-openblas haswell >= 1")
broken(openblas-bf16 ":3: over-openblas is for f32 gemm rows" "about x"
       "row a gemm bf16 8x8x8" "criterion a over-openblas skylakex >= 1")
broken(weights-softmax ":3: weights-over-copy is for gemm rows" "about x"
       "row s softmax f32 8x8" "criterion s weights-over-copy >= 1")
broken(no-reference ":3: over-reference-\\* criteria need a 'reference BACKEND' line" ${ok}
       "criterion a over-reference-rate >= 0")
broken(about-twice ":3: about is already set on line 1" ${ok} "about again")
broken(about-empty ":1: about needs a text" "about" "row a gemm f32 8x8x8")
broken(runs-on-selector ":3: 'cuda:0' is not a device kind" ${ok} "runs-on cuda:0")
broken(runs-on-two ":3: runs-on takes one value" ${ok} "runs-on cpu cuda")
broken(reference-cpu ":3: 'cpu' is not a backend name" ${ok} "reference cpu")
broken(cpu-devices ":3: cpu-devices is 'any' or 'when-named'" ${ok} "cpu-devices never")
broken(default-devices ":3: 'a\\$b' is not 'all' or a device selector" ${ok} "default-devices a$b")
broken(many-words ":2: more than 16 words" "about x"
       "row a gemm f32 8x8x8 1 2 3 4 5 6 7 8 9 10 11 12")
broken(no-rows ": no rows" "about x" "# nothing else")
broken(no-about ": no 'about' line" "row a gemm f32 8x8x8")
broken(empty ": no rows" "")

# A line longer than the parser takes, anywhere in the file.
string(REPEAT "a" 5000 long)
broken(long-line ":2: line longer than 1023 bytes" "about x" "row a gemm f32 8x8x8 # ${long}")
# A file larger than 64 KiB.
string(REPEAT "# padding padding padding padding padding padding padding padding\n" 1100 big)
file(WRITE ${WORK_DIR}/big.suite "${big}")
run(EXIT 2 ARGS bench --suite ${WORK_DIR}/big.suite --list EXPECT "big.suite: larger than 65536 bytes")
# More rows than a suite holds.
set(rows "about x")
foreach(i RANGE 64)
  list(APPEND rows "row r${i} gemm f32 8x8x8")
endforeach()
broken(many-rows ":66: more than 64 rows" ${rows})
# Bytes that are not printable ASCII: a control character, UTF-8, a NUL.
string(ASCII 1 control)
broken(control ":2: byte 0x01 at column 5: a suite file is printable ASCII" "about x" "row ${control}")
broken(utf8 ":1: byte 0xc3 at column 10: a suite file is printable ASCII" "about café")
find_program(PRINTF printf)
if(PRINTF)
  execute_process(COMMAND ${PRINTF} "about x\\nrow a\\000 gemm f32 8x8x8\\n"
                  OUTPUT_FILE ${WORK_DIR}/nul.suite)
  run(EXIT 2 ARGS bench --suite ${WORK_DIR}/nul.suite --list
      EXPECT "nul.suite:2: byte 0x00 at column 6")
endif()
# Not a regular file: a directory, and a FIFO (which must not hang).
file(MAKE_DIRECTORY ${WORK_DIR}/dir.suite)
run(EXIT 2 ARGS bench --suite ${WORK_DIR}/dir.suite --list EXPECT "dir.suite: not a regular file")
find_program(MKFIFO mkfifo)
if(MKFIFO)
  execute_process(COMMAND ${MKFIFO} ${WORK_DIR}/fifo.suite)
  run(EXIT 2 ARGS bench --suite ${WORK_DIR}/fifo.suite --list EXPECT "fifo.suite: not a regular file")
endif()
# Windows line ends are read as line ends.
file(WRITE ${WORK_DIR}/crlf.suite "about x\r\nrow a gemm f32 8x8x8\r\nbogus\r\n")
run(EXIT 2 ARGS bench --suite ${WORK_DIR}/crlf.suite --list EXPECT "crlf.suite:3: unknown key 'bogus'")
message("suite files: the shipped suites parse; broken ones fail naming FILE:LINE")
