// EFA / libfabric probe and the NCCL net-plugin search.
#include "lansbert/dist/fabric_probe.h"

#include <dlfcn.h>
#include <link.h>
#include <rdma/fabric.h>

#include <algorithm>
#include <cstdlib>

namespace lansbert {

namespace {
// NCCL dlopens its net plugin by file name, so the dynamic loader's search decides where it
// comes from (LD_LIBRARY_PATH, the ld.so cache, the default directories):
// libnccl-net-<NCCL_NET_PLUGIN>.so when that variable is set, else libnccl-net.so. A plugin
// that is not found, or found but not loadable (a libfabric too old for it), makes NCCL fall
// back to its own sockets without an error. So the probe does the same dlopen (RTLD_NOW |
// RTLD_LOCAL, as NCCL's: every symbol resolved now, so a missing one is reported; the plugin's
// constructors run, which in aws-ofi-nccl only name its interface) and reports the path
// loaded or the loader's error. aws-ofi-nccl installs libnccl-net-ofi.so, and the
// libnccl-net.so link only as a build option: where only the former loads, the fix is
// NCCL_NET_PLUGIN=ofi.
bool try_load(const std::string& name, std::string* path, std::string* error) {
  void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    *error = e ? e : name + ": not loadable";
    return false;
  }
  link_map* lm = nullptr;
  *path = ::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name ? lm->l_name : name;
  ::dlclose(h);
  return true;
}

void find_plugin(FabricInfo* info) {
  const char* env = std::getenv("NCCL_NET_PLUGIN");
  const std::string v = env ? env : "";
  info->nccl_net_plugin_name = v.empty() ? "libnccl-net.so"
                               : v.find(".so") != std::string::npos ? v : "libnccl-net-" + v + ".so";
  if (try_load(info->nccl_net_plugin_name, &info->nccl_net_plugin, &info->nccl_net_plugin_error)) return;
  std::string ofi, ignored;
  if (v.empty() && try_load("libnccl-net-ofi.so", &ofi, &ignored))
    info->nccl_net_plugin_error += "; " + ofi + " loads: set NCCL_NET_PLUGIN=ofi for NCCL to use it";
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
