// A fine-tuning run as the planner counts it (issue #48): LoRA's adapters ([lora], or
// train.init_adapter's PEFT files), a frozen base (LoRA's, or train.freeze) and QLoRA's NF4
// base ([quantization]), applied to the family's shapes by the trainer's own rules, so that the
// memory model (planner/memory_model.h) counts what the trainer holds. The memory model leaves
// out a frozen head's dw and a frozen embedding's gradients (Note [A frozen head and embedding]),
// but still counts the inputs a frozen weight's product no longer keeps (Note [A frozen
// weight's input] in autograd/derivatives/linalg.cc: over without activation checkpointing);
// the time model leaves out a frozen weight's dW GEMM and a frozen head's dw passes (Note
// [Frozen weights' time] in time_model.cc).
//
// Note [The planner's fine-tuning]
//  * Adapters: adapters::select_lora_layers (apply_lora's matching) over the modules that the
//    shapes' parameter names make. Each adapted layer gets A (r, in) and B (out, r) right after
//    its own parameters (named_parameters() order: a module's parameters, then its children),
//    in its block. Under tensor parallelism the factor on the split side of the layer is split
//    with it, the other replicated (Note [Adapter factors] in nn/linear.h): B's rows under a
//    column-wise split (GPT-2's fused q, k, v alike), A's columns under a row-wise one.
//  * Frozen: under LoRA every base parameter; otherwise those train.freeze names (nn::frozen_by).
//  * NF4: every frozen linear layer's weight but those quantization.skip_modules names
//    (QuantizationOptions::skips), Nf4Weight::bytes_for the shard a rank holds.
// A module of the shapes is linear when it holds a 2-D "weight" outside the embedding (an
// nn::Linear, or GPT-2's Conv1D whose weight is (in, out): ModelFamily::linear_weights_in_out).
// tests/planner/fine_tuning_test checks the adapters and the NF4 weights against apply_lora
// and quantize_base on built models of every family; tests/planner_mpi/layout_agreement_test
// the placement table and the layouts against the trainer's.
#pragma once

#include <string>

#include "planner/layout.h"
#include "planner/run_spec.h"

namespace trident::planner {

// Adds `cfg`'s adapters to run.shapes and sets run.holding and run.nf4_double_quant (Note [The
// planner's fine-tuning]); a run that trains every parameter is left as it is. Throws what the
// trainer would, naming the key: a target or skip item that names no layer, a pattern that
// matches no parameter, NF4 with no frozen linear layer, nothing left to train.
void apply_fine_tuning(RunSpec& run, const train::TrainConfig& cfg);

// Whether the trainer runs `run`'s fine-tuning under `l`: it refuses NF4 under ZeRO-3 and, under
// tensor parallelism, an adapter on a layer split by a style without adapter factors (the
// vocabulary-parallel head; k and v replicated past their heads). When not, `why` (if given)
// says which.
bool fine_tuning_accepts(const RunSpec& run, const Layout& l, std::string* why = nullptr);

// The parameters `run` trains, over the whole model.
int64_t trained_parameters(const RunSpec& run);

// Whether the weight of a block's product in -> out trains (a frozen one's product computes no
// dW): true when any block weight of that shape trains, or none has it (a LoRA factor's
// product). Weights are (out, in), or (in, out) in a family with linear_weights_in_out.
bool product_weight_trains(const RunSpec& run, int64_t in, int64_t out);
// Whether the head's weight (the tied embedding's, or the untied head's) trains.
bool head_weight_trains(const RunSpec& run);
// Whether the token embedding's weight trains (its own, or the tied head's).
bool token_embedding_trains(const RunSpec& run);
// Whether a mixture's experts train.
bool experts_train(const RunSpec& run);

// LoRA's adapters as the time model counts them, per block (the model's total over its
// blocks): their factors' products, A's (in, r) and B's (r, out), and the bytes per token their
// scaling and adding move around the layer's product (Note [Frozen weights' time]).
struct AdapterWork {
  std::vector<std::pair<int64_t, int64_t>> products;  // every adapter's two, the whole model's
  double blocks = 1.0;                                // to divide the products' time by
  double forward_bytes_per_token = 0.0;               // per block
  double backward_bytes_per_token = 0.0;              // per block
};
AdapterWork adapter_work(const RunSpec& run, int64_t element_bytes);

}  // namespace trident::planner
