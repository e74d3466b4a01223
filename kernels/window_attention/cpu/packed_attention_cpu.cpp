// CPU kernels of the fused bf16 evaluation encoder (see ../packed_attention.h): dense attention of
// short sequences on packed query-key-value rows, and a row-wise layer norm.
//
// One task per (sequence, head). Its keys are converted to fp32 and transposed once into a (D, P)
// buffer (P: the length rounded up to 16 lanes; the extra keys are masked), its values into (P, D).
// Then 4 query rows at a time: their scores against all keys accumulate in 4 x P/16 vector
// registers over the D features, each row's softmax is taken in registers (a Cephes-style exp, the
// masked keys multiplied by 0), and the weighted sum of the values accumulates in 4 x D/16 registers.
// Independent accumulators keep the fused multiply-adds at throughput rather than at latency (the
// first version, one row at a time, was latency-bound and slower than PyTorch's kernel).
// Vectors and the exponential: vector_math.h, shared with the windowed kernel.
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "../packed_attention.h"
#include "vector_math.h"

namespace window_attention {
namespace {

using f32x16 = vec_t<float>;
using i32x16 = vec_t<int32_t>;
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
constexpr int64_t kFloatLanes = kLanes<float>;  // 16
constexpr int kRows = 4;  // query rows per register tile

// 16 bf16 values (bits) as floats: widened and shifted into the high half.
inline f32x16 load_bf16(const uint16_t* p) {
  u16x16 narrow;
  std::memcpy(&narrow, p, sizeof narrow);
  const u32x16 wide = __builtin_convertvector(narrow, u32x16) << 16;
  f32x16 value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// One step of a 16 x 16 transpose by halving blocks (B = 8, 4, 2, 1): rows a and a + B exchange
// the B-lane blocks that lie across the diagonal.
template <int B, std::size_t... L>
inline void exchange_blocks(f32x16& a, f32x16& c, std::index_sequence<L...>) {
#if defined(__clang__)
  const f32x16 low = __builtin_shufflevector(a, c, ((L & B) ? 16 + L - B : L)...);
  const f32x16 high = __builtin_shufflevector(a, c, ((L & B) ? 16 + L : L + B)...);
#else
  const f32x16 low = __builtin_shuffle(a, c, i32x16{int((L & B) ? 16 + L - B : L)...});
  const f32x16 high = __builtin_shuffle(a, c, i32x16{int((L & B) ? 16 + L : L + B)...});
#endif
  a = low;
  c = high;
}

template <int B>
inline void transpose_step(f32x16 (&rows)[kFloatLanes]) {
  for (int a = 0; a < kFloatLanes; ++a)
    if (!(a & B)) exchange_blocks<B>(rows[a], rows[a + B], std::make_index_sequence<kFloatLanes>{});
}

// rows[i][l] -> rows[l][i]
inline void transpose16(f32x16 (&rows)[kFloatLanes]) {
  transpose_step<8>(rows);
  transpose_step<4>(rows);
  transpose_step<2>(rows);
  transpose_step<1>(rows);
}

// Lane l + S of v folded onto lane l by op, for S = 8, 4, 2, 1: lane 0 ends up with op over all.
template <int S, std::size_t... L>
inline f32x16 rotate(f32x16 v, std::index_sequence<L...>) {
#if defined(__clang__)
  return __builtin_shufflevector(v, v, ((L + S) % 16)...);
#else
  return __builtin_shuffle(v, i32x16{int((L + S) % 16)...});
#endif
}

inline float lane_sum(f32x16 v) {
  constexpr auto lanes = std::make_index_sequence<kFloatLanes>{};
  v += rotate<8>(v, lanes);
  v += rotate<4>(v, lanes);
  v += rotate<2>(v, lanes);
  v += rotate<1>(v, lanes);
  return v[0];
}

inline f32x16 lane_max_step(f32x16 a, f32x16 b) { return a > b ? a : b; }

inline float lane_max(f32x16 v) {
  constexpr auto lanes = std::make_index_sequence<kFloatLanes>{};
  v = lane_max_step(v, rotate<8>(v, lanes));
  v = lane_max_step(v, rotate<4>(v, lanes));
  v = lane_max_step(v, rotate<2>(v, lanes));
  v = lane_max_step(v, rotate<1>(v, lanes));
  return v[0];
}

// 16 floats to bf16, rounded to nearest even (as c10::BFloat16 rounds a finite float).
inline void store_bf16(uint16_t* dst, f32x16 value) {
  u32x16 bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const u16x16 narrow = __builtin_convertvector(bits, u16x16);
  std::memcpy(dst, &narrow, sizeof narrow);
}

// One (sequence, head). q, k, v: its first token's bf16 rows, `stride` elements from one token to the
// next; keep: the sequence's key mask; out: its first token's output row, `out_stride` apart.
template <int NB, int D>
void attend(const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t stride, const bool* keep,
            int64_t length, float scale, uint16_t* out, int64_t out_stride) {
  constexpr int64_t P = NB * kFloatLanes;
  constexpr int DV = D / kFloatLanes;
  alignas(64) float keys_t[D * P];
  alignas(64) float values[P * D];
  alignas(64) float bias[P];
  alignas(64) float on[P];
  for (int64_t j = 0; j < P; ++j) {
    const bool attended = j < length && keep[j];
    bias[j] = attended ? 0.0f : -1e30f;
    on[j] = attended ? 1.0f : 0.0f;
  }
  // keys: 16 x 16 blocks converted, transposed in registers and stored as (D, P); values: rows
  for (int64_t j0 = 0; j0 < P; j0 += kFloatLanes) {
    for (int t0 = 0; t0 < D; t0 += kFloatLanes) {
      f32x16 block[kFloatLanes];
      for (int r = 0; r < kFloatLanes; ++r) block[r] = j0 + r < length ? load_bf16(k + (j0 + r) * stride + t0) : f32x16{};
      transpose16(block);
      for (int t = 0; t < kFloatLanes; ++t) store_vec(keys_t + (t0 + t) * P + j0, block[t]);
    }
    for (int64_t j = j0; j < j0 + kFloatLanes; ++j)
      for (int t0 = 0; t0 < D; t0 += kFloatLanes)
        store_vec(values + j * D + t0, j < length ? load_bf16(v + j * stride + t0) : f32x16{});
  }
  alignas(64) float query[kRows][D];
  alignas(64) float weights[kRows][P];
  for (int64_t i0 = 0; i0 < length; i0 += kRows) {
    const int rows = int(std::min<int64_t>(kRows, length - i0));
    for (int r = 0; r < kRows; ++r) {  // a tile past the last row repeats it (its output is not stored)
      const uint16_t* row = q + (i0 + std::min(r, rows - 1)) * stride;
      for (int t0 = 0; t0 < D; t0 += kFloatLanes) store_vec(query[r] + t0, load_bf16(row + t0) * scale);
    }
    f32x16 score[kRows][NB];
    for (int r = 0; r < kRows; ++r)
      for (int b = 0; b < NB; ++b) score[r][b] = load_vec(bias + b * kFloatLanes);
    for (int t = 0; t < D; ++t) {
      f32x16 key[NB];
      for (int b = 0; b < NB; ++b) key[b] = load_vec(keys_t + t * P + b * kFloatLanes);
      for (int r = 0; r < kRows; ++r) {
        const float x = query[r][t];
        for (int b = 0; b < NB; ++b) score[r][b] += x * key[b];
      }
    }
    float inverse[kRows];
    for (int r = 0; r < kRows; ++r) {
      f32x16 top = score[r][0];
      for (int b = 1; b < NB; ++b) top = top > score[r][b] ? top : score[r][b];
      const float m = lane_max(top);
      f32x16 total = {};
      for (int b = 0; b < NB; ++b) {
        const f32x16 e = exp_approx(score[r][b] - m) * load_vec(on + b * kFloatLanes);
        total += e;
        store_vec(weights[r] + b * kFloatLanes, e);
      }
      const float sum = lane_sum(total);
      inverse[r] = sum > 0.0f ? 1.0f / sum : 0.0f;  // no key at all: a zero output, not NaN
    }
    f32x16 acc[kRows][DV] = {};
    for (int64_t j = 0; j < length; ++j) {
      f32x16 value[DV];
      for (int c = 0; c < DV; ++c) value[c] = load_vec(values + j * D + c * kFloatLanes);
      for (int r = 0; r < kRows; ++r) {
        const float w = weights[r][j];
        for (int c = 0; c < DV; ++c) acc[r][c] += w * value[c];
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < DV; ++c) store_bf16(out + (i0 + r) * out_stride + c * kFloatLanes, acc[r][c] * inverse[r]);
  }
}

template <int D>
void attend_blocks(int64_t blocks, const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t stride,
                   const bool* keep, int64_t length, float scale, uint16_t* out, int64_t out_stride) {
  switch (blocks) {
    case 1: return attend<1, D>(q, k, v, stride, keep, length, scale, out, out_stride);
    case 2: return attend<2, D>(q, k, v, stride, keep, length, scale, out, out_stride);
    case 3: return attend<3, D>(q, k, v, stride, keep, length, scale, out, out_stride);
    case 4: return attend<4, D>(q, k, v, stride, keep, length, scale, out, out_stride);
    case 5: return attend<5, D>(q, k, v, stride, keep, length, scale, out, out_stride);
    case 6: return attend<6, D>(q, k, v, stride, keep, length, scale, out, out_stride);
    case 7: return attend<7, D>(q, k, v, stride, keep, length, scale, out, out_stride);
    default: return attend<8, D>(q, k, v, stride, keep, length, scale, out, out_stride);
  }
}

// One row: x (W bf16) -> out, weight and bias fp32. Sums run in 4 independent accumulators (W is a
// multiple of 16, not always of 64: the last blocks go to the first accumulators).
void normalize_row(const uint16_t* x, const float* weight, const float* bias, int64_t width, float eps,
                   uint16_t* out) {
  alignas(64) float row[kRowNormMaxWidth];
  const int64_t blocks = width / kFloatLanes;
  f32x16 total[4] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const f32x16 value = load_bf16(x + b * kFloatLanes);
    store_vec(row + b * kFloatLanes, value);
    total[b % 4] += value;
  }
  const float mean = lane_sum((total[0] + total[1]) + (total[2] + total[3])) / float(width);
  f32x16 squares[4] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const f32x16 centred = load_vec(row + b * kFloatLanes) - mean;
    squares[b % 4] += centred * centred;
  }
  const float variance = lane_sum((squares[0] + squares[1]) + (squares[2] + squares[3])) / float(width);
  const float inverse = 1.0f / std::sqrt(variance + eps);
  for (int64_t c = 0; c < width; c += kFloatLanes)
    store_bf16(out + c, (load_vec(row + c) - mean) * inverse * load_vec(weight + c) + load_vec(bias + c));
}

}  // namespace

at::Tensor row_layer_norm_cpu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const int64_t rows = x.size(0), width = x.size(1);
  auto out = at::empty({rows, width}, x.options());
  const auto* in = reinterpret_cast<const uint16_t*>(x.const_data_ptr<at::BFloat16>());
  auto* written = reinterpret_cast<uint16_t*>(out.mutable_data_ptr<at::BFloat16>());
  const float* w = weight.const_data_ptr<float>();
  const float* b = bias.const_data_ptr<float>();
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) normalize_row(in + r * width, w, b, width, float(eps), written + r * width);
  });
  return out;
}

