# The CUDA ModelRunner (src/model/CMakeLists.txt includes this file when INFLIGHT_CUDA is on).
# Host C++ only: the device code lives in inflight_kernels_cuda.
if(TARGET inflight_kernels_cuda AND TARGET inflight_model_cpu)
  add_library(inflight_model_cuda STATIC cuda_model_runner.cc cuda_weights.cc cuda_transformer.cc
    cuda_graphs.cc cuda_sampling_stage.cc device_sampling_batch.cc embedding_bias_cache.cc)
  target_link_libraries(inflight_model_cuda PUBLIC inflight_model_cpu inflight_kernels_cuda
    inflight_model_io inflight_common CUDA::cudart PRIVATE inflight_warnings)
endif()
