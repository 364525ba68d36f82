// This machine's host name, for messages that say where something happened (a fatal error,
// a communicator's rank, a lock's holder). "?" when the system will not say.
#pragma once

#include <string>

namespace lansbert {

std::string host_name();

}  // namespace lansbert
