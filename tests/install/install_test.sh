#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Install test: installs the build into a temporary prefix, then builds and
# runs the examples against that install only, as an outside user would.
#   usage: install_test.sh <build-dir> <source-dir> <cmake> <c-compiler> [extra-cflags]
# extra-cflags: what the build itself was compiled with that outside programs
# must share (the sanitizer flags: the ASan runtime has to come first).
# Exit status 77 (ctest: skipped) when pkg-config is missing.
set -eu

if [ $# -ne 4 ] && [ $# -ne 5 ]; then
  echo "usage: $0 <build-dir> <source-dir> <cmake> <c-compiler> [extra-cflags]" >&2
  exit 2
fi
build=$1 src=$2 cmake=$3 cc=$4 extra=${5:-}

pkg_config=$(command -v pkg-config || command -v pkgconf || true)
if [ -z "$pkg_config" ]; then
  echo "install test: pkg-config not found: skipped" >&2
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM
prefix=$work/prefix

step() { echo "== $*"; }
fail() { echo "install test: FAIL: $*" >&2; exit 1; }
# Runs a command quietly; shows its output only when it fails.
quiet() {
  log=$work/step.log
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "command failed: $*"
  fi
}

# Nothing from the caller's environment may point at the build tree: only the
# install is searched (through paths relative to the installed libtessera).
unset TESSERA_PLUGIN_PATH TESSERA_ADD_PLUGIN_PATH TESSERA_BACKENDS TESSERA_DISABLE_BACKENDS \
  TESSERA_CONFIG TESSERA_LOG LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH || true
export XDG_CONFIG_HOME="$work/xdg"
export XDG_CACHE_HOME="$work/xdg-cache"
# The gemm example runs on the CPU, so that this test does not depend on
# which GPUs the machine has; device choice is tested elsewhere.
export TESSERA_DEVICE=cpu

step "install into $prefix"
quiet "$cmake" --install "$build" --prefix "$prefix"
pc_file=$(find "$prefix" -name tessera.pc -path '*/pkgconfig/*' | head -n 1)
config_file=$(find "$prefix" -name tesseraConfig.cmake | head -n 1)
[ -x "$prefix/bin/tessera" ] || fail "no bin/tessera installed"
[ -n "$pc_file" ] || fail "no tessera.pc installed"
[ -f "$(dirname "$pc_file")/tessera-plugin.pc" ] || fail "no tessera-plugin.pc installed"
[ -n "$config_file" ] || fail "no tesseraConfig.cmake installed"
for header in tessera.h plugin.h; do
  [ -f "$prefix/include/tessera/$header" ] || fail "include/tessera/$header not installed"
done
# Plugins: unversioned modules in <libdir>/tessera/plugins, manifests named
# per architecture (cpu.<multiarch>.conf) with name = cpu.
cpu_manifest=$(find "$prefix/share/tessera/plugins.d" -name 'cpu.*.conf' | head -n 1)
[ -n "$cpu_manifest" ] || fail "no cpu.<arch>.conf manifest installed"
grep -qx 'name = cpu' "$cpu_manifest" || fail "$cpu_manifest has no 'name = cpu'"
cpu_plugin=$(find "$prefix" -path '*/tessera/plugins/libtessera-cpu.so' | head -n 1)
[ -n "$cpu_plugin" ] || fail "no <libdir>/tessera/plugins/libtessera-cpu.so installed"
[ -z "$(find "$prefix" -name 'libtessera-*.so.*')" ] ||
  fail "versioned plugin files installed: $(find "$prefix" -name 'libtessera-*.so.*')"

step "pkg-config files name this prefix"
PKG_CONFIG_PATH=$(dirname "$pc_file")
export PKG_CONFIG_PATH
[ "$("$pkg_config" --variable=prefix tessera)" = "$prefix" ] ||
  fail "tessera.pc prefix is $("$pkg_config" --variable=prefix tessera), not $prefix"
libdir=$("$pkg_config" --variable=libdir tessera)
[ -e "$libdir/libtessera.so" ] || fail "tessera.pc libdir $libdir has no libtessera.so"
[ -z "$("$pkg_config" --libs tessera-plugin)" ] || fail "tessera-plugin.pc must link nothing"

step "examples/gemm with find_package(tessera)"
quiet "$cmake" -S "$src/examples/gemm" -B "$work/gemm-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Werror $extra"
found_dir=$(sed -n 's/^tessera_DIR:PATH=//p' "$work/gemm-cmake/CMakeCache.txt")
[ "$found_dir" = "$(dirname "$config_file")" ] || fail "find_package found $found_dir"
quiet "$cmake" --build "$work/gemm-cmake" -j2
"$work/gemm-cmake/tessera-gemm-example" >"$work/gemm-cmake.out" 2>&1 ||
  { cat "$work/gemm-cmake.out" >&2; fail "gemm example (find_package) failed"; }
cat "$work/gemm-cmake.out"

step "examples/gemm with pkg-config"
# shellcheck disable=SC2046 # word splitting of the flags is intended
"$cc" -std=c11 -Wall -Wextra -Werror $extra $("$pkg_config" --cflags tessera) \
  "$src/examples/gemm/gemm.c" -o "$work/gemm-pkgconfig" \
  $("$pkg_config" --libs tessera) -lm -Wl,-rpath,"$libdir" ||
  fail "building the gemm example with pkg-config"
"$work/gemm-pkgconfig" >"$work/gemm-pkgconfig.out" 2>&1 ||
  { cat "$work/gemm-pkgconfig.out" >&2; fail "gemm example (pkg-config) failed"; }
cat "$work/gemm-pkgconfig.out"

step "examples/plugin against the installed headers only"
extra_dir=$work/extra-plugins.d
quiet "$cmake" -S "$src/examples/plugin" -B "$work/plugin-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Werror $extra" \
  -DTESSERA_SAMPLE_MANIFEST_DIR="$extra_dir"
quiet "$cmake" --build "$work/plugin-cmake" -j2
plugin_library=$(sed -n 's/^library = //p' "$extra_dir/sample.conf")
[ -f "$plugin_library" ] || fail "sample.conf names $plugin_library, which does not exist"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror $extra -shared -fPIC -fvisibility=hidden \
  $("$pkg_config" --cflags tessera-plugin) "$src/examples/plugin/sample_plugin.c" \
  -o "$work/libtessera-sample-pkgconfig.so" -lm || fail "building the plugin with pkg-config"
if command -v readelf >/dev/null; then
  for library in "$plugin_library" "$work/libtessera-sample-pkgconfig.so"; do
    if readelf -d "$library" | grep -q 'NEEDED.*libtessera'; then
      fail "$library links libtessera; a plugin must not"
    fi
  done
fi

step "installed tessera devices, with and without the sample's directory"
"$prefix/bin/tessera" devices >"$work/devices.out" 2>&1 ||
  { cat "$work/devices.out" >&2; fail "installed tessera devices failed"; }
cat "$work/devices.out"
grep -q cpu "$work/devices.out" || fail "the installed CPU plugin was not found"
# ... and it is the installed one, found next to the installed libtessera.
"$prefix/bin/tessera" devices --verbose >"$work/devices-verbose.out" 2>&1 ||
  { cat "$work/devices-verbose.out" >&2; fail "installed tessera devices --verbose failed"; }
grep -qF "$cpu_manifest" "$work/devices-verbose.out" ||
  { cat "$work/devices-verbose.out" >&2; fail "the CPU manifest was not read from the install"; }
if grep -qF "$build" "$work/devices-verbose.out"; then
  cat "$work/devices-verbose.out" >&2
  fail "the installed tessera used files of the build tree"
fi
TESSERA_BACKENDS=cpu "$prefix/bin/tessera" devices >"$work/devices-cpu.out" 2>&1 ||
  { cat "$work/devices-cpu.out" >&2; fail "installed tessera devices with TESSERA_BACKENDS=cpu failed"; }
grep -q 'cpu:0' "$work/devices-cpu.out" ||
  { cat "$work/devices-cpu.out" >&2; fail "TESSERA_BACKENDS=cpu does not match the manifest's name"; }
if grep -q "tessera sample device" "$work/devices.out"; then
  fail "the sample device appeared without its directory being added"
fi
TESSERA_ADD_PLUGIN_PATH="$extra_dir" "$prefix/bin/tessera" devices >"$work/devices-added.out" 2>&1 ||
  { cat "$work/devices-added.out" >&2; fail "tessera devices with the sample failed"; }
cat "$work/devices-added.out"
grep -q "tessera sample device" "$work/devices-added.out" || fail "the sample device is missing"
grep -q cpu "$work/devices-added.out" || fail "the CPU device is missing next to the sample"

echo "install test: passed"
