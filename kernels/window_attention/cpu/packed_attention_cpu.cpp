// CPU dense attention of short sequences on packed query-key-value rows (see ../packed_attention.h).
//
// One task per (sequence, head). Its keys are converted to fp32 and transposed once into a (D, P)
// buffer (P: the length rounded up to 16 lanes; the extra keys are masked), its values into (P, D).
// Then 4 query rows at a time: their scores against all keys accumulate in 4 x P/16 vector
// registers over the D features, each row's softmax is taken in registers (a Cephes-style exp, the
// masked keys multiplied by 0), and the weighted sum of the values accumulates in 4 x D/16 registers.
// Independent accumulators keep the fused multiply-adds at throughput rather than at latency (the
// first version, one row at a time, was latency-bound and slower than PyTorch's kernel).
// Vectors are GCC/Clang vector extensions of 64 bytes: AVX-512 registers where the CPU has them
// (the extension is compiled with -march=native), split into narrower ones elsewhere.
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../packed_attention.h"

namespace window_attention {
namespace {

typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
constexpr int64_t kLanes = 16;
constexpr int kRows = 4;  // query rows per register tile

inline f32x16 load(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(float* p, f32x16 v) { std::memcpy(p, &v, sizeof v); }

inline float bf16_to_float(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// 16 floats to bf16, rounded to nearest even (as c10::BFloat16 rounds a finite float).
inline void store_bf16(uint16_t* dst, f32x16 value) {
  u32x16 bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const u16x16 narrow = __builtin_convertvector(bits, u16x16);
  std::memcpy(dst, &narrow, sizeof narrow);
}

// e^x on 16 lanes: 2^n e^r with |r| <= ln(2)/2 and a degree-6 polynomial, ~1 ulp in float32 (the
// exp_approx of fused_attention_cpu.cpp, lane-wise).
inline f32x16 exp16(f32x16 x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const f32x16 n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  f32x16 r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  f32x16 y = r * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  const i32x16 exponent = (__builtin_convertvector(n, i32x16) + 127) << 23;
  f32x16 scale;
  std::memcpy(&scale, &exponent, sizeof scale);
  return y * scale;
}

inline float lane_max(f32x16 v) {
  float m = v[0];
  for (int l = 1; l < kLanes; ++l) m = std::max(m, v[l]);
  return m;
}

inline float lane_sum(f32x16 v) {
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

// One (sequence, head). q, k, v: its first token's bf16 rows, `stride` elements from one token to the
// next; keep: the sequence's key mask; out: its first token's output row, `out_stride` apart.
template <int NB, int D>
void attend(const uint16_t* q, const uint16_t* k, const uint16_t* v, int64_t stride, const bool* keep,
            int64_t length, float scale, uint16_t* out, int64_t out_stride) {
  constexpr int64_t P = NB * kLanes;
  constexpr int DV = D / kLanes;
  alignas(64) float keys_t[D * P];
  alignas(64) float values[P * D];
  alignas(64) float bias[P];
  alignas(64) float on[P];
  for (int64_t j = 0; j < P; ++j) {
    const bool attended = j < length && keep[j];
    bias[j] = attended ? 0.0f : -1e30f;
    on[j] = attended ? 1.0f : 0.0f;
  }
  for (int64_t j = 0; j < length; ++j) {
    alignas(64) float key[D];
    for (int t = 0; t < D; ++t) key[t] = bf16_to_float(k[j * stride + t]);
    for (int t = 0; t < D; ++t) keys_t[t * P + j] = key[t];
    for (int t = 0; t < D; ++t) values[j * D + t] = bf16_to_float(v[j * stride + t]);
  }
  for (int64_t j = length; j < P; ++j) {
    for (int t = 0; t < D; ++t) keys_t[t * P + j] = 0.0f;
    for (int t = 0; t < D; ++t) values[j * D + t] = 0.0f;
  }
  alignas(64) float query[kRows][D];
  alignas(64) float weights[kRows][P];
  for (int64_t i0 = 0; i0 < length; i0 += kRows) {
    const int rows = int(std::min<int64_t>(kRows, length - i0));
    for (int r = 0; r < kRows; ++r) {  // a tile past the last row repeats it (its output is not stored)
      const uint16_t* row = q + (i0 + std::min(r, rows - 1)) * stride;
      for (int t = 0; t < D; ++t) query[r][t] = bf16_to_float(row[t]) * scale;
    }
    f32x16 score[kRows][NB];
    for (int r = 0; r < kRows; ++r)
      for (int b = 0; b < NB; ++b) score[r][b] = load(bias + b * kLanes);
    for (int t = 0; t < D; ++t) {
      f32x16 key[NB];
      for (int b = 0; b < NB; ++b) key[b] = load(keys_t + t * P + b * kLanes);
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
        const f32x16 e = exp16(score[r][b] - m) * load(on + b * kLanes);
        total += e;
        store(weights[r] + b * kLanes, e);
      }
      const float sum = lane_sum(total);
      inverse[r] = sum > 0.0f ? 1.0f / sum : 0.0f;  // no key at all: a zero output, not NaN
    }
    f32x16 acc[kRows][DV] = {};
    for (int64_t j = 0; j < length; ++j) {
      f32x16 value[DV];
      for (int c = 0; c < DV; ++c) value[c] = load(values + j * D + c * kLanes);
      for (int r = 0; r < kRows; ++r) {
        const float w = weights[r][j];
        for (int c = 0; c < DV; ++c) acc[r][c] += w * value[c];
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < DV; ++c) store_bf16(out + (i0 + r) * out_stride + c * kLanes, acc[r][c] * inverse[r]);
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

}  // namespace

at::Tensor packed_attention_cpu(const at::Tensor& qkv, const at::Tensor& keep, double scale) {
  const int64_t batch = qkv.size(0), length = qkv.size(1), heads = qkv.size(3), dims = qkv.size(4);
  auto out = at::empty({batch, length, heads, dims}, qkv.options());
  const auto* packed = reinterpret_cast<const uint16_t*>(qkv.const_data_ptr<at::BFloat16>());
  auto* written = reinterpret_cast<uint16_t*>(out.mutable_data_ptr<at::BFloat16>());
  const bool* mask = keep.const_data_ptr<bool>();
  const int64_t stride = 3 * heads * dims, blocks = (length + kLanes - 1) / kLanes;
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
