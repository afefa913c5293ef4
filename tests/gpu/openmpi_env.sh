# Sourced: puts the Open MPI that tests/gpu/package_for_device.sh carried (<package>/openmpi) on
# PATH and relocates it (OPAL_PREFIX, PMIX_INSTALL_PREFIX), for a device machine with no MPI of its
# own. Also the settings every multi-GPU run here needs: root allowed, NVLink SHARP off.
#
#   source tests/gpu/openmpi_env.sh .device
ompi_pkg=$(cd "${1:?package folder}" && pwd)
if [[ -x "$ompi_pkg/openmpi/usr/bin/orterun" ]]; then
  export OPAL_PREFIX="$ompi_pkg/openmpi/usr" OPAL_SYSCONFDIR="$ompi_pkg/openmpi/etc"
  export PMIX_INSTALL_PREFIX="$OPAL_PREFIX/lib/x86_64-linux-gnu/pmix2"
  # bin/mpirun adds <package>/lib for itself; our programs' wrappers add it for the ranks.
  export PATH="$OPAL_PREFIX/bin:$PATH"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# Shared memory and loopback TCP only; PMIx's compression component is not carried.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export PMIX_MCA_pcompress_base_silence_warning=1
# One host: NCCL's bootstrap on loopback (the first round here, which left NCCL to pick an
# interface of the VM, did not finish its multi-GPU step; with lo the NCCL test took 11 s).
export NCCL_SOCKET_IFNAME=lo
# NVLink SHARP (multicast) must stay off on shared machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
