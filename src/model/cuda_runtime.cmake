# The CUDA ModelRunner (src/model/CMakeLists.txt includes this file when INFLIGHT_CUDA is on).
# Host C++ only: the device code lives in inflight_kernels_cuda.
if(TARGET inflight_kernels_cuda AND TARGET inflight_model_cpu)
  add_library(inflight_model_cuda STATIC cuda_model_runner.cc cuda_weights.cc cuda_transformer.cc
    cuda_transformer_fp8.cc cuda_graphs.cc cuda_sampling_stage.cc device_sampling_batch.cc
    embedding_bias_cache.cc cuda_group_wait.cc cuda_pipeline_results.cc cuda_local_steps.cc
    cuda_model_runner_steps.cc)
  target_link_libraries(inflight_model_cuda PUBLIC inflight_model_cpu inflight_kernels_cuda
    inflight_model_io inflight_common CUDA::cudart PRIVATE inflight_warnings)
endif()

# NCCL collectives for the CUDA runner split over GPUs (one process per GPU under mpirun). NCCL
# comes with the CUDA toolkit here (include/nccl.h, lib/libnccl.so); a device machine's system
# libnccl.so.2 serves at run time. Built only when both NCCL and MPI (for the unique ids) exist.
find_path(INFLIGHT_NCCL_INCLUDE_DIR nccl.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
find_library(INFLIGHT_NCCL_LIBRARY NAMES nccl
  HINTS ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64 ${CUDAToolkit_LIBRARY_DIR})
if(TARGET inflight_model_cuda AND TARGET inflight_model_mpi AND INFLIGHT_NCCL_INCLUDE_DIR
   AND INFLIGHT_NCCL_LIBRARY)
  message(STATUS "Inflight: NCCL ${INFLIGHT_NCCL_LIBRARY}: multi-GPU collectives")
  add_library(inflight_model_nccl STATIC nccl_collectives.cc ipc_all_reduce.cc)
  target_include_directories(inflight_model_nccl SYSTEM PUBLIC ${INFLIGHT_NCCL_INCLUDE_DIR})
  target_link_libraries(inflight_model_nccl PUBLIC inflight_model_cpu inflight_model_mpi MPI::MPI_C
    inflight_kernels_cuda CUDA::cudart ${INFLIGHT_NCCL_LIBRARY} PRIVATE inflight_warnings)
elseif(TARGET inflight_model_cuda)
  message(WARNING "Inflight: NCCL or MPI not found: the CUDA runner runs on one GPU only")
endif()
