// Two inference kernels of the fused bf16 evaluation encoder (rerank_scaling.compute.fused_encoder).
//
// Dense attention of short sequences, inference only, on the packed output of one query-key-value GEMM:
// the bf16 evaluation forward of rerank_scaling.compute.fused_encoder (a cross-encoder's pairs are a
// few dozen tokens long). Per (sequence, head): softmax(q k^T * scale + key mask) v (Vaswani et al.
// 2017, eq. 1), the scores held in registers, fp32 accumulation, the output rounded once to bf16.
//
// At 48 tokens and 32 dimensions per head PyTorch's CPU flash-attention kernel spends most of its
// time around its blocked GEMMs (benchmarks/results/fused_encoder_amx.md); here 4 query rows at a time
// keep every key's score and every output feature in vector registers, and the output is written in
// the (B, L, H, D) layout the next GEMM reads, without a transpose.
#pragma once

#include <ATen/core/Tensor.h>

namespace window_attention {

// The longest sequence (keys) and the head sizes the kernel is compiled for.
constexpr int64_t kPackedMaxLength = 128;

// qkv: (B, L, 3, H, D) bf16, contiguous (the GEMM's (B * L, 3 * H * D) output viewed so); keep:
// (B, L) bool, the keys each sequence attends to (its padding mask); -> (B, L, H, D) bf16.
at::Tensor packed_attention_cpu(const at::Tensor& qkv, const at::Tensor& keep, double scale);

// The widest row the layer norm is compiled for (a multiple of 16).
constexpr int64_t kRowNormMaxWidth = 2048;

// Layer norm (Ba et al. 2016) of each row of x (N, W) bf16, contiguous, W a multiple of 16: mean and
// variance in fp32 (two passes over the row held in fp32), y = (x - mean) / sqrt(var + eps) * weight
// + bias with weight, bias (W) fp32, rounded once to bf16 -- what PyTorch's CPU layer norm computes
// for bf16 input, without its per-element overhead at the fused encoder's widths (384, 768).
at::Tensor row_layer_norm_cpu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps);

}  // namespace window_attention
