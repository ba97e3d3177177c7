// A Q8_0 or Q4_0 weight (kernels/cpu/ggml_blocks.h) held in memory as panels of 16 rows, the
// layout the host kernels read (Note [Sixteen rows a panel] in ggml_panels.cc). A file keeps
// ggml's blocks row after row (a GGUF tensor, a quantized directory); pack and unpack convert,
// byte for byte, so nothing is rounded on the way in or out.
//
// Panel p holds rows 16p .. 16p + 15 (past the last row: zero codes and zero scales). For each
// block b it has the 16 rows' codes, ggml_code_bytes(t) * 16 bytes: vector v (64 bytes; 8 for
// Q8_0, 4 for Q4_0) holds each row i's code bytes 4v .. 4v + 3 at bytes 4i .. 4i + 3. Then,
// apart, the 16 rows' fp16 scales of the block. Q8_0's bytes are its int8 codes; Q4_0's hold
// codes j (low nibble) and j + 16 (high nibble), as ggml's qs.
#pragma once

#include <cstdint>

#include "kernels/cpu/ggml_blocks.h"

namespace trident::kernels::cpu {

inline constexpr int64_t kGgmlPanelRows = 16;

// Panels for `rows` rows: ceil(rows / 16).
constexpr int64_t ggml_panel_count(int64_t rows) { return (rows + kGgmlPanelRows - 1) / kGgmlPanelRows; }
// Code bytes of one block of a panel: 512 (Q8_0), 256 (Q4_0).
constexpr int64_t ggml_panel_block_bytes(GgmlBlockType t) { return kGgmlPanelRows * ggml_code_bytes(t); }

// A packed weight, read-only: (rows, cols) in blocks of `type`, codes and scales as above.
struct GgmlPanels {
  GgmlBlockType type;
  int64_t rows, cols;
  const uint8_t* codes;    // ggml_panel_count(rows) * blocks() * ggml_panel_block_bytes(type)
  const uint16_t* scales;  // ggml_panel_count(rows) * blocks() * 16 fp16 bit patterns

  int64_t blocks() const { return cols / kGgmlBlock; }
  int64_t panels() const { return ggml_panel_count(rows); }
  const uint8_t* block_codes(int64_t p, int64_t b) const {
    return codes + (p * blocks() + b) * ggml_panel_block_bytes(type);
  }
  const uint16_t* block_scales(int64_t p, int64_t b) const { return scales + (p * blocks() + b) * kGgmlPanelRows; }
  // Code byte j (ggml's qs[j]) of row r's block b.
  uint8_t code_byte(int64_t r, int64_t b, int64_t j) const {
    return block_codes(r / kGgmlPanelRows, b)[(j / 4) * 64 + (r % kGgmlPanelRows) * 4 + j % 4];
  }
  uint16_t scale(int64_t r, int64_t b) const { return block_scales(r / kGgmlPanelRows, b)[r % kGgmlPanelRows]; }
  // Code j of row r's block b as an integer: Q8_0's byte, Q4_0's nibble less 8 (j < 16 from
  // byte j's low nibble, j >= 16 from byte j - 16's high nibble). For the plain C++ paths.
  int code(int64_t r, int64_t b, int64_t j) const {
    if (type == GgmlBlockType::kQ8_0) return static_cast<int8_t>(code_byte(r, b, j));
    return (j < 16 ? (code_byte(r, b, j) & 15) : (code_byte(r, b, j - 16) >> 4)) - 8;
  }
};

// Rows [r0, r1) of a weight stored as ggml's blocks row after row (codes: that row range's
// bytes, row r0 first; scales likewise) into the packed arrays of a (rows, cols) weight of type
// t (panel_codes and panel_scales: the whole weight's, as GgmlPanels::codes and ::scales). r0 a
// multiple of 16; where r1 == rows, the last panel's rows past `rows` are zeroed. Serial:
// callers split by panels.
void ggml_pack_panels(GgmlBlockType t, int64_t rows, int64_t cols, int64_t r0, int64_t r1, const uint8_t* codes,
                      const uint16_t* scales, uint8_t* panel_codes, uint16_t* panel_scales);
// The inverse: rows [r0, r1) as ggml's blocks row after row, row r0 first. Any r0 <= r1 <= rows.
void ggml_unpack_panels(const GgmlPanels& in, int64_t r0, int64_t r1, uint8_t* codes, uint16_t* scales);

}  // namespace trident::kernels::cpu
