// What the CPU kernels share: 64-byte vectors and the exponential their softmaxes use.
//
// Vectors are GCC/Clang vector extensions of 64 bytes (16 floats or 8 doubles): AVX-512 registers
// where the CPU has them (the extension is compiled with -march=native), split into narrower ones
// elsewhere. Accumulators are held in such vectors, several independent ones per loop, so loops
// run at fused multiply-add throughput rather than latency.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace window_attention {

template <typename T>
struct VecOf;  // spelled out per type: GCC drops vector_size on a dependent alias template
template <>
struct VecOf<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct VecOf<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <>
struct VecOf<int32_t> {
  typedef int32_t type __attribute__((vector_size(64)));
};
template <typename T>
using vec_t = typename VecOf<T>::type;
template <typename T>
constexpr int64_t kLanes = 64 / sizeof(T);

template <typename T>
inline vec_t<T> load_vec(const T* p) {
  vec_t<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
inline void store_vec(T* p, const vec_t<T>& v) {
  std::memcpy(p, &v, sizeof(v));
}

// 2^n for an integral-valued n in the float exponent's range.
inline float exp2_integer(float n) { return std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23); }

inline vec_t<float> exp2_integer(vec_t<float> n) {
  return std::bit_cast<vec_t<float>>((__builtin_convertvector(n, vec_t<int32_t>) + 127) << 23);
}

// Cephes-style exp: e^x = 2^n e^r with |r| <= ln(2)/2 and a degree-6 polynomial (~1 ulp in
// float32). No table and no branch, so loops over it vectorise (libm's expf does not); T is float
// or vec_t<float> (the same operations lane by lane).
template <typename T>
inline T exp_approx(T x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const T n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest (1.5 * 2^23)
  T r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  T y = r * 1.9875691500e-4f + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  return y * exp2_integer(n);
}

inline double exp_approx(double x) { return std::exp(x); }  // float64: gradchecks, exactness first

}  // namespace window_attention
