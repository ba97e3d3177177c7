#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "planner/fine_tuning.h"

namespace trident::planner {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) d.push_back(n / i);
    }
  std::sort(d.begin(), d.end());
  return d;
}

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, std::string, int64_t, bool, bool, bool>;
Key key_of(const Layout& l) {
  return {l.dp, l.ep, l.tp, l.pp, l.virtual_stages, l.zero_stage, l.checkpointing, l.micro_batch, l.offload,
          l.nvme, l.sequence_parallel};
}

// Where offload keeps the optimizer state: nowhere apart, host memory, the NVMe tier.
enum class Offload { kNone, kHost, kNvme };
void set_offload(Layout& l, Offload o) {
  l.offload = o != Offload::kNone;
  l.nvme = o == Offload::kNvme;
}

}  // namespace

bool prunes(const RunSpec& run, const SearchSpace& space, const Layout& l) {
  // ZeRO over one rank: data parallelism's memory and more; but the NVMe tier, which needs
  // ZeRO, takes the state out of memory there too.
  if (l.zero_stage > 0 && l.data_parallel() == 1 && !l.nvme) return true;
  // Offload without ZeRO (one rank) moves state between buffers of one memory on a CPU.
  if (l.offload && l.zero_stage == 0 && !run.on_device) return true;
  (void)space;
  return false;
}

std::vector<Layout> enumerate_layouts(const RunSpec& run, const SearchSpace& space) {
  std::vector<Layout> out;
  const int64_t G = run.global_batch, L = run.model.n_layer;
  const LayoutPins& pin = space.pins;
  // The trainer's verdict per (tp, pp, virtual stages, ZeRO, sequence parallel, offload). A
  // pinned ZeRO stage or offload is evaluated even where prunes() would leave it out (Note
  // [Pinned layouts]).
  const bool pinned_state = pin.zero_stage.has_value() || pin.offload.has_value() || pin.nvme.has_value();
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool>, bool> accepted;
  auto runs = [&](const Layout& l) {
    auto [it, fresh] = accepted.try_emplace(
        {l.ep, l.tp, l.pp, l.virtual_stages, l.zero_stage, l.sequence_parallel, l.offload, l.nvme});
    if (fresh)
      it->second = trainer_accepts(run.model, run.seq_len, l) && fine_tuning_accepts(run, l) &&
                   (pinned_state || !prunes(run, space, l));
    return it->second;
  };
  // A pinned value joins the space's own choices.
  std::vector<std::string> checkpointing = space.checkpointing;
  if (pin.checkpointing) checkpointing = {*pin.checkpointing};
  const bool sequence_parallel = space.sequence_parallel || pin.sequence_parallel.value_or(false);
  std::vector<Offload> offloads = {Offload::kNone};
  if (space.offload || pin.offload.value_or(false)) offloads.push_back(Offload::kHost);
  if (space.nvme || pin.nvme.value_or(false)) offloads.push_back(Offload::kNvme);
  const bool pinned_batching = pin.micro_batch.has_value() || pin.accum.has_value();
  for (int64_t tp : divisors(space.ranks)) {
    if (pin.tp ? tp != *pin.tp : space.max_tp > 0 && tp > space.max_tp) continue;
    for (int64_t pp : divisors(space.ranks / tp)) {
      for (int64_t ep : divisors(space.ranks / (tp * pp))) {
        // Note [The planner's ep axis]: ep splits a mixture of experts' experts (the trainer
        // checks that it divides them); a dense model has none to split.
        if (pin.ep ? ep != *pin.ep
                   : ep > 1 && (run.shapes.experts == 0 || run.shapes.experts % ep != 0))
          continue;
        const int64_t dp = space.ranks / (tp * pp * ep), replicas = dp * ep;
        if (G % replicas != 0 || (pin.pp && pp != *pin.pp) || (pin.dp && dp != *pin.dp)) continue;
        for (int64_t b : divisors(G / replicas)) {
          if (pin.micro_batch ? b != *pin.micro_batch
                              : space.max_micro_batch > 0 && b > space.max_micro_batch)
            continue;
          const int64_t m = G / (replicas * b);
          // Fewer micro-batches than stages: never all stages busy, so left out unless pinned.
          if (pp > 1 && m < pp && !pinned_batching) continue;
          const int64_t max_v = pin.virtual_stages            ? *pin.virtual_stages
                                : pp > 1 && space.interleaved ? std::max<int64_t>(1, L / pp)
                                                              : 1;
          for (int64_t v = 1; v <= max_v; ++v) {
            if (v > 1 && m % pp != 0)
              continue;  // the interleaved schedule's rule (parallel/pipeline.cc)
            for (int64_t zero = 0; zero <= 3; ++zero)
              for (const std::string& ckpt : checkpointing)
                for (int sp = 0; sp <= (tp > 1 && sequence_parallel ? 1 : 0); ++sp)
                  for (const Offload off : offloads) {
                    Layout l;
                    l.dp = dp;
                    l.ep = ep;
                    l.tp = tp;
                    l.pp = pp;
                    l.virtual_stages = v;
                    l.zero_stage = zero;
                    l.checkpointing = ckpt;
                    l.micro_batch = b;
                    l.accum = m;
                    set_offload(l, off);
                    l.sequence_parallel = sp == 1;
                    if (pin.admits(l) && runs(l)) out.push_back(l);
                  }
          }
        }
      }
    }
  }
  return out;
}

