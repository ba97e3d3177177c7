#include "parallel/micro_batch_runner.h"

#include "autograd/engine.h"
#include "autograd/functions.h"

namespace trident::parallel {

double SequentialRunner::train(const std::vector<MicroBatch>& micro, double loss_seed, UpdateStrategy& update) {
  double sum = 0.0;
  for (size_t i = 0; i < micro.size(); ++i) {
    update.begin_backward(i + 1 == micro.size());  // only the last micro-batch communicates
    const Tensor loss = model_.loss(micro[i].inputs, micro[i].targets, micro[i].docs());
    sum += micro[i].weighed(loss.item());
    const double seed = loss_seed * micro[i].weight;
    autograd::backward(seed == 1.0 ? loss : loss * seed);
    update.end_backward();
  }
  return sum;
}

double SequentialRunner::evaluate(const std::vector<MicroBatch>& batches) {
  double sum = 0.0;
  for (const MicroBatch& b : batches) sum += b.weighed(model_.loss(b.inputs, b.targets, b.docs()).item());
  return sum;
}

}  // namespace trident::parallel
