#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (installs what is missing with tools/setup.sh):
#   tools/ck.sh demo    build against the pinned MuJoCo 3.x and compare every solver on a bundled
#                       scene
#   tools/ck.sh test    the whole suite on both MuJoCo versions: Debian's 2.2.2 and the 3.x pinned
#                       in pyproject.toml, each built with warnings as errors (on 3.x also the
#                       Python package, pip-installed into its venv, with pytest), then the 3.x
#                       build again with AddressSanitizer + UndefinedBehaviorSanitizer (long
#                       tests shortened with CK_TEST_QUICK), then each fuzz target for a minute
#                       and the threaded tests under ThreadSanitizer (tools/fuzz.sh)
#   tools/ck.sh build   build only
#   tools/ck.sh bench   build and run every benchmark of ck-bench into bench_out/ (Menagerie
#                       robots from $CK_MENAGERIE, default ../shared/models)
# Option: --mujoco VERSION  one MuJoCo only: 2.2.2 (Debian's) or any 3.x release on PyPI (e.g.
#                           3.3.7, installed into .venvs/mujoco-3.3.7)
# Environment: CK_BUILD_DIR (default build; each MuJoCo gets build/mujoco-<version>[-sanitize|-tsan]),
#              CK_JOBS (default: number of cores), CK_SKIP_SANITIZE=1 to skip the sanitizer pass,
#              CK_SKIP_FUZZ=1 to skip fuzzing and ThreadSanitizer (CK_SKIP_TSAN=1 the latter
#              only), CK_FUZZ_SECONDS per fuzz target (default 60).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
cmd="${1:-demo}"
shift || true
versions=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mujoco) versions+=("${2:?--mujoco needs a version: 2.2.2 or a 3.x release such as 3.3.7}"); shift 2 ;;
    *) echo "ck.sh: unknown argument '$1'; usage: tools/ck.sh demo|test|build|bench [--mujoco VERSION]" >&2; exit 2 ;;
  esac
done
build="${CK_BUILD_DIR:-build}"
jobs="${CK_JOBS:-$(nproc)}"
pinned="$(sed -n 's/^dependencies = \["mujoco==\([0-9.]*\)".*/\1/p' pyproject.toml)"
debian_version=2.2.2

if [ ${#versions[@]} -eq 0 ]; then
  case "$cmd" in
    test) versions=("$debian_version" "$pinned") ;;
    *) versions=("$pinned") ;;
  esac
fi

# the set-up: Debian packages, and a venv for each 3.x asked for
for v in "${versions[@]}"; do
  case "$v" in
    2.2.2) ;;
    2.*) echo "ck.sh: MuJoCo $v: the only 2.x is Debian's 2.2.2" >&2; exit 2 ;;
  esac
  "$here/tools/setup.sh" --mujoco "$v"
done

# the cmake arguments that select MuJoCo version v
mujoco_args() {
  case "$1" in
    2.*) echo "-DCK_MUJOCO=system" ;;
    *) echo "-DCK_MUJOCO=python -DCK_MUJOCO_PYTHON=$here/.venvs/mujoco-$1/bin/python" \
            "-DCK_MUJOCO_MODELS=/usr/share/mujoco/model" ;;
  esac
}

configure() {  # dir, extra cmake args...
  local dir="$1"; shift
  mkdir -p "$(dirname "$dir")"
  cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > "$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; exit 1; }
  grep "contactkit:" "$dir.configure.log" || true
  cmake --build "$dir" -j "$jobs"
}

# a stage's header, with the time it starts (UTC), so that a slow leg shows in the log
stage() { echo "=== [$(date -u +%H:%M:%S)] $*"; }

# runs ctest in dir with a label; records "label: N passed, N failed, N skipped"
summary=()
failed=0
run_tests() {  # label, dir, env...
  local label="$1" dir="$2"; shift 2
  local log="$dir.ctest.log" rc=0
  env "$@" ctest --test-dir "$dir" -j "$jobs" --output-on-failure --timeout 900 2>&1 | tee "$log" ||
    rc=$?
  local counts nfail total nskip
  # "100% tests passed out of N" or "98% tests passed, F tests failed out of N"
  counts="$(sed -n -e 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' \
                   -e 's/.*100% tests passed out of \([0-9]*\).*/0 \1/p' "$log" | tail -1)"
  read -r nfail total <<< "${counts:-0 0}"
  nskip="$(grep -c '(Skipped)' "$log" || true)"
  summary+=("$label: $((total - nfail - nskip)) passed, $nfail failed, $nskip skipped")
  if [ "$rc" != 0 ] || [ "$nfail" != 0 ] || [ "$total" = 0 ]; then failed=1; fi
}

