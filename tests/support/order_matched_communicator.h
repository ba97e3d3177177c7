// A stand-in for NCCL's point-to-point semantics over MPI, for tests without GPUs: messages
// between two ranks are matched by the order each side posts them (every tag becomes 0; MPI
// never reorders messages of one tag); a send completes only once its receiver has it (the
// receiver acknowledges each message); and each operation runs to completion when it is
// posted, as on NCCL's stream, where later work waits for it. A pipeline whose two sides post
// a pair's messages in different orders gets the wrong tensors; one whose sends wait for
// receives its peer queued behind its own sends deadlocks, and the timeout
// (TRIDENT_COMM_TIMEOUT_S) names it.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace trident::testing {

std::unique_ptr<comm::Communicator> order_matched(std::shared_ptr<comm::Communicator> engine);

}  // namespace trident::testing