SearchResult search_exhaustive(const std::vector<Layout>& layouts, const Score& score) {
  SearchResult r;
  r.exhaustive = true;
  for (const Layout& l : layouts) {
    ++r.evaluated;
    const std::optional<double> s = score(l);
    if (s && (!r.best || *s > r.best_score)) {
      r.best = l;
      r.best_score = *s;
    }
  }
  return r;
}

SearchResult search_annealing(const std::vector<Layout>& layouts, const Score& score, uint64_t seed,
                              int64_t iterations) {
  SearchResult r;
  if (layouts.empty()) return r;
  std::map<Key, size_t> index;
  for (size_t i = 0; i < layouts.size(); ++i) index.emplace(key_of(layouts[i]), i);
  // The knobs' values that occur, to move between.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes;  // (tp, pp, ep)
  std::vector<int64_t> micro, virt;
  std::vector<std::string> ckpts;
  for (const Layout& l : layouts) {
    shapes.emplace_back(l.tp, l.pp, l.ep);
    micro.push_back(l.micro_batch);
    virt.push_back(l.virtual_stages);
    ckpts.push_back(l.checkpointing);
  }
  auto unique = [](auto& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  unique(shapes);
  unique(micro);
  unique(virt);
  unique(ckpts);
  std::vector<std::optional<double>> cache(layouts.size());
  std::vector<bool> done(layouts.size(), false);
  auto eval = [&](size_t i) -> double {
    if (!done[i]) {
      done[i] = true;
      cache[i] = score(layouts[i]);
      ++r.evaluated;
      if (cache[i] && (!r.best || *cache[i] > r.best_score)) {
        r.best = layouts[i];
        r.best_score = *cache[i];
      }
    }
    return cache[i].value_or(0.0);  // a layout that does not fit scores 0
  };
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  const int64_t G = layouts.front().global_batch();
  const int64_t ranks = layouts.front().ranks();
  // A neighbour of `at`: one knob changed (the micro-batch adjusted when the shape changes).
  auto neighbour = [&](const Layout& at) -> std::optional<size_t> {
    for (int tries = 0; tries < 16; ++tries) {
      Layout l = at;
      switch (pick(6)) {
        case 0: l.checkpointing = ckpts[pick(ckpts.size())]; break;
        case 1: l.zero_stage = static_cast<int64_t>(pick(4)); break;
        case 2: l.micro_batch = micro[pick(micro.size())]; break;
        case 3: {
          const auto [tp, pp, ep] = shapes[pick(shapes.size())];
          l.tp = tp;
          l.pp = pp;
          l.ep = ep;
          l.dp = ranks / (tp * pp * ep);
          l.virtual_stages = pick(2) == 0 ? 1 : virt[pick(virt.size())];
          // Half the time another ZeRO stage too: a pipeline takes ZeRO 0-1 and the stages
          // without one ZeRO 2-3, so the best of one shape is often another stage's.
          if (pick(2) == 0) l.zero_stage = static_cast<int64_t>(pick(l.pp > 1 ? 2 : 4));
          if (l.pp > 1 && l.zero_stage > 1) l.zero_stage = 1;
          if (l.data_parallel() == 1) l.zero_stage = 0;
          if (l.tp == 1) l.sequence_parallel = false;
          if (G % l.data_parallel() != 0) continue;
          // The nearest micro-batch that divides this shape's share.
          int64_t best = 0;
          for (int64_t b : micro)
            if ((G / l.data_parallel()) % b == 0 && (best == 0 || std::llabs(b - at.micro_batch) < std::llabs(best - at.micro_batch)))
              best = b;
          l.micro_batch = best;
          break;
        }
        case 4: l.virtual_stages = virt[pick(virt.size())]; break;
        case 5:
          if (pick(2) == 0) l.sequence_parallel = !l.sequence_parallel;
          else set_offload(l, static_cast<Offload>(pick(3)));
          break;
      }
      if (l.micro_batch <= 0 || G % (l.data_parallel() * l.micro_batch) != 0) continue;
      l.accum = G / (l.data_parallel() * l.micro_batch);
      const auto it = index.find(key_of(l));
      if (it != index.end() && !(layouts[it->second] == at)) return it->second;
    }
    return std::nullopt;
  };
  // Starts: the best of a few random layouts; restarts from the best so far.
  size_t current = pick(layouts.size());
  for (int i = 0; i < 32; ++i) {
    const size_t c = pick(layouts.size());
    if (eval(c) > eval(current)) current = c;
  }
  const double t0 = 0.3, t1 = 1e-4;
  for (int64_t it = 0; it < iterations; ++it) {
    if (static_cast<int64_t>(r.evaluated) >= static_cast<int64_t>(layouts.size())) break;  // seen everything
    const double temp = t0 * std::pow(t1 / t0, static_cast<double>(it) / static_cast<double>(iterations));
    if (it % 2000 == 1999 && r.best) current = index.at(key_of(*r.best));
    const std::optional<size_t> next = neighbour(layouts[current]);
    if (!next) {
      current = pick(layouts.size());
      continue;
    }
    const double a = eval(current), b = eval(*next);
    const double loss = a > 0 ? (a - b) / a : (b > 0 ? -1.0 : 0.0);
    if (loss <= 0 || std::uniform_real_distribution<double>(0, 1)(rng) < std::exp(-loss / temp)) current = *next;
  }
  // Polish: from the best, every single-knob neighbour (a new dp x tp x pp with any micro-batch,
  // virtual stages, sequence parallelism and ZeRO stage), while one is better (a local optimum
  // the random moves may have stepped around). The ZeRO stage moves with the shape: a
  // pipeline's ZeRO-1 best does not fit as ZeRO-1 without the pipeline, but may as ZeRO-3
  // (a 70B LLaMA on 1,024 H100s: dp64 tp4 pp4 zero1 was kept over dp256 tp4 zero3, 10% faster).
  for (bool improved = r.best.has_value(); improved;) {
    improved = false;
    const Layout at = *r.best;
    const double here = r.best_score;
    std::vector<Layout> around;
    for (const std::string& c : ckpts) around.push_back(at), around.back().checkpointing = c;
    for (int64_t z = 0; z <= 3; ++z) around.push_back(at), around.back().zero_stage = z;
    for (int64_t b : micro) around.push_back(at), around.back().micro_batch = b;
    for (int64_t v : virt) around.push_back(at), around.back().virtual_stages = v;
    around.push_back(at), around.back().sequence_parallel = !at.sequence_parallel;
    for (const Offload o : {Offload::kNone, Offload::kHost, Offload::kNvme}) around.push_back(at), set_offload(around.back(), o);
    for (const auto& [tp, pp, ep] : shapes)
      for (int64_t b : micro)
        for (int64_t v : pp > 1 ? virt : std::vector<int64_t>{1})
          for (bool sp : {false, true})
            for (int64_t z = 0; z <= (pp > 1 ? 1 : 3); ++z) {
              Layout l = at;
              l.tp = tp;
              l.pp = pp;
              l.ep = ep;
              l.dp = ranks / (tp * pp * ep);
              l.micro_batch = b;
              l.virtual_stages = v;
              l.sequence_parallel = sp;
              l.zero_stage = z;
              around.push_back(l);
            }
    for (Layout& l : around) {
      if (l.dp <= 0 || l.micro_batch <= 0 || G % (l.data_parallel() * l.micro_batch) != 0) continue;
      l.accum = G / (l.data_parallel() * l.micro_batch);
      const auto it = index.find(key_of(l));
      if (it != index.end() && eval(it->second) > here) improved = true;
    }
  }
  return r;
}

SearchResult search(const std::vector<Layout>& layouts, const Score& score, int64_t exhaustive_limit) {
  if (static_cast<int64_t>(layouts.size()) <= exhaustive_limit) return search_exhaustive(layouts, score);
  return search_annealing(layouts, score);
}

}  // namespace trident::planner
