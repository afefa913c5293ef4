#include "common/mpi_launch.h"

#include <charconv>
#include <cstdlib>
#include <optional>

namespace inflight {
namespace {

// An integer environment variable; nullopt when unset.
Result<std::optional<int>> EnvInt(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::optional<int>();
  int value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end) {
    return InvalidArgument(std::string("environment variable ") + name + "=\"" + text +
                           "\" (set by the MPI launcher) is not an integer");
  }
  return std::optional<int>(value);
}

}  // namespace

Result<MpiLaunch> MpiLaunchFromEnvironment() {
  struct Names {
    const char* size;
    const char* rank;
    const char* local_rank;
  };
  constexpr Names kLaunchers[] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"},
  };
  for (const Names& names : kLaunchers) {
    ASSIGN_OR_RETURN(std::optional<int> size, EnvInt(names.size));
    if (!size) continue;
    ASSIGN_OR_RETURN(std::optional<int> rank, EnvInt(names.rank));
    ASSIGN_OR_RETURN(std::optional<int> local_rank, EnvInt(names.local_rank));
    MpiLaunch launch;
    launch.size = *size;
    launch.rank = rank.value_or(0);
    launch.local_rank = local_rank.value_or(launch.rank);
    launch.source = names.size;
    if (launch.size < 1 || launch.rank < 0 || launch.rank >= launch.size) {
      return InvalidArgument(std::string("the MPI launcher's ") + names.size + "=" +
                             std::to_string(launch.size) + " and " + names.rank + "=" +
                             std::to_string(launch.rank) +
                             " do not describe a rank of the job (expected 0 <= rank < size)");
    }
    return launch;
  }
  return MpiLaunch{};
}

}  // namespace inflight
