// cuDNN opened with dlopen (cudnn_api.h says why).
#include "cudnn_api.h"

#if LANSBERT_HAVE_CUDNN

#include <dlfcn.h>

#include <vector>

#ifndef LANSBERT_CUDNN_LIBRARY
#define LANSBERT_CUDNN_LIBRARY ""
#endif

namespace lansbert::cuda {

namespace {

template <typename F>
bool resolve(void* lib, const char* name, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (!*out && error->empty()) *error = std::string("symbol ") + name + " missing";
  return *out != nullptr;
}

CudnnApi load() {
  CudnnApi api;
  void* lib = nullptr;
  std::string tried;
  for (const char* name : {"libcudnn.so.9", LANSBERT_CUDNN_LIBRARY}) {
    if (!*name) continue;
    // RTLD_LOCAL: the symbols are reached through this table only.
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      api.path = name;
      break;
    }
    const char* e = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (e ? e : name);
  }
  if (!lib) {
    api.error = "cuDNN library not found (" + tried + ")";
    return api;
  }
  std::string err;
  resolve(lib, "cudnnGetVersion", &api.GetVersion, &err);
  resolve(lib, "cudnnGetErrorString", &api.GetErrorString, &err);
  resolve(lib, "cudnnGetLastErrorString", &api.GetLastErrorString, &err);
  resolve(lib, "cudnnCreate", &api.Create, &err);
  resolve(lib, "cudnnDestroy", &api.Destroy, &err);
  resolve(lib, "cudnnSetStream", &api.SetStream, &err);
  resolve(lib, "cudnnBackendCreateDescriptor", &api.BackendCreateDescriptor, &err);
  resolve(lib, "cudnnBackendDestroyDescriptor", &api.BackendDestroyDescriptor, &err);
  resolve(lib, "cudnnBackendFinalize", &api.BackendFinalize, &err);
  resolve(lib, "cudnnBackendSetAttribute", &api.BackendSetAttribute, &err);
  resolve(lib, "cudnnBackendGetAttribute", &api.BackendGetAttribute, &err);
  resolve(lib, "cudnnBackendExecute", &api.BackendExecute, &err);
  if (!err.empty()) {
    api.error = api.path + ": " + err;
    return api;  // the library stays open: harmless, and nothing else may be using it
  }
  api.version = api.GetVersion();
  if (api.version / 10000 != 9)
    api.error = api.path + " is cuDNN " + cudnn_version_string(api.version) + "; the graph API used here needs 9.x";
  return api;
}

}  // namespace

std::string CudnnApi::describe(cudnnStatus_t status) const {
  std::string s = GetErrorString ? GetErrorString(status) : "cuDNN status " + std::to_string(int(status));
  if (GetLastErrorString) {
    std::vector<char> buf(1024, '\0');
    GetLastErrorString(buf.data(), buf.size());
    if (buf[0]) s += std::string(": ") + buf.data();
  }
  return s;
}

const CudnnApi& cudnn_api() {
  static const CudnnApi api = load();
  return api;
}

std::string cudnn_version_string(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace lansbert::cuda

#endif  // LANSBERT_HAVE_CUDNN
