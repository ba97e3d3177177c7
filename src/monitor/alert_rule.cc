#include "monitor/alert_rule.h"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace trident::monitor {

const OptionTable<AlertRule>& AlertRule::table() {
  static const auto t =
      OptionTable<AlertRule>("alerts", "Alert rules ([[alerts]] tables): a condition and what to do when it holds")
          .add("name", &AlertRule::name, "the rule's name, in logs and notifications")
          .add("condition", &AlertRule::condition,
               "plateau: the metric has not improved by more than min_delta for `patience` evaluations; "
               "not_finite: loss or gradient norm NaN/Inf; loss_spike, grad_norm_spike: z-score over the last "
               "`window` steps above `threshold`; throughput_drop: tokens/s below `fraction` x the run's median; "
               "hang: no step finished for `timeout` seconds (every rank watches itself); straggler: a rank's step "
               "time without communication waits above `factor` x the median across ranks; memory_high: a rank's host has "
               "used more than `memory_fraction` of its memory, or its device allocator holds more than that fraction "
               "of the device's limit; expert_collapse: a mixture of experts' busiest expert took more than `fraction` of "
               "its layer's routing choices (the busiest layer's; moe_max_load where no layer counts come) for "
               "`window` steps in a row",
               std::vector<std::string>{"plateau", "not_finite", "loss_spike", "grad_norm_spike", "throughput_drop",
                                        "hang", "straggler", "memory_high", "expert_collapse"})
          .add("metric", &AlertRule::metric, "the metric the plateau condition watches",
               std::vector<std::string>{"val_loss"})
          .add("patience", &AlertRule::patience, "evaluations in a row without improvement", Range::at_least(1))
          .add("min_delta", &AlertRule::min_delta, "an improvement smaller than this does not count",
               Range::non_negative())
          .add("actions", &AlertRule::actions,
               "comma-separated: log, notify (webhook, e-mail and/or command), checkpoint, pause, stop (checkpoint, exit 79), "
               "rollback_and_skip (restore the newest checkpoint before the step, skip the batches since; see "
               "rollback_limit)")
          .add("window", &AlertRule::window,
               "spikes: steps of history for the z-score; throughput_drop: steps before it may fire; expert_collapse: "
               "steps in a row",
               Range::at_least(2))
          .add("threshold", &AlertRule::threshold, "spikes: the z-score above which a value is a spike",
               Range::positive())
          .add("fraction", &AlertRule::fraction,
               "throughput_drop: fires below fraction x the run's median tokens/s; expert_collapse: the busiest "
               "expert's share of the choices above which a step counts",
               Range::between(0.0, 1.0))
          .add("factor", &AlertRule::factor, "straggler: fires above factor x the median step time across ranks",
               Range::at_least(1.0))
          .add("memory_fraction", &AlertRule::memory_fraction,
               "memory_high: fires when a rank's host has used more than this fraction of its memory (total - "
               "available, /proc/meminfo; sampled every monitor.system_interval), or its device allocator's reserved "
               "bytes exceed this fraction of the device's memory (or TRIDENT_CUDA_MEMORY_LIMIT_MB)",
               Range::between(0.0, 1.0))
          .add("rollback_limit", &AlertRule::rollback_limit,
               "rollback_and_skip: rollbacks to one checkpoint (within rollback_window steps) before the rule rolls "
               "back to an older one; with none left the run stops, exit 80",
               Range::at_least(1))
          .add("rollback_window", &AlertRule::rollback_window,
               "rollback_and_skip: a rollback counts against rollback_limit while the step that fired is within this "
               "many steps of the one it rolled back from",
               Range::at_least(1))
          .add("timeout", &AlertRule::timeout,
               "hang: seconds without a finished step (evaluations and checkpoints count as progress)",
               Range::positive())
          .add("webhook", &AlertRule::webhook, "notify: URL that receives the event as a JSON POST")
          .add("smtp_url", &AlertRule::smtp_url, "notify: SMTP server for e-mail (smtp://host:port)")
          .add("email_from", &AlertRule::email_from, "notify: the e-mail's sender")
          .add("email_to", &AlertRule::email_to, "notify: the e-mail's recipient (needs smtp_url)")
          .add("command", &AlertRule::command,
               "notify: a shell command run with the event's JSON on stdin (at most 30 s)");
  return t;
}

