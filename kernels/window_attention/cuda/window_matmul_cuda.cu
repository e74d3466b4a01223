// CUDA banded products (see ../window_matmul.h). Grid-stride loops with int64_t indices, so sizes
// beyond 2^31 elements work; accumulation in at::opmath_type (float for half/bfloat16).
//   window_qk: one warp per band entry (n, i, j); lanes stride over the feature dimension (coalesced
//              loads of both rows), then a shuffle reduction.
//   window_av: one thread per output element (n, t, c); consecutive threads read consecutive
//              features of the same partner row, and the band weight is a warp-wide broadcast.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "../window_matmul.h"

namespace window_attention {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

int64_t blocks_for(int64_t threads_needed) {
  return std::max<int64_t>(1, std::min<int64_t>(kMaxBlocks, (threads_needed + kThreads - 1) / kThreads));
}

__device__ __forceinline__ int64_t larger(int64_t x, int64_t y) { return x > y ? x : y; }
__device__ __forceinline__ int64_t smaller(int64_t x, int64_t y) { return x < y ? x : y; }

template <typename scalar_t>
__global__ void qk_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
                          scalar_t* __restrict__ band, int64_t entries, int64_t s, int64_t d,
                          int64_t w) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t width = 2 * w + 1;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
  // The loop bound is uniform within a warp, so the full-mask shuffles below are safe.
  for (int64_t e = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; e < entries;
       e += warps) {
    const int64_t row = e / width;
    const int64_t j = e - row * width;
    const int64_t i = row % s;
    const int64_t partner = i + j - w;
    acc_t acc = 0;
    if (partner >= 0 && partner < s) {
      const scalar_t* x = a + row * d;
      const scalar_t* y = b + (row + j - w) * d;
      for (int64_t c = lane; c < d; c += kWarp) {
        acc += static_cast<acc_t>(x[c]) * static_cast<acc_t>(y[c]);
      }
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      acc += __shfl_down_sync(0xffffffffu, acc, offset);
    }
    if (lane == 0) band[e] = static_cast<scalar_t>(acc);
  }
}

template <typename scalar_t, bool transposed>
__global__ void av_kernel(const scalar_t* __restrict__ band, const scalar_t* __restrict__ x,
                          scalar_t* __restrict__ out, int64_t numel, int64_t s, int64_t d, int64_t w) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t width = 2 * w + 1;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; index < numel;
       index += stride) {
    const int64_t row = index / d;
    const int64_t c = index - row * d;
    const int64_t t = row % s;
    const int64_t first = row - t;
    // partner p = t + j - w (plain) or t + w - j (transposed) must lie in [0, s)
    const int64_t lo = transposed ? larger(int64_t{0}, t + w - s + 1) : larger(int64_t{0}, w - t);
    const int64_t hi = transposed ? smaller(width, t + w + 1) : smaller(width, s + w - t);
    acc_t acc = 0;
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t partner = transposed ? t + w - j : t + j - w;
      const acc_t weight = static_cast<acc_t>(band[(transposed ? first + partner : row) * width + j]);
      acc += weight * static_cast<acc_t>(x[(first + partner) * d + c]);
    }
    out[index] = static_cast<scalar_t>(acc);
  }
}

}  // namespace

at::Tensor window_qk_cuda(const at::Tensor& a, const at::Tensor& b, int64_t window) {
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t n = a.size(0), s = a.size(1), d = a.size(2);
  at::Tensor band = at::empty({n, s, 2 * window + 1}, a.options());
  const int64_t entries = band.numel();
  if (entries == 0) return band;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "window_qk_cuda", [&] {
    qk_kernel<scalar_t><<<blocks_for(entries * kWarp), kThreads, 0, stream>>>(
        a.const_data_ptr<scalar_t>(), b.const_data_ptr<scalar_t>(), band.mutable_data_ptr<scalar_t>(),
        entries, s, d, window);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return band;
}

at::Tensor window_av_cuda(const at::Tensor& band, const at::Tensor& x, int64_t window, bool transposed) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t n = x.size(0), s = x.size(1), d = x.size(2);
  at::Tensor out = at::empty({n, s, d}, x.options());
  const int64_t numel = out.numel();
  if (numel == 0) return out;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const int64_t blocks = blocks_for(numel);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "window_av_cuda", [&] {
    const scalar_t* band_ptr = band.const_data_ptr<scalar_t>();
    const scalar_t* x_ptr = x.const_data_ptr<scalar_t>();
    scalar_t* out_ptr = out.mutable_data_ptr<scalar_t>();
    if (transposed) {
      av_kernel<scalar_t, true><<<blocks, kThreads, 0, stream>>>(band_ptr, x_ptr, out_ptr, numel, s, d, window);
    } else {
      av_kernel<scalar_t, false><<<blocks, kThreads, 0, stream>>>(band_ptr, x_ptr, out_ptr, numel, s, d, window);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace window_attention
