// Packed documents: rows of a batch that hold several documents back to back (packed
// instruction examples, or pretraining text with data.document_masking), described by position
// ids as Hugging Face describes packed sequences (DataCollatorWithFlattening's position_ids,
// which its FlashAttention path turns into varlen cu_seqlens): each token's position in its
// document, 0 at a document's first token and one more at each next one. Attention keeps every
// document to itself (Note [Document masks] in kernels/cpu/attention.h) and RoPE and learned
// position embeddings read these positions, so a packed row computes what its documents
// compute one by one.
#pragma once

#include "core/device.h"
#include "core/tensor.h"

namespace trident::ops {

struct Documents {
  Tensor positions;  // (B, T) i64: the position ids
  Tensor start;      // (B, T) i64: the first index in the row of each token's document
  Tensor end;        // (B, T) i64: one past its last index
};

// The documents of position ids (B, T), any integer dtype, on any device (read on the host),
// with every tensor made on `device`. A document begins where a position is 0; elsewhere a
// position is the one before plus one. A row's first token may continue a document from an
// earlier window (position > 0; its positions go on from there). Errors name the row, index
// and values of the first position that breaks the rule, and a negative one.
Documents documents_from_positions(const Tensor& positions, Device device);

// The position ids of token rows `ids` (B, T) when every token after `end_of_document` begins
// a new document (Megatron's reset_position_ids and torchtitan's document masking: the
// end-of-text token ends its document): 0 at index 0 of each row and after each such token,
// counting up in between. (B, T) i64 on the host.
Tensor positions_after(const Tensor& ids, int64_t end_of_document);

}  // namespace trident::ops
