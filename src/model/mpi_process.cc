#include "model/mpi_process.h"

#include <mpi.h>

#include <cstdlib>
#include <mutex>

#include "common/logging.h"

namespace inflight::model {
namespace {

struct InitState {
  std::once_flag once;
  Status status;
  bool ours = false;  // we called MPI_Init_thread, so we call MPI_Finalize
};

InitState& State() {
  static InitState* state = new InitState();  // never destroyed: the atexit handler reads it
  return *state;
}

void FinalizeAtExit() {
  FinalizeMpiIfOurs();
}

}  // namespace

Status EnsureMpiInitialized() {
  InitState& state = State();
  std::call_once(state.once, [&state] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = MPI_THREAD_SINGLE;
    if (initialized) {
      MPI_Query_thread(&provided);
    } else {
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      if (rc != MPI_SUCCESS) {
        state.status = Internal("MPI_Init_thread failed with code " + std::to_string(rc));
        return;
      }
      state.ours = true;
      std::atexit(FinalizeAtExit);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      state.status = Unsupported(
          "MPI provides thread level " + std::to_string(provided) +
          "; leader mode needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (the model steps on "
          "the executor's thread, not on the thread that initialised MPI)");
      return;
    }
    LOG_INFO("MPI initialised {} (thread level {})", state.ours ? "by the backend" : "by the host",
             provided == MPI_THREAD_MULTIPLE ? "multiple" : "serialized");
  });
  return state.status;
}

void FinalizeMpiIfOurs() {
  if (!State().ours) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace inflight::model
