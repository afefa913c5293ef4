#!/usr/bin/env bash
# ./tools/quickstart.sh on a device machine, which has no network: the Debian packages that
# tools/install_deps.sh would install and the image may lack travel as .debs, and .testdata/ travels
# for the tokenizer.
#
#   tests/gpu/quickstart_round.sh --fetch     # here: downloads the .debs into .device/debs
#   bash tests/gpu/quickstart_round.sh        # there, with .device/debs and .testdata carried
#
# There, every carried package that is not installed yet is installed with dpkg (dependencies the
# image already satisfies under other names are not checked), then quickstart runs unchanged; its
# log and the server's go to $OUT (or out/quickstart-round).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
debs="$root/.device/debs"
# The libraries of install_deps.sh that a CUDA image with protobuf, spdlog and nlohmann-json was seen
# to lack, with their runtime packages.
packages=(libboost-dev libboost1.74-dev libpcre2-dev libpcre2-16-0 libpcre2-32-0
  libpcre2-posix3 libbenchmark-dev libbenchmark1debian libgmock-dev protobuf-compiler libprotoc32
  nlohmann-json3-dev)

if [[ "${1:-}" == "--fetch" ]]; then
  mkdir -p "$debs"
  (cd "$debs" && apt-get download "${packages[@]}")
  exit
fi

out=${OUT:-$root/out/quickstart-round}
mkdir -p "$out"
for f in "$debs"/*.deb; do
  [[ -e "$f" ]] || break
  p=$(dpkg-deb -f "$f" Package)
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" && continue
  dpkg -i --force-depends "$f" >/dev/null 2>&1 || echo "quickstart_round: carried $p not installed"
done
start=$(date +%s)
"$root/tools/quickstart.sh" >"$out/quickstart.log" 2>&1
rc=$?
echo "quickstart.sh: exit $rc in $(( $(date +%s) - start )) s"
echo "compiler warnings: $(grep -c 'warning:' "$out/quickstart.log")"
sed -n '/^== Generate (/,$p' "$out/quickstart.log"
cp "$root/build/quickstart/server.log" "$out/" 2>/dev/null
grep -E "cuda model runner on|CPU runner" "$out/server.log" 2>/dev/null | head -1
exit $rc
