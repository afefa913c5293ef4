// main() of the MPI tests: every rank of `mpirun -n N` runs every test in the same order (the tests
// meet in collectives). Rank 0 prints gtest's usual output; the other ranks print only their
// failures, prefixed with their rank. The exit status is non-zero on a rank that failed, which
// mpirun reports as the job's.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  const int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  // The runner may step on a thread other than main (mpi_collectives.h asks for SERIALIZED).
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int result = RUN_ALL_TESTS();
  MPI_Finalize();
  return result;
}
