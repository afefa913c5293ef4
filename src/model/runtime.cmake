# The CPU runtime: transformer forward pass and the CPU ModelRunner (included by CMakeLists.txt here),
# and what both runners share: the shard of a split engine, the collectives interface, step checks.
add_library(inflight_model_cpu STATIC transformer_weights.cc transformer.cc cpu_model_runner.cc
  collectives.cc step_validation.cc lookahead_tokens.cc rope_frequencies.cc attention_split.cc
  attention_windows.cc all_reduce_choice.cc step_result_message.cc rank_weights.cc)
target_link_libraries(inflight_model_cpu PUBLIC inflight_kernels_cpu inflight_model_io inflight_common
  PRIVATE inflight_model_build inflight_warnings)
# Collectives between processes over MPI (CPU ranks under mpirun). A target of its own so that MPI
# links only into what runs split engines over processes.
find_package(MPI COMPONENTS C)
if(MPI_C_FOUND)
  add_library(inflight_model_mpi STATIC mpi_collectives.cc mpi_node_layout.cc)
  target_link_libraries(inflight_model_mpi PUBLIC inflight_model_cpu MPI::MPI_C PRIVATE inflight_warnings)
  # Open MPI's and MPICH's mpi.h pull in their deprecated C++ bindings unless told not to.
  target_compile_definitions(inflight_model_mpi PUBLIC OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
else()
  message(WARNING "Inflight: MPI not found (apt-get install libopenmpi-dev openmpi-bin): "
                  "no multi-process CPU runs")
endif()
