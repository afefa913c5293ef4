# The GPU benchmarks (inflight-bench-gpu-ceilings, -kernels, -overlap, -quant, -fp8-kv,
# -fp8-producers). Included by bench/CMakeLists.txt in the main build and by bench/gpu_standalone
# (CMake + CUDA toolkit only), so both need the same few targets: inflight_kernels_cuda, inflight_warnings, Threads.
if(NOT TARGET inflight_kernels_cuda)
  return()
endif()
get_filename_component(_inflight_bench_dir ${CMAKE_CURRENT_LIST_DIR} ABSOLUTE)

if(NOT TARGET inflight_bench_common)
  add_library(inflight_bench_common STATIC ${_inflight_bench_dir}/table.cc
    ${_inflight_bench_dir}/memcpy_bandwidth.cc)
  target_include_directories(inflight_bench_common PUBLIC ${_inflight_bench_dir})
  target_link_libraries(inflight_bench_common PUBLIC Threads::Threads PRIVATE inflight_warnings)
endif()

# Timing with CUDA events and graphs, random device fills, the copy and GEMM ceilings.
add_library(inflight_bench_gpu STATIC ${_inflight_bench_dir}/gpu_bench_util.cu
  ${_inflight_bench_dir}/gpu_paged_setup.cc)
target_include_directories(inflight_bench_gpu PUBLIC ${_inflight_bench_dir})
target_link_libraries(inflight_bench_gpu PUBLIC inflight_bench_common inflight_kernels_cuda
  inflight_tool_common inflight_common CUDA::cudart CUDA::cublasLt PRIVATE inflight_warnings)
# NOTE: C++17 for CUDA sources, as src/kernels/cuda (CMake 3.25 knows no cuda_std_20 for nvcc 13).
set_target_properties(inflight_bench_gpu PROPERTIES CUDA_STANDARD 17)

foreach(_bench gpu_ceilings gpu_kernels_bench gpu_overlap_bench gpu_quant_bench gpu_fp8_kv_bench
    gpu_fp8_producers_bench)
  string(REPLACE "_bench" "" _name ${_bench})
  string(REPLACE "_" "-" _name ${_name})
  add_executable(inflight-bench-${_name} ${_inflight_bench_dir}/${_bench}.cu)
  target_link_libraries(inflight-bench-${_name} PRIVATE inflight_bench_gpu inflight_warnings)
  set_target_properties(inflight-bench-${_name} PROPERTIES CUDA_STANDARD 17
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endforeach()
target_sources(inflight-bench-gpu-kernels PRIVATE ${_inflight_bench_dir}/gpu_kernels_bench_sampling.cu
                                                  ${_inflight_bench_dir}/gpu_kernels_bench_mlp_fp8.cu)
