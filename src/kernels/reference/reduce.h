// Reference reductions. dims may be negative; empty dims reduces everything.
#pragma once

#include <vector>

#include "kernels/reference/array.h"

namespace trident::reference {

Array sum(const Array& x, const std::vector<int64_t>& dims, bool keepdim);
Array mean(const Array& x, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace trident::reference
