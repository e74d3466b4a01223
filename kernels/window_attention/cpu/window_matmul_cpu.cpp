// CPU banded products (see ../window_matmul.h): rows are split over threads with at::parallel_for
// (OpenMP); each row accumulates in at::opmath_type (float for half/bfloat16) and only visits the
// band columns whose partner row lies inside [0, s), so no out-of-range reads and no branches in
// the inner loop over the feature dimension.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

#include "../window_matmul.h"

namespace window_attention {
namespace {

// Rows per task so that one task does at least ~16k multiply-adds.
int64_t grain_size(int64_t width, int64_t features) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, width * features));
}

template <typename scalar_t>
void qk_rows(const scalar_t* a, const scalar_t* b, scalar_t* band, int64_t n_rows, int64_t s,
             int64_t d, int64_t w) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t width = 2 * w + 1;
  at::parallel_for(0, n_rows, grain_size(width, d), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> query(d);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row % s;
      const int64_t first = row - i;  // row index of position 0 in this sequence
      const scalar_t* a_row = a + row * d;
      for (int64_t c = 0; c < d; ++c) query[c] = static_cast<acc_t>(a_row[c]);
      scalar_t* out = band + row * width;
      const int64_t lo = std::max<int64_t>(0, w - i);          // partner i + j - w >= 0
      const int64_t hi = std::min<int64_t>(width, s + w - i);  // partner i + j - w < s
      for (int64_t j = 0; j < width; ++j) {
        if (j < lo || j >= hi) {
          out[j] = scalar_t(0);
          continue;
        }
        const scalar_t* key = b + (first + i + j - w) * d;
        acc_t acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t c = 0; c < d; ++c) acc += query[c] * static_cast<acc_t>(key[c]);
        out[j] = static_cast<scalar_t>(acc);
      }
    }
  });
}

template <typename scalar_t, bool transposed>
void av_rows(const scalar_t* band, const scalar_t* x, scalar_t* out, int64_t n_rows, int64_t s,
             int64_t d, int64_t w) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t width = 2 * w + 1;
  at::parallel_for(0, n_rows, grain_size(width, d), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(d);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t t = row % s;
      const int64_t first = row - t;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      // partner p = t + j - w (plain) or t + w - j (transposed) must lie in [0, s)
      const int64_t lo = transposed ? std::max<int64_t>(0, t + w - s + 1) : std::max<int64_t>(0, w - t);
      const int64_t hi = transposed ? std::min<int64_t>(width, t + w + 1) : std::min<int64_t>(width, s + w - t);
      for (int64_t j = lo; j < hi; ++j) {
        const int64_t partner = transposed ? t + w - j : t + j - w;
        const acc_t weight =
            static_cast<acc_t>(band[(transposed ? first + partner : row) * width + j]);
        const scalar_t* x_row = x + (first + partner) * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) acc[c] += weight * static_cast<acc_t>(x_row[c]);
      }
      scalar_t* out_row = out + row * d;
      for (int64_t c = 0; c < d; ++c) out_row[c] = static_cast<scalar_t>(acc[c]);
    }
  });
}

}  // namespace

at::Tensor window_qk_cpu(const at::Tensor& a, const at::Tensor& b, int64_t window) {
  const int64_t n = a.size(0), s = a.size(1), d = a.size(2);
  at::Tensor band = at::empty({n, s, 2 * window + 1}, a.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "window_qk_cpu", [&] {
    qk_rows<scalar_t>(a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(),
                      band.mutable_data_ptr<scalar_t>(), n * s, s, d, window);
  });
  return band;
}

at::Tensor window_av_cpu(const at::Tensor& band, const at::Tensor& x, int64_t window, bool transposed) {
  const int64_t n = x.size(0), s = x.size(1), d = x.size(2);
  at::Tensor out = at::empty({n, s, d}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "window_av_cpu", [&] {
    const scalar_t* band_ptr = band.const_data_ptr<scalar_t>();
    const scalar_t* x_ptr = x.const_data_ptr<scalar_t>();
    scalar_t* out_ptr = out.mutable_data_ptr<scalar_t>();
    if (transposed) {
      av_rows<scalar_t, true>(band_ptr, x_ptr, out_ptr, n * s, s, d, window);
    } else {
      av_rows<scalar_t, false>(band_ptr, x_ptr, out_ptr, n * s, s, d, window);
    }
  });
  return out;
}

}  // namespace window_attention
