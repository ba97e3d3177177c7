// Which rank a hung job waits for, read from every rank's flight record (Note [Reading a
// flight record] in flight_recorder.h): on the first communicator where the ranks' last
// sequence numbers differ (the world, 0, first), the ranks with the lowest one are behind, and
// operation (lowest + 1) is what the others are in and the ranks behind never started. The hang
// rule prints this and writes it to out_dir/hang_summary.json (train/run_monitor.cc), so that
// nobody has to compare the dumps by eye.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/flight_recorder.h"

namespace trident::comm {

struct FlightDiagnosis {
  bool found = false;  // some rank is behind on some communicator
  int comm = -1;       // that communicator's number
  int comm_size = 0;
  std::vector<int> behind;   // ranks whose last number on `comm` is the lowest, ascending
  std::vector<int> ahead;    // the other ranks with records on `comm`, ascending
  int64_t behind_seq = 0;    // the last number the ranks behind reached there
  std::string behind_op;     // that operation as they record it ("all_reduce", "" if evicted)
  std::string behind_state;  // "in flight" or "completed"
  std::string waited_op;     // operation behind_seq + 1 as an ahead rank records it
  std::string text;          // one sentence for people (also when nothing was found)
};

// `by_rank`: each rank's records (a rank missing from the map wrote none).
FlightDiagnosis diagnose_flight_records(const std::map<int, std::vector<FlightRecord>>& by_rank);

// At a collective's timeout (Note [Naming the rank at a timeout] in comm/mpi_communicator.cc):
// waits at most grace_s for the flight records the other ranks of a world of `world_size`
// write when their own waits time out (FlightRecorder::dump_path_of, written no earlier than
// `not_before`, seconds since the epoch), then says which rank stopped taking part: those that
// wrote none (not waiting in any communication: busy, stopped, or gone) or, when every rank
// wrote one, the rank behind. "" when the recorder has no dump directory.
std::string name_stalled_ranks(const FlightRecorder& recorder, int world_size, double grace_s, double not_before);

}  // namespace trident::comm
