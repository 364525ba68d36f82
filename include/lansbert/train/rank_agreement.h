// Under mpirun every rank reads its own config file, command line, shards and checkpoint. A
// config file that differs between hosts (a stale copy, another --set), shards that differ, or
// a checkpoint directory that is not shared would train replicas that drift apart without an
// error: each rank's view is compared with rank 0's before the first step. `bench-comm`
// compares its options the same way (other sizes on one rank would hang the job).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lansbert/core/status.h"
#include "lansbert/dist/communicator.h"

namespace lansbert {

// Collective: rank 0's *text replaces every other rank's (any length).
void broadcast_text(Communicator& comm, std::string* text);

// The leaves (dotted paths; array elements as path[i]) where `mine` and `theirs` differ, as
// "PATH is MINE here, THEIRS on rank 0" ("absent" for a missing leaf), at most `limit` of them
// in path order.
std::vector<std::string> json_differences(const nlohmann::json& mine, const nlohmann::json& theirs, size_t limit);

// Collective: rank 0 broadcasts `mine`; a rank whose `mine` differs fails with invalid_argument
// naming itself, its host, `what` and the differing leaves; every other rank then fails with a
// message that points at that rank's error (agree_across_ranks). One rank: ok.
Status check_same_as_rank0(Communicator& comm, const nlohmann::json& mine, const std::string& what,
                           const std::string& fix);

}  // namespace lansbert
