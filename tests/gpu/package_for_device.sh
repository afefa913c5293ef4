#!/usr/bin/env bash
# Builds what a device round needs (Release, CUDA) on this machine and collects it into .device/, a
# folder small enough to carry to a device machine that has the CUDA toolkit and Python but none of
# our Debian libraries. tests/gpu/device_round.sh then runs everything there.
#
#   tests/gpu/package_for_device.sh            # build into build-gpu, collect into .device
#
# .device/ layout:
#   libexec/   the stripped programs and GPU test binaries
#   bin/       one wrapper per program: sets LD_LIBRARY_PATH to lib/, then the CUDA libraries
#              (INFLIGHT_CUDA_LIB_DIRS, default $CUDA_HOME's lib folders), and execs libexec/<name>, so the
#              libraries we carry never leak into other processes (python, torch)
#   backends/  <name>/libtriton_<name>.so, as --backend-directory expects
#   lib/       the shared libraries those need that are neither glibc, the compiler runtime
#              (libstdc++, libgcc_s) nor CUDA's (the device has its own toolkit and driver); NCCL is
#              not carried either (218 MB): the device's own libnccl.so.2 (PyTorch's) is used
#   openmpi/   Open MPI's launcher (mpirun, orted), components and help files from this machine,
#              relocated with OPAL_PREFIX (tests/gpu/openmpi_env.sh sets it up), for multi-GPU runs:
#              the device machine has no MPI of its own
#
# Environment: INFLIGHT_GPU_BUILD_DIR (default <repo>/build-gpu), INFLIGHT_DEVICE_DIR (default
# <repo>/.device), INFLIGHT_CUDA_ARCHS (default 90a-real: H100/H200), INFLIGHT_JOBS (default 2),
# INFLIGHT_GPU_CONFIGURE=0 (build the targets in an already configured build folder as it is, e.g.
# the main RelWithDebInfo build/, instead of configuring it as Release).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${INFLIGHT_GPU_BUILD_DIR:-$root/build-gpu}
dest=${INFLIGHT_DEVICE_DIR:-$root/.device}
archs=${INFLIGHT_CUDA_ARCHS:-90a-real}
jobs=${INFLIGHT_JOBS:-2}

programs=(inflight-server inflight-build make_checkpoint inflight-parity inflight-bench-allreduce
  inflight-bench-gpu-quant inflight-bench-gpu-fp8-kv inflight-bench-gpu-fp8-producers
  inflight-bench-executor inflight-bench-quant-quality
  inflight-bench-gpu-ceilings inflight-bench-gpu-kernels)
# gpu_nccl_collectives_test and inflight-bench-allreduce run under mpirun -n 2 (2 GPUs).
gpu_tests=(gpu_norm_test gpu_elementwise_test gpu_rope_kv_write_test gpu_paged_attention_test
  gpu_fp8_kv_test gpu_sampling_test gpu_gemm_test gpu_quant_linear_test gpu_fp8_producers_test
  gpu_token_patch_test gpu_cuda_lookahead_test gpu_split_one_device_test
  gpu_cuda_model_runner_test gpu_cuda_quant_runner_test gpu_executor_device_sampling_test)
# Run under mpirun -n 2 by tests/gpu/multi_gpu_round.sh, not with the single-GPU tests.
mpi_gpu_tests=(gpu_nccl_collectives_test)
backends=(inflight inflight_tokenizer inflight_bls)

