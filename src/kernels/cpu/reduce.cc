#include "kernels/cpu/reduce.h"

#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/row_reduce.h"

namespace trident::kernels::cpu {

template <class T>
void sum_forward(T* out, const T* in, const Shape& shape, const Strides& strides,
                 const bool* reduce_dim, double scale) {
  // Split the dims into kept (K) and reduced (R), keeping their order.
  Shape kshape, rshape;
  Strides kstr, rstr;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;  // size-1 dims change nothing
    if (reduce_dim[i]) {
      rshape.push_back(shape[i]);
      rstr.push_back(strides[i]);
    } else {
      kshape.push_back(shape[i]);
      kstr.push_back(strides[i]);
    }
  }
  const int64_t n_out = kshape.product(), n_red = rshape.product();
  if (n_out == 0) return;
  if (n_red == 0) {
    for (int64_t o = 0; o < n_out; ++o) out[o] = static_cast<T>(0.0);
    return;
  }
  auto offset_of = [](int64_t idx, const Shape& sh, const Strides& st) {
    int64_t off = 0;
    for (int i = sh.size() - 1; i >= 0; --i) {
      off += (idx % sh[i]) * st[i];
      idx /= sh[i];
    }
    return off;
  };

  // Case 0: nothing reduced (only size-1 dims): a scaled copy.
  if (rshape.empty()) {
    parallel_for(0, n_out, 16384, [&](int64_t ob, int64_t oe) {
      for (int64_t o = ob; o < oe; ++o)
        out[o] = static_cast<T>(static_cast<double>(in[offset_of(o, kshape, kstr)]) * scale);
    });
    return;
  }

  // Case 1: everything reduced into one value, contiguous input: fixed-size chunks summed
  // in parallel, partials added in order (Note [Deterministic parallelism]).
  if (n_out == 1 && rshape.size() == 1 && rstr[0] == 1) {
    const double total = parallel_reduce<double>(n_red, 32768, 0.0, [&](int64_t b, int64_t e) {
      double s = 0.0;
      for (int64_t i = b; i < e; ++i) s += static_cast<double>(in[i]);
      return s;
    });
    out[0] = static_cast<T>(total * scale);
    return;
  }

  // Case 2: the innermost kept dim is contiguous (e.g. a bias gradient summing rows):
  // add whole row segments, which vectorizes. Work items: (outer kept index, column block).
  const int kd = kshape.size();
  if (kd > 0 && kstr[kd - 1] == 1) {
    const int64_t width = kshape[kd - 1], outer = n_out / width;
    constexpr int64_t kBlock = 512;
    const int64_t blocks = (width + kBlock - 1) / kBlock;
    Shape oshape = kshape;
    Strides ostr = kstr;
    oshape.resize(kd - 1);
    ostr.resize(kd - 1);
    parallel_for(0, outer * blocks, 1, [&](int64_t wb, int64_t we) {
      double acc[kBlock];
      for (int64_t w = wb; w < we; ++w) {
        const int64_t o = w / blocks, c0 = (w % blocks) * kBlock;
        const int64_t cw = std::min(kBlock, width - c0);
        for (int64_t j = 0; j < cw; ++j) acc[j] = 0.0;
        const T* base = in + offset_of(o, oshape, ostr) + c0;
        for (int64_t r = 0; r < n_red; ++r) {
          const T* row = base + offset_of(r, rshape, rstr);
          for (int64_t j = 0; j < cw; ++j) acc[j] += static_cast<double>(row[j]);
        }
        T* dst = out + o * width + c0;
        for (int64_t j = 0; j < cw; ++j) dst[j] = static_cast<T>(acc[j] * scale);
      }
    });
    return;
  }

  // Case 3: general: each output sums its reduced block; the innermost reduced dim runs
  // as the inner loop.
  const int rd = rshape.size();
  const int64_t rin = rshape[rd - 1], rin_stride = rstr[rd - 1], router = n_red / rin;
  Shape rout_shape = rshape;
  Strides rout_str = rstr;
  rout_shape.resize(rd - 1);
  rout_str.resize(rd - 1);
  parallel_for(0, n_out, std::max<int64_t>(1, 16384 / n_red), [&](int64_t ob, int64_t oe) {
    for (int64_t o = ob; o < oe; ++o) {
      const T* base = in + offset_of(o, kshape, kstr);
      double s = 0.0;
      for (int64_t r = 0; r < router; ++r) {
        const T* p = base + offset_of(r, rout_shape, rout_str);
        if (rin_stride == 1) {
          for (int64_t j = 0; j < rin; ++j) s += static_cast<double>(p[j]);
        } else {
          for (int64_t j = 0; j < rin; ++j) s += static_cast<double>(p[j * rin_stride]);
        }
      }
      out[o] = static_cast<T>(s * scale);
    }
  });
}

#define TRI_INSTANTIATE(T) \
  template void sum_forward<T>(T*, const T*, const Shape&, const Strides&, const bool*, double);
TRI_FOR_EACH_FLOATING_TYPE(TRI_INSTANTIATE)
#undef TRI_INSTANTIATE

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  return parallel_reduce<double>(n, 32768, 0.0, [&](int64_t b, int64_t e) {
    return lane_sum<double>(e - b, [x, b](int64_t j) {
      const double v = static_cast<double>(x[b + j]);
      return v * v;
    });
  });
}

template double sum_of_squares<float>(const float*, int64_t);
template double sum_of_squares<double>(const double*, int64_t);
template double sum_of_squares<bf16>(const bf16*, int64_t);
template double sum_of_squares<f16>(const f16*, int64_t);

}  // namespace trident::kernels::cpu
