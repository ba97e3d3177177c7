// A stand-in for NCCL's point-to-point semantics over MPI, for tests without GPUs: messages
// between two ranks are matched by the order each side posts them (every tag becomes 0; MPI
// never reorders messages of one tag), and the communicator's operations run one after
// another, each waiting for the previous one to complete, as on NCCL's stream (where a send
// may not complete before its receive is posted). A pipeline whose two sides post a pair's
// messages in different orders gets the wrong tensors; one whose sends wait for receives
// queued behind them deadlocks (and the MPI timeout names it).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace trident::testing {

std::unique_ptr<comm::Communicator> order_matched(std::shared_ptr<comm::Communicator> engine);

}  // namespace trident::testing
