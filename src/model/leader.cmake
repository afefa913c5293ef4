# Leader mode (leader_runner.h): the step messages and the leader/follower runner are plain C++;
# the MPI side (initialisation, the step broadcast, the load report, the orchestrator's spawned
# workers) needs MPI, beside the collectives (inflight_model_mpi, runtime.cmake). Without MPI the
# backend runs one-rank engines only and says so for others.
add_library(inflight_model_leader STATIC step_codec.cc leader_runner.cc)
target_link_libraries(inflight_model_leader PUBLIC inflight_model_cpu inflight_common
  PRIVATE inflight_warnings)

if(TARGET inflight_model_mpi)
  add_library(inflight_model_leader_mpi STATIC mpi_process.cc mpi_wait.cc mpi_step_channel.cc
    mpi_load_report.cc mpi_orchestrator.cc)
  target_link_libraries(inflight_model_leader_mpi PUBLIC inflight_model_leader inflight_model_mpi
    PRIVATE inflight_warnings)
endif()
