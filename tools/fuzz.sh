#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan, and runs each for a fixed
# time on its seed corpus (tests/fuzz/corpus/<target>) plus what earlier runs found. Fails on any
# finding (crash, sanitizer report, MuJoCo error, leak, timeout, out of memory); the input is then
# in <build>/findings/ (make it a regression test and a seed).
#
#   tools/fuzz.sh [seconds per target, default 60] [build directory, default build-fuzz]
#
# Needs Debian's clang (tools/setup.sh installs it). Extra CMake arguments: CK_FUZZ_CMAKE_ARGS,
# e.g. "-DCK_MUJOCO=python -DCK_MUJOCO_PYTHON=/path/to/python".
set -euo pipefail

secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build-fuzz}

# shellcheck disable=SC2086
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCK_FUZZ=ON -DCK_SANITIZE=address,undefined -DCK_BUILD_TESTS=OFF -DCK_BUILD_TOOLS=OFF \
  ${CK_FUZZ_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" --target fuzz_loader fuzz_settings fuzz_sim

mkdir -p "$build/findings"
status=0
for target in loader settings sim; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${secs}s"
  if ! "$build/tests/fuzz/fuzz_$target" -max_total_time="$secs" -timeout=60 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$target-" \
    "$corpus" "$root/tests/fuzz/corpus/$target" 2>"$build/fuzz_$target.log"; then
    echo "fuzz: $target FOUND a problem; see $build/fuzz_$target.log and $build/findings/" >&2
    tail -40 "$build/fuzz_$target.log" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/fuzz_$target.log" || true
done
exit $status
