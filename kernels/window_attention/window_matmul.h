// Banded ("windowed") matrix products for windowed self-attention, one set per device.
//
// Every function takes contiguous rows of shape (N, s, k) (N = flattened batch x heads) and
// indexes with int64_t, so N * s * k may exceed 2^31. Band column j of row i pairs row i with
// row i + j - w, j in [0, 2w]; pairs outside [0, s) are zero.
#pragma once

#include <ATen/core/Tensor.h>

namespace window_attention {

// band[n, i, j] = a[n, i, :] . b[n, i + j - w, :]          (N, s, d) x (N, s, d) -> (N, s, 2w+1)
at::Tensor window_qk_cpu(const at::Tensor& a, const at::Tensor& b, int64_t window);

// transposed == false: out[n, t, :] = sum_j band[n, t, j] * x[n, t + j - w, :]
// transposed == true:  out[n, t, :] = sum_j band[n, t + w - j, j] * x[n, t + w - j, :]
//                                                           (N, s, 2w+1) x (N, s, d) -> (N, s, d)
at::Tensor window_av_cpu(const at::Tensor& band, const at::Tensor& x, int64_t window, bool transposed);

#ifdef WITH_CUDA
at::Tensor window_qk_cuda(const at::Tensor& a, const at::Tensor& b, int64_t window);
at::Tensor window_av_cuda(const at::Tensor& band, const at::Tensor& x, int64_t window, bool transposed);
#endif

}  // namespace window_attention
