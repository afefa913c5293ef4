#!/usr/bin/env bash
# The backend folders copied elsewhere (as into another server's backend directory: cp -r
# <dir>/* /opt/tritonserver/backends/) must resolve libinflight_proto.so to the one copy they carry,
# in inflight/, through $ORIGIN, never to the build tree; and there must be exactly one copy, since a
# process that loads both backends can hold only one (CMakeLists.txt says why).
#   backend_folder_test.sh <build>/backends
set -euo pipefail
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src"/* "$tmp/"
copies=$(find "$tmp" -name 'libinflight_proto.so*' | wc -l)
[[ "$copies" -eq 1 ]] || { echo "FAIL: $copies copies of libinflight_proto.so in $src"; exit 1; }
want="$tmp/inflight/libinflight_proto.so"
for lib in "$tmp"/inflight/libtriton_inflight.so "$tmp"/inflight_tokenizer/libtriton_inflight_tokenizer.so; do
  resolved=$(realpath -m "$(ldd "$lib" | awk '$1 == "libinflight_proto.so" {print $3}')")
  if [[ "$resolved" != "$want" ]]; then
    echo "FAIL: $(basename "$lib") copied to $tmp resolves libinflight_proto.so to '$resolved', not $want"
    exit 1
  fi
  echo "ok: $(basename "$lib") resolves libinflight_proto.so to the copied inflight/ folder"
done
