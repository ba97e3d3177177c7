// A communicator whose collectives are seen to complete late: Work::test() reports an
// operation unfinished the first few times it is asked (wait() still waits for it), as a
// GPU's collectives still running on their stream while the host goes on. Code that folds
// in finished work as it notices it (ZeRO during the backward) then meets it at a later
// point than MPI on one host shows it, e.g. in a later micro-batch's backward.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace trident::testing {

std::unique_ptr<comm::Communicator> late_completing(std::shared_ptr<comm::Communicator> engine, int unfinished_tests = 3);

}  // namespace trident::testing
