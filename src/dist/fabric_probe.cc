// EFA / libfabric probe and the NCCL net-plugin search.
#include "lansbert/dist/fabric_probe.h"

#include <rdma/fabric.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace lansbert {

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// NCCL >= 2.19 dlopens libnccl-net-<NCCL_NET_PLUGIN>.so when the variable is set, otherwise
// libnccl-net.so; aws-ofi-nccl >= 1.7 also installs libnccl-net-ofi.so.
void find_plugin(FabricInfo* info) {
  std::vector<std::string> names;
  if (const char* p = std::getenv("NCCL_NET_PLUGIN"); p && *p) {
    const std::string v = p;
    names.push_back(v.find(".so") != std::string::npos ? v : "libnccl-net-" + v + ".so");
  } else {
    names = {"libnccl-net.so", "libnccl-net-ofi.so"};
  }
  std::vector<std::string> dirs;
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) dirs = split(ld, ':');
  for (const char* d : {"/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib64",
                        "/opt/aws-ofi-nccl/lib", "/usr/local/lib", "/usr/lib/x86_64-linux-gnu",
                        "/usr/lib64", "/usr/lib", "/usr/local/cuda/lib64", "/usr/local/cuda/lib"})
    dirs.push_back(d);
  info->nccl_net_plugin_name = names.front();
  for (const std::string& name : names) {
    for (const std::string& d : dirs) {
      std::error_code ec;
      const std::filesystem::path p = std::filesystem::path(d) / name;
      if (std::filesystem::exists(p, ec)) {
        info->nccl_net_plugin = p.string();
        info->nccl_net_plugin_name = name;
        return;
      }
    }
  }
}
}  // namespace

FabricInfo probe_fabric() {
  FabricInfo info;
  const uint32_t v = fi_version();
  info.libfabric_version = std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
  fi_info* list = nullptr;
  const int rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, nullptr, &list);
  if (rc != 0) {
    info.error = fi_strerror(-rc);
  } else {
    for (fi_info* i = list; i; i = i->next) {
      if (!i->fabric_attr || !i->fabric_attr->prov_name) continue;
      const std::string name = i->fabric_attr->prov_name;
      if (std::find(info.providers.begin(), info.providers.end(), name) == info.providers.end())
        info.providers.push_back(name);
      if (name == "efa" || name.rfind("efa;", 0) == 0) info.efa = true;
    }
    fi_freeinfo(list);
  }
  find_plugin(&info);
  return info;
}

}  // namespace lansbert
