#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU machine's share of a release check, in parts that each fit one
# device-tool call. BUILD names a build tree with the CUDA and Vulkan plugins
# and the tests (default build-gpu): made there with PART=build where glslc
# and the Vulkan headers exist, else made elsewhere and carried (its bin, lib
# and share). The Vulkan loader travels in .gl (see bench/vulkan/README.md).
#   PART=build     configure and build (Release, CUDA sm_90a + Vulkan, tests on)
#   PART=threads   tests/threads on cuda:0 and vulkan:0 (every case), and the
#                  Vulkan concurrency case under the Khronos validation layer
#   PART=check     tessera check on cuda:0 and vulkan:0, --compare cuda:0,vulkan:0
#   PART=suites    tessera bench --suite cuda and --suite vulkan
#   PART=hip       the HIP plugin through tests/hip's runtime over CUDA with
#                  the kernels built by nvcc (matrix instructions emulated):
#                  check on hip:0 posing as each AMD target, --compare
#                  hip:0,cuda:0, the threads tests, and check under
#                  compute-sanitizer memcheck (HIP_MEMCHECK_ARCHS, default
#                  gfx90a gfx1100)
# PART may list several ("build threads"). Output under $OUT (default
# /tmp/gpu-check); a table of results is printed last.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$root" && realpath -m "${BUILD:-build-gpu}")
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
parts=${PART:-build threads check}
summary=()
note() { summary+=("$*"); }

if ls "$root"/.gl/*.deb >/dev/null 2>&1; then
  for f in "$root"/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export TESSERA_PLUGIN_PATH=$build/share/tessera/plugins.d XDG_CACHE_HOME=/tmp/gpu-check-cache
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
t=$build/bin/tessera
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

for part in $parts; do
  case $part in
  build)
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSERA_BACKEND_CUDA=ON \
      -DTESSERA_BACKEND_VULKAN=ON -DTESSERA_CUDA_ARCHS=90a >"$out/build.txt" 2>&1 &&
      cmake --build "$build" -j "$(nproc)" >>"$out/build.txt" 2>&1
    rc=$?
    tail -3 "$out/build.txt"
    note "build: exit $rc"
    ;;
  threads)
    for device in cuda:0 vulkan:0; do
      for case in concurrency destroy_while_recording use_after_destroy; do
        log=$out/threads-${device%:*}-$case.txt
        timeout 300 "$build/bin/test_threads" $device $case >"$log" 2>&1
        rc=$?
        note "threads $device $case: exit $rc: $(tail -1 "$log")"
      done
    done
    # The Khronos validation layer: .gl/layers/vulkan-validationlayers*.deb,
    # unpacked aside (not into /).
    layer_env=()
    if ls "$root"/.gl/layers/vulkan-validationlayers*.deb >/dev/null 2>&1; then
      dpkg -x "$root"/.gl/layers/vulkan-validationlayers*.deb /tmp/vklayer
      layer_env=(VK_LAYER_PATH=/tmp/vklayer/usr/share/vulkan/explicit_layer.d
        LD_LIBRARY_PATH=/tmp/vklayer/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH)
    fi
    env "${layer_env[@]}" TESSERA_VULKAN_VALIDATION=1 TESSERA_LOG=info timeout 300 \
      "$build/bin/test_threads" vulkan:0 concurrency 8 2 8 >"$out/threads-validation.txt" 2>&1
    rc=$?
    note "threads vulkan:0 under the validation layer: exit $rc," \
      "$(grep -c 'vulkan validation error' "$out/threads-validation.txt") validation errors" \
      "($(grep 'vulkan validation error' "$out/threads-validation.txt" | grep -ci threading) about threads)," \
      "$(grep -c 'vulkan validation layer enabled' "$out/threads-validation.txt") layer-enabled lines"
    ;;
  check)
    for device in cuda:0 vulkan:0; do
      log=$out/check-${device%:*}
      timeout 280 "$t" check --device $device --json "$log.json" >"$log.txt" 2>&1
      note "check $device: exit $?: $(grep -E '^check:' "$log.txt" | tail -1)"
    done
    timeout 280 "$t" check --compare cuda:0,vulkan:0 >"$out/compare.txt" 2>&1
    note "check --compare cuda:0,vulkan:0: exit $?: $(grep -E '^check:' "$out/compare.txt" | tail -1)"
    ;;
  suites)
    if [ -z "${TESSERA_CUBLASLT:-}" ]; then
      lib=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
      [ -n "$lib" ] && export TESSERA_CUBLASLT=$lib
    fi
    for suite in cuda vulkan; do
      timeout 280 "$t" bench --suite $suite --json "$out/suite-$suite.json" >"$out/suite-$suite.txt" 2>&1
      note "suite $suite: exit $?: $(grep -E '^suite' "$out/suite-$suite.txt" | tail -1)"
    done
    ;;
  hip)
    hip_env=(TESSERA_HIP_RUNTIME="$build/tests/hip/libtessera-hip-on-cuda.so"
      TESSERA_HIP_CODE_OBJECTS="$build/tests/hip/emulated.bundle")
    for arch in gfx90a gfx942 gfx1030 gfx1100 gfx1200; do
      log=$out/hip-check-$arch
      env "${hip_env[@]}" TESSERA_HIP_TEST_ARCH=$arch timeout 280 "$t" check --device hip:0 \
        --json "$log.json" >"$log.txt" 2>&1
      note "check hip:0 as $arch: exit $?: $(grep -E '^check:' "$log.txt" | tail -1)"
    done
    for arch in gfx90a gfx1100; do
      env "${hip_env[@]}" TESSERA_HIP_TEST_ARCH=$arch timeout 280 "$t" check --compare hip:0,cuda:0 \
        >"$out/hip-compare-$arch.txt" 2>&1
      note "check --compare hip:0,cuda:0 as $arch: exit $?: $(grep -E '^check:' "$out/hip-compare-$arch.txt" | tail -1)"
    done
    for case in concurrency destroy_while_recording use_after_destroy; do
      env "${hip_env[@]}" TESSERA_HIP_TEST_ARCH=gfx90a timeout 200 "$build/bin/test_threads" hip:0 \
        $case >"$out/hip-threads-$case.txt" 2>&1
      note "threads hip:0 $case: exit $?: $(tail -1 "$out/hip-threads-$case.txt")"
    done
    for arch in ${HIP_MEMCHECK_ARCHS:-gfx90a gfx1100}; do
      log=$out/hip-memcheck-$arch.txt
      env "${hip_env[@]}" TESSERA_HIP_TEST_ARCH=$arch timeout 280 compute-sanitizer --tool memcheck \
        --error-exitcode 99 "$t" check --device hip:0 >"$log" 2>&1
      note "memcheck check hip:0 as $arch: exit $?: $(grep -E '^check:|ERROR SUMMARY' "$log" | tail -2 | tr '\n' ' ')"
    done
    ;;
  *)
    echo "unknown part $part" >&2
    exit 2
    ;;
  esac
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
