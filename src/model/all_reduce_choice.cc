#include "model/all_reduce_choice.h"

#include <cstring>

namespace inflight::model {

Result<AllReduceMode> ParseAllReduceMode(const char* value, const std::string& source) {
  if (value == nullptr || value[0] == '\0') return AllReduceMode::kAuto;
  for (AllReduceMode m : {AllReduceMode::kAuto, AllReduceMode::kNccl, AllReduceMode::kIpc,
                          AllReduceMode::kIpcOneShot, AllReduceMode::kIpcTwoShot}) {
    if (std::strcmp(value, AllReduceModeName(m)) == 0) return m;
  }
  return InvalidArgument(source + " \"" + value +
                         "\" is not one of: auto, nccl, ipc, ipc_oneshot, ipc_twoshot");
}

const char* AllReduceModeName(AllReduceMode mode) {
  switch (mode) {
    case AllReduceMode::kAuto:
      return "auto";
    case AllReduceMode::kNccl:
      return "nccl";
    case AllReduceMode::kIpc:
      return "ipc";
    case AllReduceMode::kIpcOneShot:
      return "ipc_oneshot";
    case AllReduceMode::kIpcTwoShot:
      return "ipc_twoshot";
  }
  return "?";
}

const char* AllReducePathName(AllReducePath path) {
  switch (path) {
    case AllReducePath::kNccl:
      return "nccl";
    case AllReducePath::kIpcOneShot:
      return "ipc one-shot";
    case AllReducePath::kIpcTwoShot:
      return "ipc two-shot";
  }
  return "?";
}

AllReducePath ChooseAllReducePath(AllReduceMode mode, std::int64_t bytes, int num_ranks,
                                  std::int64_t ipc_capacity_bytes, bool aligned,
                                  const AllReduceThresholds& thresholds) {
  if (mode == AllReduceMode::kNccl || num_ranks < 2 || !aligned || ipc_capacity_bytes <= 0 ||
      bytes > ipc_capacity_bytes) {
    return AllReducePath::kNccl;
  }
  if (mode == AllReduceMode::kIpcOneShot) return AllReducePath::kIpcOneShot;
  if (mode == AllReduceMode::kIpcTwoShot) return AllReducePath::kIpcTwoShot;
  if (mode == AllReduceMode::kAuto && bytes > thresholds.ipc_max_bytes) {
    return AllReducePath::kNccl;
  }
  return num_ranks == 2 || bytes <= thresholds.one_shot_max_bytes ? AllReducePath::kIpcOneShot
                                                                  : AllReducePath::kIpcTwoShot;
}

}  // namespace inflight::model
