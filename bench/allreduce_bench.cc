// inflight-bench-allreduce: latency of the tensor-parallel all-reduce (bf16 sum) per message size,
// NCCL against our CUDA IPC one-shot and two-shot kernels (model/ipc_all_reduce.h) and the `auto`
// rule's pick, beside a floor. Run one process per GPU:
//
//   mpirun -n 2 --allow-run-as-root -x NCCL_NVLS_ENABLE=0 build/bin/inflight-bench-allreduce
//
// Each cell is the median over --replays replays of a CUDA graph of --calls_per_graph all-reduces
// of one buffer (decode steps replay their collectives from graphs too), divided by the calls:
// CUDA events between consecutive replays queued back to back, so the ranks' start skew counts
// once, not per sample. The floor is the bus time of an all-reduce at --nvlink_gbps per direction,
// 2 (N - 1) / N x bytes / bandwidth (the ring's traffic; one-shot moves (N - 1) x bytes, the same
// for two ranks), with no latency at all: small messages sit far above it, large ones approach it.
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/flags.h"
#include "model/all_reduce_choice.h"
#include "model/nccl_collectives.h"
#include "table.h"

namespace inflight::bench {
namespace {

struct Options {
  std::vector<std::int64_t> sizes = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                     1 << 20, 4 << 20, 16 << 20, 64 << 20};
  std::int64_t replays = 200;
  std::int64_t calls_per_graph = 16;
  double nvlink_gbps = 450;  // H100 / H200 NVLink 4: 900 GB/s both directions together
};

// Microseconds per call of `c`'s AllReduceSum on `bytes` of bf16, or a negative value on error
// (printed by rank 0).
double TimeAllReduce(model::Collectives& c, std::int64_t bytes, const Options& o) {
  const std::int64_t count = bytes / 2;
  void* buffer = nullptr;
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(o.replays) + 1, nullptr);
  double result = -1;
  Status st;
  if (cudaMalloc(&buffer, static_cast<std::size_t>(bytes)) != cudaSuccess ||
      cudaMemset(buffer, 0, static_cast<std::size_t>(bytes)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::cerr << "cuda set-up failed for " << bytes << " bytes\n";
    return -1;
  }
  for (cudaEvent_t& e : events) cudaEventCreate(&e);
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  for (std::int64_t i = 0; i < o.calls_per_graph && st.ok(); ++i) {
    st = c.AllReduceSum(buffer, count, DType::kBFloat16, stream);
  }
  const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
  if (st.ok() && captured == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
    for (int warm = 0; warm < 3; ++warm) cudaGraphLaunch(exec, stream);
    cudaStreamSynchronize(stream);
    MPI_Barrier(MPI_COMM_WORLD);
    cudaEventRecord(events[0], stream);
    for (std::size_t r = 1; r < events.size(); ++r) {
      cudaGraphLaunch(exec, stream);
      cudaEventRecord(events[r], stream);
    }
    if (cudaStreamSynchronize(stream) == cudaSuccess) {
      std::vector<double> us;
      for (std::size_t r = 1; r < events.size(); ++r) {
        float ms = 0;
        cudaEventElapsedTime(&ms, events[r - 1], events[r]);
        us.push_back(1000.0 * ms / static_cast<double>(o.calls_per_graph));
      }
      result = Median(us);
    }
  } else if (!st.ok()) {
    std::cerr << st.ToString() << "\n";
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (graph != nullptr) cudaGraphDestroy(graph);
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  cudaStreamDestroy(stream);
  cudaFree(buffer);
  MPI_Barrier(MPI_COMM_WORLD);
  return result;
}

std::string Us(double us) {
  return us < 0 ? "error" : Fmt(us, 1);
}

int Main(int argc, char** argv) {
  Options o;
  tools::FlagSet flags("inflight-bench-allreduce",
                       "bf16 all-reduce latency per size: NCCL vs CUDA IPC one-shot / two-shot. "
                       "Run under mpirun -n <tp_size>, one GPU per rank.");
  flags.Add("sizes", "BYTES,...", "message sizes in bytes (default 1 KiB to 64 MiB, x4)",
            [&](const std::string& v) {
              return tools::ParseIntList("--sizes", v, 2, std::int64_t{1} << 31, &o.sizes);
            });
  flags.Add(
      "replays", "N", "timed graph replays per cell (default 200)",
      [&](const std::string& v) { return tools::ParseInt("--replays", v, 1, 100000, &o.replays); });
  flags.Add("calls_per_graph", "N", "all-reduces per graph (default 16)",
            [&](const std::string& v) {
              return tools::ParseInt("--calls_per_graph", v, 1, 1024, &o.calls_per_graph);
            });
  flags.Add("nvlink_gbps", "GB/S", "link bandwidth per direction for the floor (default 450)",
            [&](const std::string& v) {
              return tools::ParseDouble("--nvlink_gbps", v, 1, 100000, &o.nvlink_gbps);
            });
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto parsed = flags.Parse(argc, argv);
  if (!parsed.ok()) {
    if (rank == 0) std::cerr << parsed.status().message() << "\n";
    return 2;
  }
  if (!parsed.value()) return 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  if (size < 2 || devices < size) {
    if (rank == 0) {
      std::cerr << "inflight-bench-allreduce: run it under mpirun -n <N>, N >= 2, one GPU per "
                   "rank (world size "
                << size << ", " << devices << " GPUs visible)\n";
    }
    return 2;
  }
  for (std::int64_t& s : o.sizes) s = s / 2 * 2;  // whole bf16 elements
  const std::int64_t largest = *std::max_element(o.sizes.begin(), o.sizes.end());

  const std::vector<std::string> modes = {"nccl", "ipc_oneshot", "ipc_twoshot", "auto"};
  std::vector<std::shared_ptr<model::Collectives>> groups;
  model::NcclCollectivesOptions auto_options;
  for (const std::string& mode : modes) {
    model::NcclCollectivesOptions co;
    co.all_reduce = mode;
    if (mode != "auto") co.ipc_capacity_bytes = std::max(co.ipc_capacity_bytes, largest);
    auto c = model::CreateNcclCollectives(MPI_COMM_WORLD, size, 1, rank, co);
    if (!c.ok()) {
      std::cerr << "rank " << rank << ": " << mode << ": " << c.status().ToString() << "\n";
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    groups.push_back(*c);
  }
  if (rank == 0) {
    std::printf(
        "bf16 all-reduce over %d GPUs: us per call (median of %lld graph replays of %lld "
        "calls); floor = 2(N-1)/N x bytes at %.0f GB/s\n\n",
        size, static_cast<long long>(o.replays), static_cast<long long>(o.calls_per_graph),
        o.nvlink_gbps);
  }
  std::unique_ptr<StreamingTable> table;
  if (rank == 0) {
    table = std::make_unique<StreamingTable>(
        std::vector<std::string>{"bytes", "NCCL us", "IPC 1-shot us", "IPC 2-shot us", "auto us",
                                 "auto picks", "floor us", "NCCL / best IPC"},
        std::cout);
  }
  for (std::int64_t bytes : o.sizes) {
    std::vector<double> us;
    us.reserve(groups.size());
    for (auto& g : groups) us.push_back(TimeAllReduce(*g, bytes, o));
    if (rank != 0) continue;
    const double floor_us =
        2.0 * (size - 1) / size * static_cast<double>(bytes) / (o.nvlink_gbps * 1e3);
    const model::AllReducePath pick =
        model::ChooseAllReducePath(model::AllReduceMode::kAuto, bytes, size,
                                   auto_options.ipc_capacity_bytes, true, auto_options.thresholds);
    const double best_ipc = std::min(us[1] < 0 ? 1e30 : us[1], us[2] < 0 ? 1e30 : us[2]);
    table->AddRow({std::to_string(bytes), Us(us[0]), Us(us[1]), Us(us[2]), Us(us[3]),
                   model::AllReducePathName(pick), Fmt(floor_us, 2),
                   us[0] > 0 && best_ipc < 1e30 ? Fmt(us[0] / best_ipc, 2) + "x" : "-"});
  }
  groups.clear();
  return 0;
}

}  // namespace
}  // namespace inflight::bench

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int rc = inflight::bench::Main(argc, argv);
  MPI_Finalize();
  return rc;
}
