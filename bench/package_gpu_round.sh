#!/usr/bin/env bash
# Prepares what bench/run_gpu_round.sh needs on a device machine that has the CUDA toolkit, CMake,
# ninja and Python (with torch and transformers, for the HF peer) but none of our Debian libraries:
# a Release CUDA build of inflight-build (writes the random engine), inflight-bench-executor,
# inflight-server and its backend (the server-overhead step), and, as a fallback, the two GPU
# benchmarks (which the round builds there itself), stripped, with the shared libraries they need
# that are neither glibc's, the compiler runtime's nor CUDA's. The Python scripts (hf_peer.py,
# server_overhead.py, tools/benchmark_core_model.py, tools/fill_template.py) travel with the
# working tree.
#
#   bench/package_gpu_round.sh          # build into build-perf, collect into .device/bench
#
# .device/bench/ layout (.device/ is in .gitignore; carry ".device/bench" with the device call):
#   libexec/    inflight-bench-executor, inflight-build, inflight-server,
#               inflight-bench-gpu-ceilings, inflight-bench-gpu-kernels, inflight-bench-gpu-overlap,
#               inflight-bench-gpu-quant, inflight-bench-gpu-fp8-kv, inflight-bench-gpu-fp8-producers
#   backends/   inflight/libtriton_inflight.so, as inflight-server's --backend-directory expects
#   lib/        libprotobuf, libspdlog, libfmt, libinflight_proto, ... as ldd resolves them here
#   commit.txt  the commit and whether the tree had changes, for the results' header
#
# Environment: INFLIGHT_PERF_BUILD_DIR (default <repo>/build-perf), INFLIGHT_BENCH_PACKAGE_DIR
# (default <repo>/.device/bench), INFLIGHT_CUDA_ARCHS (default 90a-real: H100/H200),
# INFLIGHT_JOBS (default 2), INFLIGHT_PACKAGE_MAX_MIB (default 40: fail above it; the device call
# carries 64 MiB in all, working tree included).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${INFLIGHT_PERF_BUILD_DIR:-$root/build-perf}
dest=${INFLIGHT_BENCH_PACKAGE_DIR:-$root/.device/bench}
archs=${INFLIGHT_CUDA_ARCHS:-90a-real}
jobs=${INFLIGHT_JOBS:-2}
max_mib=${INFLIGHT_PACKAGE_MAX_MIB:-40}
programs=(inflight-bench-executor inflight-build inflight-server inflight-bench-gpu-ceilings
  inflight-bench-gpu-kernels inflight-bench-gpu-overlap inflight-bench-gpu-quant
  inflight-bench-gpu-fp8-kv inflight-bench-gpu-fp8-producers)
backends=(inflight)

generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DINFLIGHT_CUDA=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=$archs" -DINFLIGHT_BENCH=ON >/dev/null
grep -q "^INFLIGHT_CUDA:BOOL=ON" "$build/CMakeCache.txt" ||
  { echo "package_gpu_round: $build is not a CUDA build (no nvcc found?)" >&2; exit 1; }
targets=("${programs[@]}")
for b in "${backends[@]}"; do targets+=("triton_$b"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

rm -rf "$dest"
mkdir -p "$dest/libexec" "$dest/lib"
for p in "${programs[@]}"; do cp "$build/bin/$p" "$dest/libexec/"; done
for b in "${backends[@]}"; do
  mkdir -p "$dest/backends/$b"
  cp "$build/backends/$b/libtriton_$b.so" "$dest/backends/$b/"
done
strip --strip-unneeded "$dest"/libexec/* "$dest"/backends/*/*.so

# Everything ldd resolves except glibc's own, the compiler runtime (the device's is at least as
# new, and ours would need this machine's glibc) and CUDA's (the device has its own toolkit).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libresolv\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart\.|libcublas|libnvidia|libnvrtc|libnvJitLink)'
for f in "$dest"/libexec/* "$dest"/backends/*/*.so; do
  ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r soname path; do
  grep -qE "$skip" <<<"$soname" || cp -L "$path" "$dest/lib/$soname"
done
strip --strip-unneeded "$dest"/lib/* 2>/dev/null || true

{
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "changed files in the working tree: $(git -C "$root" status --porcelain 2>/dev/null | wc -l)"
  echo "packaged $(date -u +%F' '%H:%M) UTC on $(uname -m), CUDA archs $archs"
} >"$dest/commit.txt"

echo "package_gpu_round: $dest"
du -sh "$dest"/libexec/* "$dest"/backends/*/*.so "$dest/lib" | sed 's/^/  /'
echo "  libraries: $(find "$dest/lib" -type f -printf '%f ')"
echo "  glibc needed: $(objdump -T "$dest"/libexec/* "$dest"/backends/*/*.so "$dest"/lib/* 2>/dev/null |
  grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1)"
total_kib=$(du -sk "$dest" | cut -f1)
echo "  total: $(( total_kib / 1024 )) MiB (limit $max_mib MiB)"
if [[ -d "$root/.device" ]]; then
  echo "  .device in all (what carry [\".device\"] sends): $(du -sh "$root/.device" | cut -f1)"
fi
if (( total_kib > max_mib * 1024 )); then
  echo "package_gpu_round: $dest is over $max_mib MiB" >&2
  exit 1
fi
