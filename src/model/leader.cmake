# Leader mode (leader_runner.h): the step messages and the leader/follower runner are plain C++;
# the MPI side (initialisation, the step broadcast, the load report) needs Open MPI (Debian:
# libopenmpi-dev openmpi-bin, which tools/install_deps.sh installs). Without MPI the backend runs
# one-rank engines only and says so for others.
add_library(inflight_model_leader STATIC step_codec.cc leader_runner.cc)
target_link_libraries(inflight_model_leader PUBLIC inflight_model_cpu inflight_common
  PRIVATE inflight_warnings)

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_library(inflight_model_mpi STATIC mpi_process.cc mpi_wait.cc mpi_step_channel.cc
    mpi_load_report.cc mpi_orchestrator.cc)
  target_link_libraries(inflight_model_mpi PUBLIC inflight_model_leader MPI::MPI_C
    PRIVATE inflight_warnings)
  # mpi.h in C++ would pull in the deprecated MPI C++ bindings (which do not build warning-free).
  target_compile_definitions(inflight_model_mpi PUBLIC OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
else()
  message(WARNING "Inflight: MPI not found (apt-get install libopenmpi-dev openmpi-bin): engines "
                  "split over several ranks (tp_size x pp_size > 1) cannot be served")
endif()
