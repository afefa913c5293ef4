# The CPU runtime: transformer forward pass and the CPU ModelRunner (included by CMakeLists.txt here).
add_library(inflight_model_cpu STATIC transformer_weights.cc transformer.cc cpu_model_runner.cc
  step_validation.cc rope_frequencies.cc attention_split.cc)
target_link_libraries(inflight_model_cpu PUBLIC inflight_kernels_cpu inflight_model_io inflight_common
  PRIVATE inflight_warnings)
