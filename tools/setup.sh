#!/usr/bin/env bash
# Installs what contactkit needs on a fresh Debian 12 machine:
#   - the Debian packages (compilers, Debian's MuJoCo 2.2.2 and its example models, test and tool
#     libraries), if any are missing: apt-get as root, through sudo otherwise;
#   - MuJoCo 3.x from PyPI: a virtual environment .venvs/mujoco-<version> with mujoco==<version>
#     (default: the version pinned in pyproject.toml) with its system-identification extras
#     (mujoco.sysid, the baseline of `python -m contactkit.bench sysid`) and the packages of
#     tools/requirements.txt.
#   - with --mjx, also MJX (mujoco-mjx of the same version, with JAX on the CPU) in that venv, for
#     `python -m contactkit.bench mjx-toss` (not needed by the build or the tests).
# usage: tools/setup.sh [--mujoco VERSION] [--mjx]   (prints nothing else on stdout than progress)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mujoco_version=""
mjx=0
while [ $# -gt 0 ]; do
  case "$1" in
    --mujoco) mujoco_version="${2:?--mujoco needs a version, e.g. 3.3.7}"; shift 2 ;;
    --mjx) mjx=1; shift ;;
    *) echo "setup: unknown argument '$1'; usage: tools/setup.sh [--mujoco VERSION] [--mjx]" >&2; exit 2 ;;
  esac
done

packages=(
  g++ cmake ninja-build pkg-config
  libmujoco-dev libmujoco-samples libqhull-dev
  libeigen3-dev libtinyxml2-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
  libglfw3-dev libgl1-mesa-dri libpng-dev xvfb xauth
  gnuplot-nox
  python3 python3-venv python3-pip
  clang libclang-rt-14-dev libomp-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

install_debian() {
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages are installed"
  return 0
fi

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  run=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  run=(sudo)
elif command -v sudo >/dev/null 2>&1; then
  echo "setup: sudo will ask for your password to install the packages above"
  run=(sudo)
else
  echo "setup: these Debian packages are missing: ${missing[*]}" >&2
  echo "setup: run this script as root, or install them with: apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${run[@]}" apt-get update -qq
"${run[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: Debian packages installed"
}
install_debian

# MuJoCo 3.x from PyPI, in a venv per version, with what the Python package's build and tests need
pinned="$(sed -n 's/^dependencies = \["mujoco==\([0-9.]*\)".*/\1/p' "$here/pyproject.toml")"
version="${mujoco_version:-$pinned}"
case "$version" in
  2.*) exit 0 ;;  # MuJoCo 2.x comes from Debian
  3.*) ;;
  *) echo "setup: MuJoCo version '$version' is not a 3.x release (e.g. 3.3.7); 2.2.2 comes from Debian" >&2; exit 2 ;;
esac
venv="$here/.venvs/mujoco-$version"
want=("mujoco[sysid]==$version" -r "$here/tools/requirements.txt")
have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mujoco"))' 2>/dev/null || true)"
stamp="$venv/.ck-requirements"
if [ "$have" = "$version" ] && cmp -s "$here/tools/requirements.txt" "$stamp"; then
  echo "setup: MuJoCo $version is installed in $venv"
else
  echo "setup: installing MuJoCo $version from PyPI into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${want[@]}"
  cp "$here/tools/requirements.txt" "$stamp"
fi
if [ "$mjx" = 1 ]; then
  echo "setup: installing MJX $version (mujoco-mjx, JAX on the CPU) into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "mujoco-mjx==$version"
fi
echo "setup: done"
