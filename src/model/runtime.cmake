# The CPU runtime: transformer forward pass and the CPU ModelRunner (included by CMakeLists.txt here),
# and what both runners share: the shard of a split engine, the collectives interface, step checks.
add_library(inflight_model_cpu STATIC transformer_weights.cc transformer.cc cpu_model_runner.cc
  model_shard.cc collectives.cc step_validation.cc rope_frequencies.cc attention_split.cc
  attention_windows.cc)
target_link_libraries(inflight_model_cpu PUBLIC inflight_kernels_cpu inflight_model_io inflight_common
  PRIVATE inflight_warnings)
