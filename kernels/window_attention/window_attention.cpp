// Operator registration and device dispatch for the banded products of windowed attention.
//
// Schema (namespace torch.ops.window_attention), w = window, W = 2w + 1:
//   window_qk(a, b, w)                       (..., s, d) x (..., s, d) -> (..., s, W)
//   window_qk_backward(grad, a, b, w)        -> (grad_a, grad_b)
//   window_av(band, b, w)                    (..., s, W) x (..., s, d) -> (..., s, d)
//   window_av_backward(grad, band, b, w)     -> (grad_band, grad_b)
//   fused_attention(q, k, v, roles, G, w, scale, dropout, seed)  -> (out, logsumexp)
//   fused_attention_backward(grad, q, k, v, out, lse, roles, G, w, scale, dropout, seed)
//                                                                -> (grad_q, grad_k, grad_v)
//   packed_attention(qkv, keep, scale)       (B, L, 3, H, D) bf16, (B, L) bool -> (B, L, H, D)
//   row_layer_norm(x, weight, bias, eps)     (N, W) bf16, (W) fp32 x 2 -> (N, W) bf16
// The fused op (fused_attention.h) is CPU-only: on CUDA the Python side uses the banded products.
// packed_attention and row_layer_norm (packed_attention.h) are the inference-only CPU kernels of the
// fused bf16 evaluation encoder (rerank_scaling.compute.fused_encoder), short sequences only.
// Shape checks live here once; cpu/ and cuda/ implement two primitives with the same signature
// (window_qk_<dev>, window_av_<dev>); both backward passes are compositions of them.
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "fused_attention.h"
#include "packed_attention.h"
#include "window_matmul.h"

namespace window_attention {
namespace {

at::Tensor rows(const at::Tensor& t) {
  return t.reshape({-1, t.size(-2), t.size(-1)}).contiguous();
}

void check_window(int64_t window) {
  TORCH_CHECK(window >= 0, "window must be >= 0, got ", window);
}

// x: (..., s, k), y: (..., s, l) with identical leading dims, dtype and device.
void check_rows(const at::Tensor& x, const at::Tensor& y, const char* op) {
  TORCH_CHECK(x.dim() >= 2 && y.dim() >= 2, op, ": expected (..., s, k) tensors, got ", x.sizes(),
              " and ", y.sizes());
  TORCH_CHECK(x.sizes().slice(0, x.dim() - 1) == y.sizes().slice(0, y.dim() - 1), op,
              ": leading dimensions differ: ", x.sizes(), " vs ", y.sizes());
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), op, ": dtypes differ: ", x.scalar_type(), " vs ",
              y.scalar_type());
  TORCH_CHECK(at::isFloatingType(x.scalar_type()), op, ": expected a floating dtype, got ",
              x.scalar_type());
  TORCH_CHECK(x.device() == y.device(), op, ": devices differ: ", x.device(), " vs ", y.device());
}

void check_band(const at::Tensor& band, int64_t window, const char* op) {
  TORCH_CHECK(band.size(-1) == 2 * window + 1, op, ": band has ", band.size(-1),
              " columns, expected 2 * window + 1 = ", 2 * window + 1);
}

at::Tensor qk_rows(const at::Tensor& a, const at::Tensor& b, int64_t window) {
  if (a.is_cuda()) {
#ifdef WITH_CUDA
    return window_qk_cuda(a, b, window);
#else
    TORCH_CHECK(false, "window_attention was built without CUDA support");
#endif
  }
  return window_qk_cpu(a, b, window);
}

at::Tensor av_rows(const at::Tensor& band, const at::Tensor& x, int64_t window, bool transposed) {
  if (band.is_cuda()) {
#ifdef WITH_CUDA
    return window_av_cuda(band, x, window, transposed);
#else
    TORCH_CHECK(false, "window_attention was built without CUDA support");
#endif
  }
  return window_av_cpu(band, x, window, transposed);
}

std::vector<int64_t> band_shape(const at::Tensor& a, int64_t window) {
  auto shape = a.sizes().vec();
  shape.back() = 2 * window + 1;
  return shape;
}

