#!/usr/bin/env bash
# Installs the Debian packages contactkit needs, if any are missing. Runs apt-get as root
# directly, through sudo otherwise, and says what to do when neither is possible.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config
  libmujoco-dev libmujoco-samples libqhull-dev
  libeigen3-dev libtinyxml2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libglfw3-dev libgl1-mesa-dri libpng-dev xvfb xauth
  gnuplot-nox
  clang
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages are installed"
  exit 0
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
echo "setup: done"
