#!/usr/bin/env bash
# One entry point for a fresh Debian machine:
#   tools/ck.sh demo   set up, build, and compare every available solver on a bundled scene
#   tools/ck.sh test   set up, build with warnings as errors, run the whole test suite, then
#                      build with AddressSanitizer + UndefinedBehaviorSanitizer and run it again
#                      (long tests shortened with CK_TEST_QUICK)
#   tools/ck.sh build  set up and build only
#   tools/ck.sh bench  set up, build, and run every benchmark of ck-bench into bench_out/
# Environment: CK_BUILD_DIR (default build), CK_JOBS (default: number of cores),
#              CK_SKIP_SANITIZE=1 to skip the sanitizer pass.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
cmd="${1:-demo}"
build="${CK_BUILD_DIR:-build}"
jobs="${CK_JOBS:-$(nproc)}"

"$here/tools/setup.sh"

configure() {  # dir, extra cmake args...
  local dir="$1"; shift
  cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$jobs"
}

case "$cmd" in
  demo)
    configure "$build"
    "$build/tools/ck-run" stacked_primitives --compare all --steps 1000
    ;;
  build)
    configure "$build"
    ;;
  bench)
    configure "$build"
    "$build/tools/ck-bench" all --out "${CK_BENCH_OUT:-bench_out}"
    ;;
  test)
    configure "$build" -DCK_WERROR=ON
    ctest --test-dir "$build" -j "$jobs" --output-on-failure --timeout 900
    if [ "${CK_SKIP_SANITIZE:-0}" != "1" ]; then
      configure "$build-sanitize" -DCK_WERROR=ON -DCK_SANITIZE=address,undefined \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo
      CK_TEST_QUICK=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --test-dir "$build-sanitize" -j "$jobs" --output-on-failure --timeout 900
    fi
    ;;
  *)
    echo "usage: tools/ck.sh demo|test|build|bench" >&2
    exit 2
    ;;
esac
