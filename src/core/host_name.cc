// host_name(): gethostname into a string.
#include "lansbert/core/host_name.h"

#include <unistd.h>

namespace lansbert {

std::string host_name() {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';  // gethostname need not terminate a truncated name
  return host;
}

}  // namespace lansbert
