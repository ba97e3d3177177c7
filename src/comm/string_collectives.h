// Collectives of text: every rank's string, to one rank or to all. For metadata that ranks
// describe for one another (a checkpoint's shard list, a step's auxiliary metrics), not for
// bulk data. gather_strings: after an all-gather of the lengths (8 bytes a rank), each rank
// sends its bytes to the root alone, so no rank but the root holds the others' text (a
// checkpoint's shard lists grow with the model and the ranks).
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"

namespace trident::comm {

// On `root`: every rank's `mine`, indexed by rank; elsewhere: empty (collective over `comm`).
std::vector<std::string> gather_strings(Communicator& comm, const std::string& mine, int root = 0);
// Every rank's `mine` on every rank (collective): for a few bytes a rank, since every rank
// receives the longest string's size from each.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine);

}  // namespace trident::comm
