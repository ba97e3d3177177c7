// The layouts of a run on a number of ranks, and the search for the fastest that fits.
//
// Note [Layout search]
// The space: every dp x ep x tp x pp = ranks (ep > 1 only for a mixture of experts, dividing
// its experts: Note [The planner's ep axis]), virtual stages (interleaved 1F1B: m divisible by pp),
// ZeRO 0-3, each layout the trainer runs (its own check, parallel::check_layout: the family's
// tensor-parallel rule, at least a block per pipeline chunk, ZeRO 2-3 without a pipeline,
// offload under ZeRO, the compositions expert parallelism has) and `prunes` keeps (ZeRO
// needs dp x ep > 1 but on the NVMe tier),
// activation checkpointing, micro-batch b dividing the global batch's share of a data-parallel
// rank (m = G / (dp b); a pipeline needs m >= pp: with fewer micro-batches than stages some
// stage is always idle, so the planner does not list it), sequence parallelism with tp > 1,
// and offload and the NVMe tier where asked (or pinned). Small spaces are enumerated and every
// layout evaluated; large ones (thousands of devices, every knob) are searched by simulated
// annealing over the same space: a move changes one knob (or moves to another dp x ep x tp x pp
// with the nearest micro-batch and, half the time, another ZeRO stage: a pipeline takes ZeRO 0-1,
// the stages without one 2-3), a worse layout is accepted with probability exp(-relative loss /
// temperature) as the temperature cools, and the best layout seen is kept, with restarts from it;
// then a polish tries every single-knob neighbour of the best (a new dp x ep x tp x pp with any
// micro-batch, virtual stages, sequence parallelism and ZeRO stage) while one is better.
// Evaluations are cached. tests/planner/search_test checks that it finds the exhaustive optimum on
// every space small enough to enumerate there.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "planner/layout.h"
#include "planner/layout_pins.h"
#include "planner/run_spec.h"

namespace trident::planner {

struct SearchSpace {
  int64_t ranks = 1;
  std::vector<std::string> checkpointing = {"none", "selective", "full"};
  bool offload = false;            // also try ZeRO-Offload
  bool nvme = false;               // also try the NVMe tier (ZeRO's offloaded state on disk: Layout::nvme)
  bool sequence_parallel = true;   // also try it with tp > 1
  bool interleaved = true;         // also try virtual stages > 1
  int64_t max_tp = 0;              // 0: no limit (a cluster: the devices of a node)
  int64_t max_micro_batch = 0;     // 0: no limit
  LayoutPins pins;                 // axes fixed by the user (Note [Pinned layouts])
};

// Every layout the trainer runs (trainer_accepts: the trainer's own check) that `prunes` keeps
// and the space's pins admit, in a fixed order.
std::vector<Layout> enumerate_layouts(const RunSpec& run, const SearchSpace& space);
// Layouts the trainer runs but the search leaves out because they cannot help: ZeRO over one
// data-parallel rank (data parallelism's memory, with more buffers) unless on the NVMe tier
// (which needs ZeRO), and one CPU rank's offload without ZeRO (it moves state between buffers
// of one memory).
bool prunes(const RunSpec& run, const SearchSpace& space, const Layout& l);

// A layout's score: tokens/s, or nullopt when it does not fit.
using Score = std::function<std::optional<double>(const Layout&)>;

struct SearchResult {
  std::optional<Layout> best;
  double best_score = 0.0;
  int64_t evaluated = 0;  // distinct layouts scored
  bool exhaustive = false;
};

SearchResult search_exhaustive(const std::vector<Layout>& layouts, const Score& score);
// Simulated annealing over `layouts` (moves between neighbours: layouts that differ in one
// knob), deterministic for a seed.
SearchResult search_annealing(const std::vector<Layout>& layouts, const Score& score, uint64_t seed = 1,
                              int64_t iterations = 20000);
// Exhaustive up to `exhaustive_limit` layouts, annealing above.
SearchResult search(const std::vector<Layout>& layouts, const Score& score, int64_t exhaustive_limit = 5000);

}  // namespace trident::planner
