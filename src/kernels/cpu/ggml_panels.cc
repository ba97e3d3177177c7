#include "kernels/cpu/ggml_panels.h"

#include <cstring>

#include "core/check.h"

namespace trident::kernels::cpu {

// Note [Sixteen rows a panel]
// Why not keep ggml's rows in memory, as the files have them? A decode step multiplies each
// weight row by one to eight rows of x. Row by row, each output is a horizontal sum of a
// vector's lanes, and x's codes, scales and corrections are loaded again for every weight row;
// for LLaMA 125M's 768-input rows (24 blocks) that overhead was a large part of the
// instructions. On one thread, trident's Q8_0/Q4_0 decode of LLaMA 125M was 0.95x/0.98x
// llama.cpp's (bench/results/2026-11-30-llama-cpp-zen5), whose CPU backend also repacks Q4_0
// into interleaved rows. In panels of 16 rows, 4 code bytes of each of the 16 rows form one
// 64-byte vector. One vpdpbusd with 4 bytes of x broadcast then sums 16 outputs at once, each
// in its own int32 lane, with no horizontal sum, and x's 4 bytes serve 16 rows (Note [Integer
// dot products at decode] in ggml_block_matvec.cc).
// Measured with decode_bench on 2 Zen 4 vCPUs, in turns, at batch 1 on one decode thread:
// - LLaMA 125M Q4_0: 230 -> 313 tok/s; Q8_0: 168 -> 203.
// - GPT-2 124M Q4_0: 150 -> 194.
// - Batch 8: LLaMA Q4_0 374 -> 653, GPT-2 Q8_0 320 -> 430.
// (bench/results/2026-11-30-decode-panels-zen4.) Prefill's GEMM reads the same panels; it used to
// build this transpose from ggml's rows on every product (Note [Integer GEMM at prefill]).
// Only files keep ggml's rows: a weight is packed on load and on quantizing, and unpacked on
// save and export, byte for byte. The rows past the last are padding: at most 15 rows of zeros
// (GPT-2's head: 15 of 50257).
// A 4-byte group of Q4_0's qs holds codes 4v..4v+3 in its low nibbles and 16+4v..16+4v+3 in its
// high ones, so each Q4_0 vector serves two groups of x; Q8_0's vector v serves group v.

void ggml_pack_panels(GgmlBlockType t, int64_t rows, int64_t cols, int64_t r0, int64_t r1, const uint8_t* codes,
                      const uint16_t* scales, uint8_t* panel_codes, uint16_t* panel_scales) {
  TRI_ASSERT(r0 % kGgmlPanelRows == 0 && 0 <= r0 && r0 <= r1 && r1 <= rows, "ggml_pack_panels: rows [", r0, ", ",
             r1, ") of ", rows);
  const GgmlPanels out{t, rows, cols, panel_codes, panel_scales};
  const int64_t nb = out.blocks(), cb = ggml_code_bytes(t);
  const int64_t end = r1 == rows ? ggml_panel_count(rows) * kGgmlPanelRows : r1;
  for (int64_t r = r0; r < end; ++r) {
    const int64_t p = r / kGgmlPanelRows, i = r % kGgmlPanelRows;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = panel_codes + (p * nb + b) * ggml_panel_block_bytes(t) + i * 4;
      uint16_t& d = panel_scales[(p * nb + b) * kGgmlPanelRows + i];
      if (r >= r1) {
        for (int64_t v = 0; v < cb / 4; ++v) std::memset(dst + v * 64, 0, 4);
        d = 0;
        continue;
      }
      const uint8_t* src = codes + ((r - r0) * nb + b) * cb;
      for (int64_t v = 0; v < cb / 4; ++v) std::memcpy(dst + v * 64, src + v * 4, 4);
      d = scales[(r - r0) * nb + b];
    }
  }
}

void ggml_unpack_panels(const GgmlPanels& in, int64_t r0, int64_t r1, uint8_t* codes, uint16_t* scales) {
  TRI_ASSERT(0 <= r0 && r0 <= r1 && r1 <= in.rows, "ggml_unpack_panels: rows [", r0, ", ", r1, ") of ", in.rows);
  const int64_t nb = in.blocks(), cb = ggml_code_bytes(in.type);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t p = r / kGgmlPanelRows, i = r % kGgmlPanelRows;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* src = in.block_codes(p, b) + i * 4;
      uint8_t* dst = codes + ((r - r0) * nb + b) * cb;
      for (int64_t v = 0; v < cb / 4; ++v) std::memcpy(dst + v * 4, src + v * 64, 4);
      scales[(r - r0) * nb + b] = in.block_scales(p, b)[i];
    }
  }
}

}  // namespace trident::kernels::cpu
