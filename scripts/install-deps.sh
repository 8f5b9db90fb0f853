#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages (run as root). Idempotent.
# The CUDA 13 toolkit (nvcc, cuDNN 9, cuBLAS) is not a Debian package: when /usr/local/cuda exists
# the CUDA backend is built, otherwise the build is CPU-only.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libdnnl-dev
  libopencv-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
  qt6-base-dev qt6-base-dev-tools qt6-charts-dev libqt6opengl6-dev qt6-svg-dev
  libgl1-mesa-dev libxkbcommon-dev qt6-qpa-plugins
  clang clang-format libclang-rt-14-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
