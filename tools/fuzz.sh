#!/usr/bin/env bash
# The clang sanitizer checks beyond the ASan+UBSan suite (tools/ck.sh test runs both parts):
#
# 1. Fuzzing. Builds the libFuzzer targets of tests/fuzz with clang, ASan and UBSan, and runs each
#    for a fixed time on its seed corpus (tests/fuzz/corpus/<target>) plus what earlier runs found.
#    Fails on any finding (crash, sanitizer report, MuJoCo error, leak, timeout, out of memory);
#    the input is then in <build>/findings/ (make it a regression test and a seed).
#
# 2. ThreadSanitizer. Builds the test executables that run threads with clang -fsanitize=thread
#    and runs their threaded tests; fails on any report, on a failed or skipped test, or if a
#    filter matches no test. Covered: comfree's OpenMP loop over contacts (parallel_min = 1,
#    OMP_NUM_THREADS=2), two handles stepping in two threads for every solver, one handle shared
#    by two threads (the in-use flag), and ck_rollout's thread pool. OpenMP is LLVM's libomp with
#    its Archer tool (OMP_TOOL_LIBRARIES=libarcher.so), which tells TSan about OpenMP's barriers
#    and reductions; GCC's libgomp is not instrumented and would give false reports. libomp's
#    own internals are not instrumented either: tools/tsan.supp ignores the calls it makes.
#    MuJoCo is not instrumented (races inside it are not seen). Built against the MuJoCo 3.x
#    pinned in pyproject.toml (.venvs/mujoco-<version>, made by tools/setup.sh), since ck_rollout
#    needs 3.x; on 2.2.2 (CK_TSAN_CMAKE_ARGS=-DCK_MUJOCO=system) all but the rollouts run.
#
#   tools/fuzz.sh [seconds per fuzz target, default 60] [fuzz build directory, default
#                 build-fuzz] [TSan build directory, default <fuzz build directory>-tsan]
#
# Needs Debian's clang, libclang-rt-14-dev and libomp-14-dev (tools/setup.sh installs them).
# Extra CMake arguments: CK_FUZZ_CMAKE_ARGS and CK_TSAN_CMAKE_ARGS (the MuJoCo to build against,
# e.g. "-DCK_MUJOCO=python -DCK_MUJOCO_PYTHON=/path/to/python"). CK_SKIP_TSAN=1 skips part 2.
# The last line is "ThreadSanitizer: <passed> passed, <failed> failed, <skipped> skipped".
set -euo pipefail

secs=${1:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build-fuzz}
tsan=${3:-$build-tsan}
llvm=/usr/lib/llvm-14/lib

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

[ "${CK_SKIP_TSAN:-0}" = "1" ] && exit $status

# test executable and the gtest filter of its tests that run threads
threaded=(
  "comfree_solver_test:*ParallelContactsMatchSerial*"
  "quality_test:*TwoThreadsMatchSequentialRuns*"
  "reliability_test:*HandleSharedByTwoThreads*:*HandleInUse*"
  "rollout_test:*"
)
if [ -z "${CK_TSAN_CMAKE_ARGS+set}" ]; then
  pinned="$(sed -n 's/^dependencies = \["mujoco==\([0-9.]*\)".*/\1/p' "$root/pyproject.toml")"
  CK_TSAN_CMAKE_ARGS="-DCK_MUJOCO=python -DCK_MUJOCO_PYTHON=$root/.venvs/mujoco-$pinned/bin/python"
  CK_TSAN_CMAKE_ARGS+=" -DCK_MUJOCO_MODELS=/usr/share/mujoco/model"
fi
echo "tsan: building ${threaded[*]%%:*} in $tsan"
# shellcheck disable=SC2086
CC=clang CXX=clang++ cmake -S "$root" -B "$tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCK_SANITIZE=thread -DCK_BUILD_TOOLS=OFF ${CK_TSAN_CMAKE_ARGS} >"$tsan.configure.log" 2>&1 ||
  { cat "$tsan.configure.log" >&2; exit 1; }
if ! grep -q "^OpenMP_omp_LIBRARY:FILEPATH=$llvm/libomp.so" "$tsan/CMakeCache.txt"; then
  echo "tsan: the build does not use LLVM's libomp ($llvm/libomp.so); is libomp-14-dev installed?" >&2
  exit 1
fi
cmake --build "$tsan" --target "${threaded[@]%%:*}"

npass=0; nfail=0; nskip=0
for entry in "${threaded[@]}"; do
  exe="${entry%%:*}" filter="${entry#*:}" log="$tsan/$exe.tsan.log" rc=0
  OMP_NUM_THREADS=2 OMP_TOOL_LIBRARIES="$llvm/libarcher.so" ARCHER_OPTIONS=verbose=1 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/tools/tsan.supp" \
    CK_TEST_QUICK=1 \
    "$tsan/tests/$exe" --gtest_filter="$filter" >"$log" 2>&1 || rc=$?
  np="$(grep -c '^\[       OK \]' "$log" || true)"
  ns="$(grep -c '^\[  SKIPPED \]' "$log" || true)"
  nf="$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$log")"
  nf="${nf:-0}"
  # the OpenMP test must run with Archer (the others may not start OpenMP at all)
  archer=1
  if [ "$exe" = comfree_solver_test ]; then
    grep -q "Archer detected OpenMP application with TSan" "$log" || archer=0
  fi
  if [ "$rc" != 0 ] || [ "$np" = 0 ] || [ "$ns" != 0 ] || [ "$archer" = 0 ] ||
    grep -q "ThreadSanitizer" "$log"; then
    echo "tsan: $exe ($filter) FAILED (exit $rc, $np passed, $ns skipped, Archer $archer);" \
      "see $log" >&2
    grep -A30 "WARNING: ThreadSanitizer" "$log" | head -60 >&2 || tail -30 "$log" >&2
    [ "$nf" = 0 ] && nf=1
    status=1
  fi
  echo "tsan: $exe: $np passed, $nf failed, $ns skipped"
  npass=$((npass + np)); nfail=$((nfail + nf)); nskip=$((nskip + ns))
done
echo "ThreadSanitizer: $npass passed, $nfail failed, $nskip skipped"
exit $status
