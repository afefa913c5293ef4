#!/usr/bin/env bash
# A backend folder copied elsewhere (as into another server's backend directory) must still resolve
# libinflight_proto.so, from the copy beside it ($ORIGIN), not from the build tree.
#   backend_folder_test.sh <build>/backends/<name>
set -euo pipefail
src=$1
name=$(basename "$src")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/$name"
lib=$(ls "$tmp/$name"/libtriton_*.so)
[[ -f "$tmp/$name/libinflight_proto.so" ]] || { echo "FAIL: no libinflight_proto.so in $src"; exit 1; }
resolved=$(ldd "$lib" | awk '$1 == "libinflight_proto.so" {print $3}')
if [[ "$resolved" != "$tmp/$name/libinflight_proto.so" ]]; then
  echo "FAIL: $(basename "$lib") copied to $tmp/$name resolves libinflight_proto.so to '$resolved'"
  exit 1
fi
echo "ok: $(basename "$lib") resolves libinflight_proto.so beside itself"
