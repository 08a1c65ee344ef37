#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Records one run of `tessera bench --suite cpu` as bench/results/cpu-DATE.txt
# (the table, under a header naming the commit, the machine and the command)
# and bench/results/cpu-DATE.json (the same run, machine-readable).
#
#   bench/results/record-cpu-suite.sh [BUILD_DIR]     (default: build-bench)
#
# Run it from the repository root on a Release build of the tree to record.
# The run takes /tmp/tessera-bench.lock, so timings of people sharing the
# machine do not overlap (they wait for each other, not for compilers).
set -eu

build=${1:-build-bench}
tool=./$build/bin/tessera
day=$(date -u +%F)
out=bench/results/cpu-$day
if [ ! -x "$tool" ]; then
  echo "record-cpu-suite.sh: $tool not found (build it first)" >&2
  exit 2
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ "$build_type" != "Release" ]; then
  echo "record-cpu-suite.sh: $build is a '$build_type' build; record Release builds only" >&2
  exit 2
fi

command="flock /tmp/tessera-bench.lock $tool bench --suite cpu --json $out.json | tee $out.txt"

# The header is gathered before the run (the tree may change during it).
header=$(mktemp)
trap 'rm -f "$header" "$header.table"' EXIT
{
  echo "# tessera bench --suite cpu, $(date -u '+%F %H:%M UTC')"
  echo "#"
  echo "# commit: $(git rev-parse HEAD) ($(git log -1 --format=%s | cut -c1-80))"
  changed=$(git status --short --untracked-files=no | wc -l)
  if [ "$changed" -gt 0 ]; then
    echo "# working tree: $changed tracked files differ from the commit (uncommitted work):"
    git status --short --untracked-files=no | sed 's/^/#   /'
    echo "# untracked source files in the build:"
    git status --short | sed -n 's/^?? //p' | grep -E '\.(c|h|txt|cmake)$|/$' | sed 's/^/#   /' || true
  else
    echo "# working tree: clean"
  fi
  compiler=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
  echo "# build: $build ($build_type), $("${compiler:-cc}" --version | head -1)"
  echo "#"
  echo "# machine (lscpu summary):"
  lscpu | grep -E '^(Architecture|CPU\(s\)|Vendor ID|Model name|CPU family|Model|Stepping|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|Hypervisor vendor|L1d cache|L2 cache|L3 cache|NUMA node\(s\)):' |
    sed 's/^/#   /'
  echo "#   vector flags: $(lscpu | sed -n 's/^Flags: *//p' | tr ' ' '\n' |
    grep -E '^(avx|avx2|fma|f16c|avx512.*|amx.*)$' | tr '\n' ' ')"
  echo "#   memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}'), kernel $(uname -r)"
  echo "#   OpenBLAS: $(dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' 'libopenblas0*' 2>/dev/null |
    awk '$1 == "ii" {printf "%s %s ", $2, $3}')"
  echo "#   load before the run: $(cat /proc/loadavg)"
  echo "#"
  echo "# command:"
  echo "#   $command"
  echo
} >"$header"

sh -c "$command"

# The table first written by tee, then put under its header; rows that other
# processes disturbed (last column "others" above 0.2 cores) are named at the
# end, so nobody reads their ratios without knowing.
cat "$header" "$out.txt" >"$header.table"
disturbed=$(awk 'NF > 8 && $NF ~ /^[0-9]+[.][0-9]+$/ && $NF + 0 > 0.2 {print $1, $2, $3, "(others " $NF ")"}' "$out.txt")
{
  echo
  echo "# load after the run: $(cat /proc/loadavg)"
  if [ -n "$disturbed" ]; then
    echo "# rows timed while other processes used more than 0.2 cores (added by record-cpu-suite.sh):"
    echo "$disturbed" | sed 's/^/#   /'
  else
    echo "# no row was timed while other processes used more than 0.2 cores"
  fi
} >>"$header.table"
mv "$header.table" "$out.txt"
echo "recorded $out.txt and $out.json"
