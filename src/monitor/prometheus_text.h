// Prometheus' text exposition format (version 0.0.4) of a registry: for each family a
// "# HELP" and a "# TYPE" line, then one line per series, `name{labels} value`; histograms
// as name_bucket{le="..."}, name_sum and name_count. `const_labels` (e.g. rank and job) are
// put first on every series.
//
// Not here: timestamps (Prometheus stamps a scrape itself), the OpenMetrics format.
#pragma once

#include <string>

#include "monitor/registry.h"

namespace trident::monitor {

// The content type GET /metrics answers with.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string prometheus_text(const Registry& registry, const Labels& const_labels = {});

// A value as Prometheus writes it: the shortest round-trip decimal, NaN, +Inf, -Inf.
std::string prometheus_number(double v);

}  // namespace trident::monitor
