#include "server/backend_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>

namespace inflight::server {

namespace {

template <typename Fn>
Fn Lookup(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

Result<std::unique_ptr<BackendLibrary>> BackendLibrary::Open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return NotFound("unable to load backend library '" + path +
                    "': " + (why ? why : "unknown error"));
  }
  std::unique_ptr<BackendLibrary> lib(new BackendLibrary(path, handle));
  lib->initialize = Lookup<BackendFn>(handle, "TRITONBACKEND_Initialize");
  lib->finalize = Lookup<BackendFn>(handle, "TRITONBACKEND_Finalize");
  lib->get_backend_attribute = Lookup<AttributeFn>(handle, "TRITONBACKEND_GetBackendAttribute");
  lib->model_initialize = Lookup<ModelFn>(handle, "TRITONBACKEND_ModelInitialize");
  lib->model_finalize = Lookup<ModelFn>(handle, "TRITONBACKEND_ModelFinalize");
  lib->instance_initialize = Lookup<InstanceFn>(handle, "TRITONBACKEND_ModelInstanceInitialize");
  lib->instance_finalize = Lookup<InstanceFn>(handle, "TRITONBACKEND_ModelInstanceFinalize");
  lib->instance_ready = Lookup<InstanceFn>(handle, "TRITONBACKEND_ModelInstanceReady");
  lib->instance_execute = Lookup<ExecuteFn>(handle, "TRITONBACKEND_ModelInstanceExecute");
  if (lib->instance_execute == nullptr) {
    return InvalidArgument("backend library '" + path +
                           "' does not export TRITONBACKEND_ModelInstanceExecute, which every "
                           "backend must provide");
  }
  return lib;
}

BackendLibrary::~BackendLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

Result<std::string> FindBackendLibrary(const std::string& backend, const std::string& runtime,
                                       const std::string& model_dir, int64_t version,
                                       const std::string& backend_directory) {
  namespace fs = std::filesystem;
  const std::string file = runtime.empty() ? "libtriton_" + backend + ".so" : runtime;
  if (fs::path(file).is_absolute()) {
    if (fs::exists(file)) return file;
    return NotFound("backend library '" + file + "' for backend '" + backend + "' does not exist");
  }
  std::vector<fs::path> dirs = {fs::path(model_dir) / std::to_string(version), fs::path(model_dir)};
  // backend_directory may be a ':'-separated search list (inflight-server's default when no
  // --backend-directory is given); each entry is searched in order.
  for (std::size_t begin = 0; begin <= backend_directory.size();) {
    const std::size_t end = std::min(backend_directory.find(':', begin), backend_directory.size());
    if (end > begin)
      dirs.push_back(fs::path(backend_directory.substr(begin, end - begin)) / backend);
    begin = end + 1;
  }
  std::string tried;
  for (const auto& dir : dirs) {
    fs::path candidate = dir / file;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    tried += (tried.empty() ? "" : ", ") + candidate.string();
  }
  return NotFound("unable to find backend library '" + file + "' for backend '" + backend +
                  "'; searched: " + tried);
}

}  // namespace inflight::server