if [[ "${INFLIGHT_GPU_CONFIGURE:-1}" != 0 ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DINFLIGHT_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=$archs" -DINFLIGHT_BENCH=ON -DINFLIGHT_TESTS=ON >/dev/null
fi
# The multi-GPU binaries exist only where NCCL and MPI were found: leave out what was not configured.
available=$(cmake --build "$build" --target help | sed -E 's/^\.\.\. //; s/:.*$//')
keep() { grep -qx "$1" <<<"$available"; }
for list in programs gpu_tests mpi_gpu_tests; do
  declare -n items=$list
  kept=()
  for t in "${items[@]}"; do
    if keep "$t"; then kept+=("$t"); else echo "package_for_device: no target $t here, left out" >&2; fi
  done
  items=("${kept[@]}")
  unset -n items
done
targets=("${programs[@]}" "${gpu_tests[@]}" "${mpi_gpu_tests[@]}")
for b in "${backends[@]}"; do targets+=("triton_$b"); done
worker=inflight-executor-worker  # orchestrator mode's spawned ranks (built where MPI was found)
if keep "$worker"; then targets+=("$worker"); else worker=""; fi
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

# Only this script's folders: bench/package_gpu_round.sh keeps its own in $dest/bench.
rm -rf "$dest/libexec" "$dest/bin" "$dest/lib" "$dest/backends" "$dest/openmpi"
mkdir -p "$dest/libexec" "$dest/bin" "$dest/lib"
for p in "${programs[@]}"; do cp "$build/bin/$p" "$dest/libexec/"; done
for t in "${gpu_tests[@]}" "${mpi_gpu_tests[@]}"; do cp "$(find "$build/tests/gpu" -maxdepth 1 -name "$t" -type f)" "$dest/libexec/"; done
for b in "${backends[@]}"; do
  mkdir -p "$dest/backends/$b"
  cp "$build/backends/$b/libtriton_$b.so" "$dest/backends/$b/"
done
if [[ -n "$worker" ]]; then
  cp "$build/backends/inflight/$worker" "$dest/libexec/"
  # The backend spawns it from beside libtriton_inflight.so; Open MPI's daemon starts it without the
  # environment our bin/ wrappers set, so this wrapper sets it.
  cat >"$dest/backends/inflight/$worker" <<'WRAP'
#!/bin/sh
here=$(cd "$(dirname "$0")/../.." && pwd)
c=${CUDA_HOME:-/usr/local/cuda}
cuda="${INFLIGHT_CUDA_LIB_DIRS:-$c/lib64:$c/lib:$c/targets/x86_64-linux/lib}"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$cuda" exec "$here/libexec/inflight-executor-worker" "$@"
WRAP
  chmod +x "$dest/backends/inflight/$worker"
fi
strip --strip-unneeded "$dest"/libexec/* "$dest"/backends/*/*.so
# Python gRPC stubs of proto/grpc_service.proto, as the e2e gRPC tests load them (INFLIGHT_GRPC_PY).
rm -rf "$dest/grpc_py"
[[ -d "$build/tests/e2e/grpc_py" ]] && cp -r "$build/tests/e2e/grpc_py" "$dest/grpc_py"

for exe in "$dest"/libexec/*; do
  name=$(basename "$exe")
  cat >"$dest/bin/$name" <<'WRAP'
#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
c=${CUDA_HOME:-/usr/local/cuda}
cuda="${INFLIGHT_CUDA_LIB_DIRS:-$c/lib64:$c/lib:$c/targets/x86_64-linux/lib}"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:$cuda" exec "$here/libexec/$(basename "$0")" "$@"
WRAP
  chmod +x "$dest/bin/$name"
done

# Libraries to carry: everything ldd resolves except glibc's own, the compiler runtime (the device's
# is at least as new, and ours would need this machine's glibc) and CUDA's.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libresolv\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart\.|libcublas|libnvidia|libnccl)'
for f in "$dest"/libexec/* "$dest"/backends/*/*.so; do
  ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if ! grep -qE "$skip" <<<"$soname"; then
    cp -L "$path" "$dest/lib/$soname"
  fi
done
strip --strip-unneeded "$dest"/lib/* 2>/dev/null || true

# Open MPI 4.1 (Debian's layout: prefix /usr, libraries and components under
# lib/x86_64-linux-gnu/openmpi, PMIx under lib/x86_64-linux-gnu/pmix2), relocated by OPAL_PREFIX and
# PMIX_INSTALL_PREFIX; the libraries its launcher and components need go to lib/ beside ours.
ompi="$dest/openmpi"
arch_lib=lib/x86_64-linux-gnu
mkdir -p "$ompi/usr/bin" "$ompi/usr/$arch_lib" "$ompi/usr/share"
cp -L /usr/bin/orterun /usr/bin/orted "$ompi/usr/bin/"
# mpirun: orterun with the carried libraries, which stay out of every other process's environment.
cat >"$ompi/usr/bin/mpirun" <<'WRAP'
#!/bin/sh
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/../../../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/orterun" "$@"
WRAP
chmod +x "$ompi/usr/bin/mpirun"
cp -a "/usr/$arch_lib/openmpi" "/usr/$arch_lib/pmix2" "$ompi/usr/$arch_lib/"
rm -rf "$ompi/usr/$arch_lib/openmpi/include" "$ompi/usr/$arch_lib/pmix2/include" "$ompi/usr/$arch_lib"/*/lib/*.a
cp -a /usr/share/openmpi "$ompi/usr/share/"
cp -a /etc/openmpi "$ompi/etc"
for f in "$ompi"/usr/bin/orte* "$ompi/usr/$arch_lib"/openmpi/lib/openmpi3/*.so "$ompi/usr/$arch_lib"/pmix2/lib/pmix/*.so; do
  ldd "$f" 2>/dev/null | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r soname path; do
  if ! grep -qE "$skip" <<<"$soname" && [[ ! -e "$dest/lib/$soname" ]]; then cp -L "$path" "$dest/lib/$soname"; fi
done
strip --strip-unneeded "$dest"/lib/* "$ompi"/usr/bin/orte* "$ompi/usr/$arch_lib"/*/lib/*.so* \
  "$ompi/usr/$arch_lib"/openmpi/lib/openmpi3/*.so "$ompi/usr/$arch_lib"/pmix2/lib/pmix/*.so 2>/dev/null || true

echo "package_for_device: $dest"
du -sh "$dest"/* "$dest" | sed 's/^/  /'
echo "  glibc needed: $(objdump -T "$dest"/libexec/* "$dest"/backends/*/*.so "$dest"/lib/* 2>/dev/null |
  grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -1)"