at::Tensor window_qk(const at::Tensor& a, const at::Tensor& b, int64_t window) {
  check_window(window);
  check_rows(a, b, "window_qk");
  TORCH_CHECK(a.sizes() == b.sizes(), "window_qk: shapes differ: ", a.sizes(), " vs ", b.sizes());
  return qk_rows(rows(a), rows(b), window).view(band_shape(a, window));
}

std::tuple<at::Tensor, at::Tensor> window_qk_backward(const at::Tensor& grad, const at::Tensor& a,
                                                      const at::Tensor& b, int64_t window) {
  check_window(window);
  check_rows(grad, a, "window_qk_backward");
  check_rows(a, b, "window_qk_backward");
  check_band(grad, window, "window_qk_backward");
  const auto g = rows(grad);
  // grad_a[i] = sum_j g[i, j] b[i + j - w];  grad_b[t] = sum_j g[t + w - j, j] a[t + w - j]
  return {av_rows(g, rows(b), window, false).view(a.sizes()),
          av_rows(g, rows(a), window, true).view(b.sizes())};
}

at::Tensor window_av(const at::Tensor& band, const at::Tensor& b, int64_t window) {
  check_window(window);
  check_rows(band, b, "window_av");
  check_band(band, window, "window_av");
  return av_rows(rows(band), rows(b), window, false).view(b.sizes());
}

std::tuple<at::Tensor, at::Tensor> window_av_backward(const at::Tensor& grad, const at::Tensor& band,
                                                      const at::Tensor& b, int64_t window) {
  check_window(window);
  check_rows(band, b, "window_av_backward");
  check_rows(grad, b, "window_av_backward");
  check_band(band, window, "window_av_backward");
  const auto g = rows(grad);
  // grad_band[i, j] = g[i] . b[i + j - w];  grad_b[t] = sum_j band[t + w - j, j] g[t + w - j]
  return {qk_rows(g, rows(b), window).view(band.sizes()),
          av_rows(rows(band), g, window, true).view(b.sizes())};
}

// q, k, v: (B, H, s, d), unit stride over d; roles: (B, s) uint8.
void check_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& roles,
                 int64_t global_keys, int64_t window) {
  check_window(window);
  TORCH_CHECK(q.dim() == 4, "fused_attention: expected (B, H, s, d) tensors, got ", q.sizes());
  for (const at::Tensor* t : {&k, &v}) {
    TORCH_CHECK(t->sizes() == q.sizes(), "fused_attention: shapes differ: ", q.sizes(), " vs ", t->sizes());
    TORCH_CHECK(t->scalar_type() == q.scalar_type(), "fused_attention: dtypes differ: ", q.scalar_type(),
                " vs ", t->scalar_type());
  }
  for (const at::Tensor* t : {&q, &k, &v}) {
    TORCH_CHECK(t->stride(3) == 1, "fused_attention: the feature dimension must have stride 1, got ",
                t->strides());
  }
  TORCH_CHECK(roles.scalar_type() == at::kByte && roles.dim() == 2 && roles.size(0) == q.size(0) &&
                  roles.size(1) == q.size(2) && roles.is_contiguous(),
              "fused_attention: roles must be a contiguous (B, s) uint8 tensor, got ", roles.sizes(), " ",
              roles.scalar_type());
  TORCH_CHECK(global_keys >= 1 && global_keys <= q.size(2), "fused_attention: global_keys must lie in [1, s], got ",
              global_keys);
}

std::tuple<at::Tensor, at::Tensor> fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   const at::Tensor& roles, int64_t global_keys, int64_t window,
                                                   double scale, double dropout, int64_t seed) {
  check_fused(q, k, v, roles, global_keys, window);
  TORCH_CHECK(dropout >= 0 && dropout < 1, "fused_attention: dropout must lie in [0, 1), got ", dropout);
  return fused_attention_forward_cpu(q, k, v, roles, global_keys, window, scale, dropout, seed);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& roles, int64_t global_keys, int64_t window, double scale,
    double dropout, int64_t seed) {
  check_fused(q, k, v, roles, global_keys, window);
  check_fused(grad, out, out, roles, global_keys, window);
  TORCH_CHECK(logsumexp.is_contiguous() && logsumexp.numel() == q.size(0) * q.size(1) * q.size(2),
              "fused_attention_backward: logsumexp must be a contiguous (B, H, s) tensor");
  return fused_attention_backward_cpu(grad, q, k, v, out, logsumexp, roles, global_keys, window, scale, dropout,
                                      seed);
}

