#include "nn/embedding.h"

#include "autograd/functions.h"
#include "core/factory.h"

namespace trident::nn {

Embedding::Embedding(int64_t num, int64_t dim, DType dtype)
    : weight_(register_parameter("weight", zeros({num, dim}, dtype))) {}

Tensor Embedding::forward(const Tensor& indices) const { return trident::embedding(weight_, indices); }

}  // namespace trident::nn
