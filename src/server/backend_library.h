// A backend shared library opened with dlopen, and where Triton looks for it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "triton/core/tritonbackend.h"

namespace inflight::server {

class BackendLibrary {
 public:
  using BackendFn = TRITONSERVER_Error* (*)(TRITONBACKEND_Backend*);
  using ModelFn = TRITONSERVER_Error* (*)(TRITONBACKEND_Model*);
  using InstanceFn = TRITONSERVER_Error* (*)(TRITONBACKEND_ModelInstance*);
  using ExecuteFn = TRITONSERVER_Error* (*)(TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request**,
                                            const uint32_t);
  using AttributeFn = TRITONSERVER_Error* (*)(TRITONBACKEND_Backend*,
                                              TRITONBACKEND_BackendAttribute*);

  // dlopen(RTLD_NOW | RTLD_LOCAL) and look up the entry points; a library without
  // TRITONBACKEND_ModelInstanceExecute is refused.
  static Result<std::unique_ptr<BackendLibrary>> Open(const std::string& path);
  ~BackendLibrary();  // dlclose
  BackendLibrary(const BackendLibrary&) = delete;
  BackendLibrary& operator=(const BackendLibrary&) = delete;

  const std::string& path() const { return path_; }

  // Optional entry points are null when the library does not export them.
  BackendFn initialize = nullptr;
  BackendFn finalize = nullptr;
  AttributeFn get_backend_attribute = nullptr;
  ModelFn model_initialize = nullptr;
  ModelFn model_finalize = nullptr;
  InstanceFn instance_initialize = nullptr;
  InstanceFn instance_finalize = nullptr;
  InstanceFn instance_ready = nullptr;
  ExecuteFn instance_execute = nullptr;

 private:
  BackendLibrary(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}
  std::string path_;
  void* handle_ = nullptr;
};

// Triton's search order for libtriton_<backend>.so when the model's runtime is empty:
// <model_dir>/<version>/, <model_dir>/, <backend_directory>/<backend>/ (backend_directory may list
// several folders separated by ':', searched in order). Returns the first that
// exists; otherwise NotFound listing every path tried. A non-empty runtime names the library file
// (looked up in the same folders) instead of libtriton_<backend>.so.
Result<std::string> FindBackendLibrary(const std::string& backend, const std::string& runtime,
                                       const std::string& model_dir, int64_t version,
                                       const std::string& backend_directory);

}  // namespace inflight::server
