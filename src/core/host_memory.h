// The machine's physical memory, for checks that refuse what cannot fit (a batch, a model)
// and for the planner's local cluster.
#pragma once

namespace trident {

// Bytes of physical memory, or 0 when the system does not say (sysconf failed): callers
// then skip their check rather than refuse everything.
double host_memory_bytes();

}  // namespace trident