at::Tensor packed_attention_cpu(const at::Tensor& qkv, const at::Tensor& keep, double scale) {
  const int64_t batch = qkv.size(0), length = qkv.size(1), heads = qkv.size(3), dims = qkv.size(4);
  auto out = at::empty({batch, length, heads, dims}, qkv.options());
  const auto* packed = reinterpret_cast<const uint16_t*>(qkv.const_data_ptr<at::BFloat16>());
  auto* written = reinterpret_cast<uint16_t*>(out.mutable_data_ptr<at::BFloat16>());
  const bool* mask = keep.const_data_ptr<bool>();
  const int64_t stride = 3 * heads * dims, blocks = (length + kFloatLanes - 1) / kFloatLanes;
  at::parallel_for(0, batch * heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / heads, h = task % heads;
      const uint16_t* q = packed + b * length * stride + h * dims;
      uint16_t* o = written + (b * length * heads + h) * dims;
      const bool* keys = mask + b * length;
      if (dims == 32)
        attend_blocks<32>(blocks, q, q + heads * dims, q + 2 * heads * dims, stride, keys, length, float(scale), o,
                          heads * dims);
      else
        attend_blocks<64>(blocks, q, q + heads * dims, q + 2 * heads * dims, stride, keys, length, float(scale), o,
                          heads * dims);
    }
  });
  return out;
}

}  // namespace window_attention
