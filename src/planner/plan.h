// The plan: every layout of a run on a cluster (planner/search.h), each with its predicted
// memory per category (planner/memory_model.h) and step time (planner/time_model.h), ranked
// by tokens/s among those that fit the device's memory; what `trident plan` prints and what
// `trident train --parallel.auto=true` runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/cluster.h"
#include "planner/memory_model.h"
#include "planner/search.h"
#include "planner/time_model.h"

namespace trident::planner {

struct Candidate {
  Layout layout;
  MemoryEstimate memory;
  TimeEstimate time;
  double tokens_per_s = 0.0;
  bool fits = false;       // the device's memory and the host's (host_fits)
  bool host_fits = true;   // ZeRO-Offload's state in the node's host memory (Cluster::host_fits)
  bool tp_crosses_nodes = false;  // some tensor-parallel group spans two nodes (priced at the network's rate)
};

Candidate evaluate(const RunSpec& run, const Layout& layout, const Cluster& cluster, bool communicator);

struct Plan {
  RunSpec run;
  Cluster cluster;
  int64_t ranks = 1;
  int64_t layouts = 0;            // in the space
  LayoutPins pins;                // the space's pinned axes
  SearchResult search;
  std::vector<Candidate> ranked;  // the evaluated layouts: those that fit by tokens/s, then the rest by memory
  double seconds = 0.0;           // the search's wall time
  int64_t fitting() const;        // the ranked layouts that fit
};

// `communicator`: whether the ranks run under mpirun (false: one process started alone).
Plan make_plan(const RunSpec& run, const Cluster& cluster, const SearchSpace& space, bool communicator);

// Why a plan has no best layout: none exists for the ranks and batch, or none fits.
std::string no_layout_reason(const Plan& plan);
// The top `top` layouts as a table: memory per category (GiB or MiB), step time split,
// tokens/s, and the overrides of the best.
std::string plan_table(const Plan& plan, int64_t top);
nlohmann::ordered_json plan_json(const Plan& plan, int64_t top);
nlohmann::ordered_json candidate_json(const Candidate& c);
// A layout's step by what runs it (TimeEstimate's parts, then its communication, bubble and
// disk), one line each with its share: `trident plan --explain`.
std::string time_breakdown(const Candidate& c);

}  // namespace trident::planner
