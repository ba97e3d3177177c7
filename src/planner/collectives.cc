#include "planner/collectives.h"

namespace trident::planner {

double all_reduce_seconds(double bytes, int64_t n, const LinkSpec& link) {
  return 2.0 * reduce_scatter_seconds(bytes, n, link);
}

double reduce_scatter_seconds(double bytes, int64_t n, const LinkSpec& link) {
  if (n <= 1) return 0.0;
  const double k = static_cast<double>(n - 1);
  return k / static_cast<double>(n) * bytes / (link.bandwidth_gbs * 1e9) + k * link.latency_us * 1e-6;
}

GroupPlacement place_group(const MeshGroup& g, int64_t ranks, const Cluster& cluster) {
  const int64_t d = cluster.shape.devices_per_node, reach = g.size * g.stride;
  if (!cluster.crosses_nodes(reach, ranks)) return {g.size, 1, false};
  // Each member on its own node, at the same index of each.
  if (g.stride % d == 0) return {1, g.size, false};
  // k members a node: the stride divides the node and the group's reach is whole nodes.
  if (d % g.stride == 0 && reach % d == 0) {
    const int64_t k = d / g.stride;
    return {k, g.size / k, false};
  }
  return {1, g.size, true};
}

double collective_seconds(Collective c, double bytes, const MeshGroup& g, int64_t ranks, const Cluster& cluster) {
  if (g.size <= 1 || bytes <= 0.0) return 0.0;
  const GroupPlacement p = place_group(g, ranks, cluster);
  // The ring model's half of an all-reduce, as this collective runs on `link` (Note
  // [Collectives as measured]).
  auto on = [&](double b, int64_t n, const LinkSpec& link) {
    const double half = reduce_scatter_seconds(b, n, link);
    switch (c) {
      case Collective::kAllReduce: return 2.0 * half;
      case Collective::kReduceScatter: return link.reduce_scatter_factor * half;
      case Collective::kAllGather: return link.all_gather_factor * half;
    }
    return 2.0 * half;
  };
  if (p.uneven) return on(bytes, g.size, cluster.inter);
  // Note [Collectives across nodes]: inside each node, then across with a k-th each.
  return on(bytes, p.per_node, cluster.intra) + on(bytes / static_cast<double>(p.per_node), p.nodes, cluster.inter);
}

}  // namespace trident::planner
