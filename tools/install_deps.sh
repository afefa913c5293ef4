#!/usr/bin/env bash
# Installs Inflight's build and test dependencies from Debian/Ubuntu packages. Idempotent: quiet when
# everything is already there.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git python3 npm curl
  libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libspdlog-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev libpcre2-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