std::vector<std::string> AlertRule::action_list() const {
  std::vector<std::string> out;
  std::stringstream ss(actions);
  std::string a;
  while (std::getline(ss, a, ',')) {
    const size_t b = a.find_first_not_of(" \t"), e = a.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(a.substr(b, e - b + 1));
  }
  return out;
}

bool AlertRule::has_action(const std::string& action) const {
  for (const std::string& a : action_list())
    if (a == action) return true;
  return false;
}

void AlertRule::validate() const {
  for (const std::string& a : action_list())
    TRI_CHECK(a == "log" || a == "notify" || a == "checkpoint" || a == "pause" || a == "stop" ||
                  a == "rollback_and_skip",
              "[[alerts]] '", name, "': unknown action '", a, "' in actions = \"", actions,
              "\": allowed: log, notify, checkpoint, pause, stop, rollback_and_skip");
  if (condition == "hang")
    for (const std::string& a : action_list())
      TRI_CHECK(a == "log" || a == "notify" || a == "stop", "[[alerts]] '", name, "': action '", a,
                "' cannot act on a hang (a hung rank never reaches the step boundary where it would): allowed for "
                "condition = \"hang\": log, notify, stop (dump this rank's state, exit 76)");
  TRI_CHECK(!has_action("rollback_and_skip") ||
                (condition != "plateau" && condition != "hang" && condition != "straggler" &&
                 condition != "memory_high" && condition != "expert_collapse"), "[[alerts]] '", name,
            "': rollback_and_skip needs a per-step condition (not_finite, loss_spike, grad_norm_spike, "
            "throughput_drop), not condition = \"", condition, "\"");
  TRI_CHECK(email_to.empty() || !smtp_url.empty(), "[[alerts]] '", name, "': email_to = \"", email_to,
            "\" needs smtp_url (smtp://host:port)");
  TRI_CHECK(smtp_url.empty() || smtp_url.starts_with("smtp://") || smtp_url.starts_with("smtps://"), "[[alerts]] '",
            name, "': smtp_url = \"", smtp_url, "\" must start with smtp:// or smtps://");
  TRI_CHECK(webhook.empty() || webhook.starts_with("http://") || webhook.starts_with("https://"), "[[alerts]] '", name,
            "': webhook = \"", webhook, "\" must start with http:// or https://");
}

std::string AlertEvent::message() const {
  std::ostringstream os;
  os.precision(6);
  if (!detail.empty()) {
    os << "alert '" << rule << "' (" << condition << ") at step " << step << ": " << detail;
    return os.str();
  }
  os << "alert '" << rule << "' (" << condition << ") at step " << step << ": " << metric << " " << value
     << " has not improved on " << best << " (step " << best_step << ") for " << evaluations << " evaluations";
  return os.str();
}

std::string AlertEvent::json() const {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::ordered_json j = {{"rule", rule}, {"condition", condition}, {"metric", metric}, {"step", step},
                              {"value", number(value)}};
  if (condition == "plateau") {
    j["best"] = number(best);
    j["best_step"] = best_step;
    j["evaluations"] = evaluations;
  } else {
    j["baseline"] = number(best);
  }
  j["message"] = message();
  return j.dump();
}

std::optional<AlertEvent> PlateauState::observe(int64_t step, double value) {
  // NaN compares false: it counts as no improvement.
  if (!best_ || value < *best_ - rule_.min_delta) {
    best_ = value;
    best_step_ = step;
    since_best_ = 0;
    return std::nullopt;
  }
  if (++since_best_ < rule_.patience) return std::nullopt;
  since_best_ = 0;
  return AlertEvent{rule_.name, rule_.condition, rule_.metric, step, value, *best_, best_step_, rule_.patience, ""};
}

}  // namespace trident::monitor

namespace trident::monitor {

nlohmann::json PlateauState::state() const {
  nlohmann::json j = {{"best_step", best_step_}, {"since_best", since_best_}};
  j["best"] = best_ ? nlohmann::json(*best_) : nlohmann::json(nullptr);
  return j;
}

void PlateauState::restore(const nlohmann::json& j) {
  try {
    best_.reset();
    if (!j.at("best").is_null()) best_ = j.at("best").get<double>();
    best_step_ = j.at("best_step").get<int64_t>();
    since_best_ = j.at("since_best").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    TRI_CHECK(false, "the saved state of plateau rule '", rule_.name, "' (", j.dump(), ") is malformed: ", e.what());
  }
}

}  // namespace trident::monitor
