// The network a job would use, as `lansbert info` reports it: the libfabric providers this
// node offers (fi_getinfo), whether EFA is among them, and which NCCL network plugin NCCL
// would load (aws-ofi-nccl installs libnccl-net-ofi.so and, as a build option, libnccl-net.so),
// loaded by the name NCCL's dlopen uses (NCCL_NET_PLUGIN decides it) through the same loader.
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
  std::string nccl_net_plugin_error;   // why it does not load (the loader's message), if not
};

FabricInfo probe_fabric();

}  // namespace lansbert
