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

}  // namespace window_attention
