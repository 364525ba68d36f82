// The registry of device backends (device_backend.h): name -> factory.
#include <map>

#include "lansbert/train/device_backend.h"

namespace lansbert {
namespace {
std::map<std::string, DeviceBackendFactory>& registry() {
  static std::map<std::string, DeviceBackendFactory> r;
  return r;
}
}  // namespace

void register_device_backend(const std::string& name, DeviceBackendFactory factory) {
  registry()[name] = std::move(factory);
}

void unregister_device_backend(const std::string& name) { registry().erase(name); }

bool has_device_backend(const std::string& name) { return registry().count(name) != 0; }

Status make_device_backend(const std::string& name, std::unique_ptr<DeviceBackend>* out) {
  auto it = registry().find(name);
  if (it == registry().end())
    return Status::unsupported("backend: '" + name + "': this lansbert was built without it (configure with -DLANSBERT_CUDA=ON on a machine with the CUDA toolkit)");
  return it->second(out);
}

}  // namespace lansbert