at::Tensor packed_attention(const at::Tensor& qkv, const at::Tensor& keep, double scale) {
  TORCH_CHECK(qkv.dim() == 5 && qkv.size(2) == 3, "packed_attention: qkv must be (B, L, 3, H, D), got ",
              qkv.sizes());
  TORCH_CHECK(qkv.scalar_type() == at::kBFloat16 && qkv.is_contiguous(),
              "packed_attention: qkv must be a contiguous bfloat16 tensor");
  TORCH_CHECK(qkv.size(1) <= kPackedMaxLength, "packed_attention: at most ", kPackedMaxLength,
              " tokens, got ", qkv.size(1));
  TORCH_CHECK(qkv.size(4) == 32 || qkv.size(4) == 64, "packed_attention: heads of 32 or 64 dimensions, got ",
              qkv.size(4));
  TORCH_CHECK(keep.scalar_type() == at::kBool && keep.is_contiguous() && keep.dim() == 2 &&
                  keep.size(0) == qkv.size(0) && keep.size(1) == qkv.size(1),
              "packed_attention: keep must be a contiguous (B, L) bool tensor");
  return packed_attention_cpu(qkv, keep, scale);
}

at::Tensor row_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kBFloat16 && x.is_contiguous(),
              "row_layer_norm: x must be a contiguous (N, W) bfloat16 tensor");
  TORCH_CHECK(x.size(1) % 16 == 0 && x.size(1) <= kRowNormMaxWidth, "row_layer_norm: W must be a multiple of 16, at most ",
              kRowNormMaxWidth, ", got ", x.size(1));
  for (const auto* t : {&weight, &bias})
    TORCH_CHECK(t->dim() == 1 && t->size(0) == x.size(1) && t->scalar_type() == at::kFloat && t->is_contiguous(),
                "row_layer_norm: weight and bias must be contiguous float32 tensors of W elements");
  return row_layer_norm_cpu(x, weight, bias, eps);
}

}  // namespace
}  // namespace window_attention

TORCH_LIBRARY(window_attention, m) {
  m.def("window_qk(Tensor a, Tensor b, int window) -> Tensor");
  m.def("window_qk_backward(Tensor grad, Tensor a, Tensor b, int window) -> (Tensor, Tensor)");
  m.def("window_av(Tensor band, Tensor b, int window) -> Tensor");
  m.def("window_av_backward(Tensor grad, Tensor band, Tensor b, int window) -> (Tensor, Tensor)");
  m.def("fused_attention(Tensor q, Tensor k, Tensor v, Tensor roles, int global_keys, int window, float scale, "
        "float dropout, int seed) -> (Tensor, Tensor)");
  m.def("fused_attention_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, Tensor logsumexp, "
        "Tensor roles, int global_keys, int window, float scale, float dropout, int seed) -> (Tensor, Tensor, Tensor)");
  m.def("packed_attention(Tensor qkv, Tensor keep, float scale) -> Tensor");
  m.def("row_layer_norm(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor");
}

TORCH_LIBRARY_IMPL(window_attention, CPU, m) {
  m.impl("window_qk", &window_attention::window_qk);
  m.impl("window_qk_backward", &window_attention::window_qk_backward);
  m.impl("window_av", &window_attention::window_av);
  m.impl("window_av_backward", &window_attention::window_av_backward);
  m.impl("fused_attention", &window_attention::fused_attention);
  m.impl("fused_attention_backward", &window_attention::fused_attention_backward);
  m.impl("packed_attention", &window_attention::packed_attention);
  m.impl("row_layer_norm", &window_attention::row_layer_norm);
}

#ifdef WITH_CUDA
TORCH_LIBRARY_IMPL(window_attention, CUDA, m) {
  m.impl("window_qk", &window_attention::window_qk);
  m.impl("window_qk_backward", &window_attention::window_qk_backward);
  m.impl("window_av", &window_attention::window_av);
  m.impl("window_av_backward", &window_attention::window_av_backward);
}
#endif
