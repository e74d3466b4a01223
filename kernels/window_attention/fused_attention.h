// Fused windowed attention (Schlatt et al., Sparse Attention on Cross-Encoders, eqs. 1-3) in one pass per row tile: scores over each
// row's allowed keys, an online (streaming max / sum) softmax and the weighted sum, FlashAttention
// style (Dao et al. 2022, Alg. 1; backward Alg. 2 / FlashAttention-2 Alg. 2). Neither the
// (..., s, G + 2w + 1) scores nor the probabilities are stored: the forward saves the output and one
// log-sum-exp per row, and the backward recomputes the probabilities from them.
//
// Key roles, one uint8 per token of each sequence (B, s), OR-ed bits:
//   kQueryKey  the token belongs to the query segment ([CLS] query [SEP]); such keys lie in [0, G)
//   kDocument  a document token (not padding)
//   kDenseKey  a key the dense rows see (every non-padding token)
//   kDenseRow  the row attends to every kDenseKey key ([CLS]; the query too with query_sees_document)
// A sparse row i sees key t when t < G and t is a query key, or when both i and t are document
// tokens and |i - t| <= w. q, k, v: (B, H, s, d) with unit stride over d (any other strides).
// dropout: probability of dropping an attention probability (0: none); the mask is a hash of
// (seed, sequence, row, key), regenerated in the backward.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace window_attention {

constexpr uint8_t kQueryKey = 1;
constexpr uint8_t kDocument = 2;
constexpr uint8_t kDenseKey = 4;
constexpr uint8_t kDenseRow = 8;

// -> (out (B, H, s, d), a view of (B, s, H, d) memory; logsumexp (B, H, s), float32)
std::tuple<at::Tensor, at::Tensor> fused_attention_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v, const at::Tensor& roles,
                                                              int64_t global_keys, int64_t window,
                                                              double scale, double dropout, int64_t seed);

// -> (grad_q, grad_k, grad_v), each (B, H, s, d)
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_attention_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& roles, int64_t global_keys,
    int64_t window, double scale, double dropout, int64_t seed);

}  // namespace window_attention
