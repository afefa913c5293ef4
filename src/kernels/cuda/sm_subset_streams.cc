#include "kernels/cuda/sm_subset_streams.h"

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace inflight::kernels::cuda {

// The driver calls this needs (signatures from cuda.h, CUDA 12.4; cuGreenCtxStreamCreate 12.5).
struct SmSubsetStreams::Driver {
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*get_resource)(CUdevice, CUdevResource*, CUdevResourceType) = nullptr;
  CUresult (*split)(CUdevResource*, unsigned int*, const CUdevResource*, CUdevResource*,
                    unsigned int, unsigned int) = nullptr;
  CUresult (*generate_desc)(CUdevResourceDesc*, CUdevResource*, unsigned int) = nullptr;
  CUresult (*create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int) = nullptr;
  CUresult (*destroy)(CUgreenCtx) = nullptr;
  CUresult (*stream_create)(CUstream*, CUgreenCtx, unsigned int, int) = nullptr;

  bool Load(std::string* error) {
    const auto load = [&](const char* name, auto** fn, unsigned version) {
      void* p = nullptr;
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found) !=
              cudaSuccess ||
          found != cudaDriverEntryPointSuccess || p == nullptr) {
        cudaGetLastError();  // NOTE: an old driver is an answer here, not a sticky failure
        *error = std::string("the CUDA driver has no ") + name + " (needs 12.5 or newer)";
        return false;
      }
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(p);
      return true;
    };
    return load("cuDeviceGet", &device_get, 2000) &&
           load("cuDeviceGetDevResource", &get_resource, 12040) &&
           load("cuDevSmResourceSplitByCount", &split, 12040) &&
           load("cuDevResourceGenerateDesc", &generate_desc, 12040) &&
           load("cuGreenCtxCreate", &create, 12040) && load("cuGreenCtxDestroy", &destroy, 12040) &&
           load("cuGreenCtxStreamCreate", &stream_create, 12050);
  }
};

std::unique_ptr<SmSubsetStreams> SmSubsetStreams::Create(const std::vector<int>& sms,
                                                         std::string* error) {
  std::unique_ptr<SmSubsetStreams> s(new SmSubsetStreams());
  s->driver_ = std::make_unique<Driver>();
  Driver& d = *s->driver_;
  if (!d.Load(error)) return nullptr;
  int ordinal = 0;
  // The primary context must exist first: a green context retains it.
  if (cudaGetDevice(&ordinal) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    *error = "no current CUDA device";
    return nullptr;
  }
  const auto check = [&](CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) {
      *error = std::string(what) + " failed: CUresult " + std::to_string(static_cast<int>(r));
    }
    return r == CUDA_SUCCESS;
  };
  CUdevice dev = 0;
  CUdevResource all{};
  if (!check(d.device_get(&dev, ordinal), "cuDeviceGet") ||
      !check(d.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource")) {
    return nullptr;
  }
  s->device_sms_ = static_cast<int>(all.sm.smCount);
  // Groups as small as the driver allows; each subset is a prefix of them.
  const unsigned granularity =
      std::max({1u, all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment});
  unsigned num_groups = 0;
  if (!check(d.split(nullptr, &num_groups, &all, nullptr, 0, granularity),
             "cuDevSmResourceSplitByCount")) {
    return nullptr;
  }
  std::vector<CUdevResource> groups(num_groups + 1);
  if (!check(d.split(groups.data(), &num_groups, &all, nullptr, 0, granularity),
             "cuDevSmResourceSplitByCount")) {
    return nullptr;
  }
  if (num_groups < 2) {
    *error = "the device's SMs split into " + std::to_string(num_groups) + " group(s)";
    return nullptr;
  }
  const unsigned group_sms = groups[0].sm.smCount;
  int least = 0, greatest = 0;
  if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
    *error = "cudaDeviceGetStreamPriorityRange failed";
    return nullptr;
  }
  for (int want : sms) {
    const auto k = static_cast<unsigned>(std::clamp<long>(
        std::lround(static_cast<double>(want) / group_sms), 1, static_cast<long>(num_groups) - 1));
    CUdevResourceDesc desc = nullptr;
    CUgreenCtx ctx = nullptr;
    CUstream stream = nullptr;
    if (!check(d.generate_desc(&desc, groups.data(), k), "cuDevResourceGenerateDesc") ||
        !check(d.create(&ctx, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate")) {
      return nullptr;
    }
    s->green_contexts_.push_back(ctx);
    if (!check(d.stream_create(&stream, ctx, CU_STREAM_NON_BLOCKING, greatest),
               "cuGreenCtxStreamCreate")) {
      return nullptr;
    }
    s->sms_.push_back(static_cast<int>(k * group_sms));
    s->streams_.push_back(stream);
  }
  return s;
}

SmSubsetStreams::~SmSubsetStreams() {
  for (cudaStream_t stream : streams_) cudaStreamDestroy(stream);
  if (driver_ && driver_->destroy != nullptr) {
    for (void* ctx : green_contexts_) driver_->destroy(static_cast<CUgreenCtx>(ctx));
  }
}

}  // namespace inflight::kernels::cuda