# builds and installs the Python package into MuJoCo v's venv (against that MuJoCo), runs pytest
run_python_tests() {  # version
  local v="$1" py="$here/.venvs/mujoco-$1/bin/python" log="$build/python-mujoco-$1.pytest.log"
  stage "MuJoCo $v: pip install . (the Python package), pytest python/tests"
  # --no-deps: the package pins the newest MuJoCo; here it is built against this venv's
  "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
    -C build-dir="$build/python-mujoco-$v" "$here" || { summary+=("Python on MuJoCo $v: 0 passed, 1 failed, 0 skipped (pip install failed)"); failed=1; return; }
  local rc=0
  (cd "$here" && "$py" -m pytest -q -p no:cacheprovider python/tests) 2>&1 | tee "$log" || rc=$?
  local last np nf ns
  last="$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1)"
  nf="$(echo "$last" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || true)"
  ns="$(echo "$last" | grep -oE '[0-9]+ skipped' | grep -oE '[0-9]+' || true)"
  np="$(echo "$last" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || true)"
  summary+=("Python on MuJoCo $v: ${np:-0} passed, ${nf:-0} failed, ${ns:-0} skipped")
  if [ "$rc" != 0 ] || [ -z "$np" ]; then failed=1; fi
}

case "$cmd" in
  demo)
    configure "$build/mujoco-${versions[0]}" $(mujoco_args "${versions[0]}")
    "$build/mujoco-${versions[0]}/tools/ck-run" stacked_primitives --compare all --steps 1000
    ;;
  build)
    for v in "${versions[@]}"; do configure "$build/mujoco-$v" $(mujoco_args "$v"); done
    ;;
  bench)
    configure "$build/mujoco-${versions[0]}" $(mujoco_args "${versions[0]}")
    CK_MENAGERIE="${CK_MENAGERIE:-$(cd "$here/.." && pwd)/shared/models}" \
      "$build/mujoco-${versions[0]}/tools/ck-bench" all --out "${CK_BENCH_OUT:-bench_out}"
    ;;
  test)
    for v in "${versions[@]}"; do
      stage "MuJoCo $v: build with warnings as errors, run every test"
      configure "$build/mujoco-$v" $(mujoco_args "$v") -DCK_WERROR=ON
      run_tests "MuJoCo $v" "$build/mujoco-$v"
      case "$v" in 3.*) run_python_tests "$v" ;; esac
    done
    if [ "${CK_SKIP_SANITIZE:-0}" != "1" ]; then
      # the sanitizers on one version: the newest asked for (the 3.x users run)
      for v in "${versions[@]: -1}"; do
        stage "MuJoCo $v: AddressSanitizer + UndefinedBehaviorSanitizer, CK_TEST_QUICK=1"
        # -O1 -g1 (line tables): ASan's reports keep file and line; the build, most of this
        # leg's time, is lighter than -O2 -g
        configure "$build/mujoco-$v-sanitize" $(mujoco_args "$v") -DCK_WERROR=ON \
          -DCK_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
          "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
        run_tests "MuJoCo $v sanitizers" "$build/mujoco-$v-sanitize" CK_TEST_QUICK=1 \
          ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
      done
    fi
    if [ "${CK_SKIP_FUZZ:-0}" != "1" ]; then
      secs="${CK_FUZZ_SECONDS:-60}"
      v="${versions[*]: -1}"
      stage "fuzzing: each libFuzzer target ${secs} s under ASan+UBSan (MuJoCo 2.2.2), then the"
      echo "    threaded tests under ThreadSanitizer (MuJoCo $v; tools/fuzz.sh)"
      frc=0
      CK_FUZZ_CMAKE_ARGS="-DCK_MUJOCO=system" CK_TSAN_CMAKE_ARGS="$(mujoco_args "$v")" \
        "$here/tools/fuzz.sh" "$secs" "$build/fuzz" "$build/mujoco-$v-tsan" 2>&1 |
        tee "$build/fuzz.log" || frc=$?
      # targets run, less those that found something (none ran if the build failed)
      nran="$(grep -c "^fuzz: [a-z]* for " "$build/fuzz.log" || true)"
      nfound="$(grep -c "FOUND a problem" "$build/fuzz.log" || true)"
      summary+=("fuzzing: $((nran - nfound)) passed, $((3 - nran + nfound)) failed, 0 skipped")
      tsan_counts="$(sed -n 's/^ThreadSanitizer: //p' "$build/fuzz.log")"
      if [ "${CK_SKIP_TSAN:-0}" != "1" ]; then
        summary+=("ThreadSanitizer (MuJoCo $v): ${tsan_counts:-0 passed, 1 failed, 0 skipped}")
      fi
      [ "$frc" = 0 ] || failed=1
    fi
    stage "summary"
    np=0; nf=0; ns=0
    for line in "${summary[@]}"; do
      echo "  $line"
      read -r p f s <<< "$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\1 \2 \3/')"
      np=$((np + p)); nf=$((nf + f)); ns=$((ns + s))
    done
    echo "all: $np passed, $nf failed, $ns skipped"
    exit "$failed"
    ;;
  *)
    echo "usage: tools/ck.sh demo|test|build|bench [--mujoco VERSION]" >&2
    exit 2
    ;;
esac
