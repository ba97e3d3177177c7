#include "monitor/step_conditions.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "core/check.h"

namespace trident::monitor {

bool StepCondition::is_step_condition(const std::string& c) {
  return c == "not_finite" || c == "loss_spike" || c == "grad_norm_spike" || c == "throughput_drop" ||
         c == "straggler" || c == "memory_high" || c == "expert_collapse";
}

StepCondition::StepCondition(const AlertRule& rule) : rule_(rule) {
  TRI_ASSERT(is_step_condition(rule.condition), "StepCondition for condition '", rule.condition, "'");
}

void StepCondition::rollback_to(int64_t step) {
  // The ranks' times and memory, and the run's speed, are not the discarded trajectory's.
  if (rule_.condition == "straggler" || rule_.condition == "memory_high" || rule_.condition == "throughput_drop")
    return;
  last_finite_ = true;
  while (!window_.empty() && window_.back().first > step) window_.pop_back();
  quiet_ = 0;
}

std::optional<int64_t> StepCondition::rollback_target(int64_t bad, const std::vector<int64_t>& candidates) const {
  for (auto c = candidates.rbegin(); c != candidates.rend(); ++c) {
    int64_t n = 0;
    for (const auto& [from, to] : rollbacks_)
      if (to == *c && from > bad - rule_.rollback_window) ++n;
    if (n < rule_.rollback_limit) return *c;
  }
  return std::nullopt;
}

void StepCondition::record_rollback(int64_t from, int64_t to) {
  // Rollbacks from steps too far back to count any more go.
  std::erase_if(rollbacks_, [&](const std::pair<int64_t, int64_t>& r) { return r.first <= from - rule_.rollback_window; });
  rollbacks_.emplace_back(from, to);
}

std::string StepCondition::rollbacks_text(int64_t bad) const {
  std::map<int64_t, int64_t, std::greater<int64_t>> per_target;
  for (const auto& [from, to] : rollbacks_)
    if (from > bad - rule_.rollback_window) ++per_target[to];
  std::string out;
  for (const auto& [to, n] : per_target)
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " to step " + std::to_string(to);
  return out.empty() ? "none" : out;
}

nlohmann::json StepCondition::state() const {
  nlohmann::json window = nlohmann::json::array(), rollbacks = nlohmann::json::array();
  for (const auto& [step, v] : window_) window.push_back({step, v});
  for (const auto& [from, to] : rollbacks_) rollbacks.push_back({from, to});
  return {{"last_finite", last_finite_}, {"window", window}, {"quiet", quiet_}, {"rollbacks", rollbacks}};
}

void StepCondition::restore(const nlohmann::json& j) {
  try {
    last_finite_ = j.at("last_finite").get<bool>();
    quiet_ = j.at("quiet").get<int64_t>();
    window_.clear();
    for (const nlohmann::json& w : j.at("window")) window_.emplace_back(w.at(0).get<int64_t>(), w.at(1).get<double>());
    rollbacks_.clear();
    for (const nlohmann::json& r : j.at("rollbacks"))
      rollbacks_.emplace_back(r.at(0).get<int64_t>(), r.at(1).get<int64_t>());
  } catch (const nlohmann::json::exception& e) {
    TRI_CHECK(false, "the saved state of alert rule '", rule_.name, "' (", rule_.condition, ") is malformed: ",
              e.what());
  }
  while (window_.size() > kept_values()) window_.pop_front();  // the rule's window shrank
}

AlertEvent StepCondition::event(const StepSample& s, const char* metric, double value, std::string detail) const {
  AlertEvent e;
  e.rule = rule_.name;
  e.condition = rule_.condition;
  e.metric = metric;
  e.step = s.step;
  e.value = value;
  e.detail = std::move(detail);
  return e;
}

std::optional<AlertEvent> StepCondition::observe(const StepSample& s) {
  const std::string& c = rule_.condition;
  if (c == "not_finite") {
    const bool loss_ok = std::isfinite(s.loss), grad_ok = std::isfinite(s.grad_norm) || s.skipped;
    const bool fire = last_finite_ && !(loss_ok && grad_ok);
    last_finite_ = loss_ok && grad_ok;
    if (!fire) return std::nullopt;
    std::ostringstream os;
    os << "loss " << s.loss << ", gradient norm " << s.grad_norm;
    return event(s, loss_ok ? "grad_norm" : "loss", loss_ok ? s.grad_norm : s.loss, os.str());
  }
  if (c == "straggler" || c == "memory_high") return std::nullopt;  // observe_ranks
  if (c == "loss_spike") return spike(s, s.loss, "loss");
  if (c == "grad_norm_spike") return spike(s, s.skipped ? std::nan("") : s.grad_norm, "grad_norm");
  if (c == "expert_collapse") return collapse(s);
  return throughput(s);
}

std::optional<AlertEvent> StepCondition::observe_ranks(int64_t step, const RankSample& ranks) {
  if (quiet_ > 0) {
    --quiet_;
    return std::nullopt;
  }
  if (rule_.condition == "memory_high") {
    // The fullest memory's lowest rank, a device's before a host's on a tie (NaN never
    // compares greater).
    const std::vector<double>* kinds[] = {&ranks.device_memory_ratio, &ranks.memory_ratio};
    const std::vector<double>* worst_kind = nullptr;
    size_t worst = 0;
    for (const std::vector<double>* m : kinds)
      for (size_t r = 0; r < m->size(); ++r)
        if ((*m)[r] > rule_.memory_fraction && (worst_kind == nullptr || (*m)[r] > (*worst_kind)[worst])) {
          worst_kind = m;
          worst = r;
        }
    if (worst_kind == nullptr) return std::nullopt;
    const bool device = worst_kind == &ranks.device_memory_ratio;
    const double v = (*worst_kind)[worst];
    std::ostringstream os;
    if (device)
      os << "the device allocator of rank " << worst << " holds " << v << " of the device's limit at step " << step
         << " (memory_fraction " << rule_.memory_fraction << ")";
    else
      os << "the host of rank " << worst << " has used " << v << " of its memory at step " << step
         << " (memory_fraction " << rule_.memory_fraction << ")";
    AlertEvent e = event({step, 0, 0, 0, false}, device ? "device_memory_reserved_ratio" : "host_memory_used_ratio",
                         v, os.str());
    e.best = rule_.memory_fraction;
    quiet_ = rule_.window;
    return e;
  }
  const std::vector<double>& busy_s = ranks.busy_s;
  if (rule_.condition != "straggler" || busy_s.size() < 2) return std::nullopt;
  std::vector<double> sorted = busy_s;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const auto slowest = std::max_element(busy_s.begin(), busy_s.end());
  if (!(*slowest > rule_.factor * median)) return std::nullopt;
  const int rank = static_cast<int>(slowest - busy_s.begin());
  std::ostringstream os;
  os << "rank " << rank << " took " << *slowest << " s of step " << step << " without communication waits, "
     << *slowest / median << " x the median " << median << " s across " << n << " ranks (factor " << rule_.factor
     << ")";
  AlertEvent e = event({step, 0, 0, 0, false}, "step_busy_seconds", *slowest, os.str());
  e.best = median;
  quiet_ = rule_.window;
  return e;
}

std::optional<AlertEvent> StepCondition::collapse(const StepSample& s) {
  // window_ holds the run of steps above `fraction` (saved with the rule's state).
  const double load = s.max_expert_load;
  if (quiet_ > 0) {
    --quiet_;
    window_.clear();
    return std::nullopt;
  }
  if (!(load > rule_.fraction)) {  // also NaN: no mixture of experts this step
    window_.clear();
    return std::nullopt;
  }
  window_.emplace_back(s.step, load);
  if (static_cast<int64_t>(window_.size()) < rule_.window) return std::nullopt;
  std::ostringstream os;
  os << "the busiest expert";
  if (s.max_expert_load_layer >= 0) os << " of layer " << s.max_expert_load_layer;
  os << " took " << load << " of the routing choices"
     << (s.max_expert_load_layer >= 0 ? " (moe_layers)" : " (moe_max_load)") << " for " << window_.size()
     << " steps in a row, above fraction " << rule_.fraction << " (steps " << window_.front().first << "-" << s.step
     << ")";
  AlertEvent e = event(s, "moe_max_load", load, os.str());
  e.best = rule_.fraction;
  window_.clear();
  quiet_ = rule_.window;
  return e;
}

std::optional<AlertEvent> StepCondition::spike(const StepSample& s, double x, const char* metric) {
  if (!std::isfinite(x)) return std::nullopt;  // not_finite's business
  const size_t n = static_cast<size_t>(rule_.window);
  std::optional<AlertEvent> out;
  if (quiet_ > 0) {
    --quiet_;
  } else if (window_.size() >= n) {
    // The newest n values (Note [Spike counting]: more are kept for rollbacks).
    double mean = 0.0, var = 0.0;
    for (size_t i = window_.size() - n; i < window_.size(); ++i) mean += window_[i].second;
    mean /= static_cast<double>(n);
    for (size_t i = window_.size() - n; i < window_.size(); ++i)
      var += (window_[i].second - mean) * (window_[i].second - mean);
    const double sd = std::sqrt(var / static_cast<double>(n));
    const double z = sd > 0 ? (x - mean) / sd : (x > mean ? std::numeric_limits<double>::infinity() : 0.0);
    if (z > rule_.threshold) {
      std::ostringstream os;
      os << metric << " " << x << " is " << z << " standard deviations above the mean " << mean << " of the last "
         << n << " steps (threshold " << rule_.threshold << ")";
      out = event(s, metric, x, os.str());
      out->best = mean;  // the baseline it was compared with
      quiet_ = rule_.window;
      return out;
    }
  }
  window_.emplace_back(s.step, x);
  if (window_.size() > kept_values()) window_.pop_front();
  return out;
}

std::optional<AlertEvent> StepCondition::throughput(const StepSample& s) {
  const double x = s.tokens_per_s;
  if (!std::isfinite(x)) return std::nullopt;
  std::optional<AlertEvent> out;
  const size_t seen = low_.size() + high_.size();
  if (quiet_ > 0) {
    --quiet_;
  } else if (seen >= static_cast<size_t>(rule_.window)) {
    const double median = low_.size() > high_.size() ? low_.top() : 0.5 * (low_.top() + high_.top());
    if (x < rule_.fraction * median) {
      std::ostringstream os;
      os << "tokens/s " << x << " is below " << rule_.fraction << " x the run's median " << median << " (" << seen
         << " steps)";
      out = event(s, "tokens_per_second", x, os.str());
      out->best = median;
      quiet_ = rule_.window;
    }
  }
  // Every step joins the median (a slow stretch is part of the run's history).
  if (low_.empty() || x <= low_.top()) {
    low_.push(x);
  } else {
    high_.push(x);
  }
  if (low_.size() > high_.size() + 1) {
    high_.push(low_.top());
    low_.pop();
  } else if (high_.size() > low_.size()) {
    low_.push(high_.top());
    high_.pop();
  }
  return out;
}

}  // namespace trident::monitor
