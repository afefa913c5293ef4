#include "model/rank_weights.h"

#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "common/logging.h"
#include "model/checkpoint_converter.h"
#include "model/random_engine.h"
#include "model/weight_plan.h"

namespace inflight::model {
namespace {

namespace fs = std::filesystem;

std::uint64_t FreeBytes(const std::string& dir) {
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

// The ranks of this job on this host, as the MPI launchers export it (Open MPI, MPICH's Hydra);
// 1 outside MPI.
int HostRanks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = getenv(name);
    const int n = v != nullptr ? std::atoi(v) : 0;
    if (n > 0) return n;
  }
  return 1;
}

// /dev/shm first (memory), then $TMPDIR, then /tmp.
Result<std::string> ScratchParent(std::uint64_t bytes) {
  std::vector<ScratchCandidate> candidates;
  std::vector<std::string> dirs = {"/dev/shm"};
  if (const char* tmp = getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') dirs.push_back(tmp);
  dirs.push_back("/tmp");
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) candidates.push_back({dir, FreeBytes(dir)});
  }
  std::string dir = PickScratchDir(candidates, bytes, HostRanks());
  if (!dir.empty()) return dir;
  return Unavailable("random weights at load: no room for this rank's " +
                     std::to_string(bytes >> 20) +
                     " MiB in /dev/shm, $TMPDIR or /tmp (each needs that plus 1 GiB free)");
}

}  // namespace

std::string PickScratchDir(const std::vector<ScratchCandidate>& candidates, std::uint64_t bytes,
                           int host_ranks) {
  const std::uint64_t one = bytes + (std::uint64_t{1} << 30);
  const std::uint64_t all = one * static_cast<std::uint64_t>(std::max(host_ranks, 1));
  for (std::uint64_t need : {all, one}) {
    for (const ScratchCandidate& c : candidates) {
      if (c.free_bytes >= need) return c.dir;
    }
  }
  return "";
}

Result<std::unique_ptr<SafetensorsFile>> OpenRankWeights(const std::string& engine_dir,
                                                         const EngineConfig& config,
                                                         const ModelShard& shard) {
  if (!config.random_weights) {
    return SafetensorsFile::Open((fs::path(engine_dir) / shard.file_name()).string());
  }
  const std::int32_t rank = shard.pp_rank * shard.tp_size + shard.tp_rank;
  if (rank < 0 || rank >= config.tp_size * config.pp_size) {
    return InvalidArgument("rank " + std::to_string(rank) + " is outside the engine's " +
                           std::to_string(config.tp_size * config.pp_size) + " rank files");
  }
  const std::vector<EngineWeight> plan = RankFilePlan(config, rank);
  BuildSummary counted;
  CountPlan(config, plan, &counted);
  const std::uint64_t bytes = counted.num_bytes;
  ASSIGN_OR_RETURN(const std::string parent, ScratchParent(bytes));
  std::string pattern = (fs::path(parent) / "inflight-weights.XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return Internal("random weights at load: cannot create a directory in " + parent);
  }
  const fs::path dir = pattern;
  const std::string path = (dir / shard.file_name()).string();
  LOG_INFO("rank {}: making the random weights of preset \"{}\" seed {} ({:.1f} MiB) in {}", rank,
           config.random_weights->preset, config.random_weights->seed,
           static_cast<double>(bytes) / 1048576.0, dir.string());
  Status written = WriteRandomRankFile(config, plan, path);
  Result<std::unique_ptr<SafetensorsFile>> file =
      written.ok() ? SafetensorsFile::Open(path)
                   : Result<std::unique_ptr<SafetensorsFile>>(written);
  // Mapped (or failed): the directory goes either way; a mapping keeps its pages.
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!file.ok()) {
    return Status(file.status().code(),
                  "random weights at load (engine " + engine_dir + "): " + file.status().message());
  }
  return file;
}

}  // namespace inflight::model
