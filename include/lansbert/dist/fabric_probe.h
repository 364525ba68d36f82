// The network a job would use, as `lansbert info` reports it: the libfabric providers this
// node offers (fi_getinfo), whether EFA is among them, and which NCCL network plugin NCCL
// would load (aws-ofi-nccl installs libnccl-net.so / libnccl-net-ofi.so), found the way
// NCCL's dlopen would: NCCL_NET_PLUGIN, then LD_LIBRARY_PATH, then standard directories.
#pragma once

#include <string>
#include <vector>

namespace lansbert {

struct FabricInfo {
  std::string libfabric_version;       // runtime fi_version(), "major.minor"
  std::vector<std::string> providers;  // distinct provider names, e.g. "efa", "tcp;ofi_rxm"
  std::string error;                   // fi_getinfo's failure, if any
  bool efa = false;
  std::string nccl_net_plugin;         // path of the plugin NCCL would load, or empty
  std::string nccl_net_plugin_name;    // the file name NCCL looks for
};

FabricInfo probe_fabric();

}  // namespace lansbert
