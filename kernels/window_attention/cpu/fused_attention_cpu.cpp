// CPU fused windowed attention (see ../fused_attention.h).
//
// Work is split into tiles of kTileRows consecutive rows of one (batch, head); each tile sweeps its
// keys in chunks of kChunkKeys, three passes (global keys [0, G), the band of the document rows,
// and all keys for the few dense rows), each row visiting only the keys of its own range. A chunk of
// K is transposed once per tile into a (d, chunk) buffer, so the score loop runs over keys and the
// weighted sum over features: both unit-stride, branch-free inner loops the compiler vectorises.
// Accumulation in at::opmath_type (float for float/half/bfloat16, double for double); scratch
// comes from the ATen allocator (one block for all threads), so memory profilers see it.
// Forward: OpenMP over batch x heads x row tiles. Backward: over batch x heads (each task owns the
// key gradients of its sequence, so no atomics), FlashAttention-2 order: recompute p from the saved
// log-sum-exp, dp = dO . v, ds = p (dp - rowsum(dO * O)).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../fused_attention.h"
#include "vector_math.h"

namespace window_attention {
namespace {

constexpr int64_t kTileRows = 64;
constexpr int64_t kChunkKeys = 128;

// Attention dropout (on the probabilities, as in BERT): key t of row i of sequence n is kept
// when a counter-based hash of (seed, n, i, t) clears the drop probability, so the backward
// regenerates the same mask from the seed instead of storing it (FlashAttention does the same
// with Philox).
struct Dropout {
  float probability;  // 0: no dropout
  uint64_t seed;
  // 1 / (1 - p) where (n, i, t) is kept, else 0
  template <typename acc_t>
  acc_t factor(int64_t n, int64_t s, int64_t i, int64_t t) const {
    uint64_t x = seed ^ (static_cast<uint64_t>((n * s + i) * s + t) * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    const float uniform = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);  // 24 bits in [0, 1)
    return uniform >= probability ? acc_t(1) / acc_t(1 - probability) : acc_t(0);
  }
};

enum class Pass { kGlobal, kBand, kDense };

// The key pattern of one sequence.
struct Pattern {
  const uint8_t* roles;  // (s,)
  int64_t s, g, w;

  bool takes(Pass pass, uint8_t role) const {
    const bool dense = role & kDenseRow;
    switch (pass) {
      case Pass::kGlobal:
        return !dense;
      case Pass::kBand:
        return !dense && (role & kDocument);
      default:
        return dense;
    }
  }
  // Keys [first, last) a row of this pass may see (a superset; mask() decides each key).
  int64_t first(Pass pass, int64_t i) const { return pass == Pass::kBand ? std::max(g, i - w) : 0; }
  int64_t last(Pass pass, int64_t i) const {
    return pass == Pass::kGlobal ? std::min(g, s) : pass == Pass::kBand ? std::min(s, i + w + 1) : s;
  }
  // scores[j] for keys t = c0 + j, j in [lo, hi): scale * scores[j] where row i sees t, else masked.
  template <typename acc_t>
  void mask(Pass pass, int64_t i, int64_t c0, int64_t lo, int64_t hi, acc_t scale, acc_t masked,
            acc_t* scores) const {
    const uint8_t* keys = roles + c0;
    if (pass == Pass::kGlobal) {  // query keys; document keys below G near a document row i
      const int64_t near_lo = (roles[i] & kDocument) ? i - w - c0 : hi, near_hi = i + w + 1 - c0;
#pragma omp simd
      for (int64_t j = lo; j < hi; ++j) {
        const bool seen = (keys[j] & kQueryKey) || ((keys[j] & kDocument) && j >= near_lo && j < near_hi);
        scores[j] = seen ? scores[j] * scale : masked;
      }
    } else {  // band: the row range already holds |i - t| <= w and t >= G
      const uint8_t bit = pass == Pass::kBand ? kDocument : kDenseKey;
#pragma omp simd
      for (int64_t j = lo; j < hi; ++j) scores[j] = (keys[j] & bit) ? scores[j] * scale : masked;
    }
  }
};

// For rows [i0, i1): per pass and key chunk, load(c0, c1) once, then visit(pass, i, lo, hi, c0) for
// each row that sees keys in [c0 + lo, c0 + hi).
template <typename Load, typename Visit>
void sweep_tile(const Pattern& pattern, int64_t i0, int64_t i1, const Load& load, const Visit& visit) {
  for (const Pass pass : {Pass::kGlobal, Pass::kBand, Pass::kDense}) {
    int64_t k0 = std::numeric_limits<int64_t>::max(), k1 = 0;
    for (int64_t i = i0; i < i1; ++i) {
      if (pattern.takes(pass, pattern.roles[i])) {
        k0 = std::min(k0, pattern.first(pass, i));
        k1 = std::max(k1, pattern.last(pass, i));
      }
    }
    for (int64_t c0 = k0; c0 < k1; c0 += kChunkKeys) {
      const int64_t c1 = std::min(c0 + kChunkKeys, k1);
      bool loaded = false;
      for (int64_t i = i0; i < i1; ++i) {
        if (!pattern.takes(pass, pattern.roles[i])) continue;
        const int64_t lo = std::max(c0, pattern.first(pass, i)), hi = std::min(c1, pattern.last(pass, i));
        if (lo >= hi) continue;
        if (!loaded) {
          load(c0, c1);
          loaded = true;
        }
        visit(pass, i, lo - c0, hi - c0, c0);
      }
    }
  }
}

// (B, H, s, d) with unit stride over d.
template <typename scalar_t>
struct Rows {
  scalar_t* data;
  int64_t sb, sh, ss, heads;
  Rows(const at::Tensor& t)
      : data(const_cast<scalar_t*>(t.const_data_ptr<scalar_t>())),
        sb(t.stride(0)),
        sh(t.stride(1)),
        ss(t.stride(2)),
        heads(t.size(1)) {}
  scalar_t* row(int64_t n, int64_t i) const { return data + (n / heads) * sb + (n % heads) * sh + i * ss; }
};

// scores[k0 + u] = x . keys[:, k0 + u] for NB blocks of kLanes keys from k0.
template <typename acc_t, int NB>
inline void score_blocks(const acc_t* x, const acc_t* keys_t, acc_t* scores, int64_t k0, int64_t d) {
  constexpr int64_t L = kLanes<acc_t>;
  vec_t<acc_t> block[NB] = {};
  for (int64_t c = 0; c < d; ++c) {
    const acc_t* kc = keys_t + c * kChunkKeys + k0;
    for (int b = 0; b < NB; ++b) block[b] += x[c] * load_vec(kc + b * L);
  }
  for (int b = 0; b < NB; ++b) store_vec(scores + k0 + b * L, block[b]);
}

// scores[k] = x . keys[:, k] for k in [lo, hi) (and a few more around them, never read); keys_t is
// (d, kChunkKeys), zero beyond the chunk.
template <typename acc_t>
void row_scores(const acc_t* x, const acc_t* keys_t, acc_t* scores, int64_t lo, int64_t hi, int64_t d) {
  constexpr int64_t L = kLanes<acc_t>;
  int64_t k0 = lo - lo % L;
  for (; k0 + 3 * L < hi; k0 += 4 * L) score_blocks<acc_t, 4>(x, keys_t, scores, k0, d);
  const int64_t left = (hi - k0 + L - 1) / L;
  if (left == 1) score_blocks<acc_t, 1>(x, keys_t, scores, k0, d);
  if (left == 2) score_blocks<acc_t, 2>(x, keys_t, scores, k0, d);
  if (left == 3) score_blocks<acc_t, 3>(x, keys_t, scores, k0, d);
}

// out[c0 + ...] += sum_k weights[k] * rows[k, c0 + ...] over NB blocks of features; two
// accumulators per block (even and odd k).
template <typename acc_t, int NB>
inline void weighted_blocks(acc_t* out, const acc_t* weights, const acc_t* rows, int64_t lo, int64_t hi,
                            int64_t d, int64_t c0) {
  constexpr int64_t L = kLanes<acc_t>;
  vec_t<acc_t> even[NB] = {}, odd[NB] = {};
  int64_t k = lo;
  for (; k + 1 < hi; k += 2) {
    const acc_t* row = rows + k * d + c0;
    for (int b = 0; b < NB; ++b) {
      even[b] += weights[k] * load_vec(row + b * L);
      odd[b] += weights[k + 1] * load_vec(row + d + b * L);
    }
  }
  if (k < hi) {
    for (int b = 0; b < NB; ++b) even[b] += weights[k] * load_vec(rows + k * d + c0 + b * L);
  }
  for (int b = 0; b < NB; ++b) store_vec(out + c0 + b * L, load_vec(out + c0 + b * L) + even[b] + odd[b]);
}

// out[c] += sum_k weights[k] * rows[k, c] for k in [lo, hi); rows is (kChunkKeys, d).
template <typename acc_t>
void add_weighted_rows(acc_t* out, const acc_t* weights, const acc_t* rows, int64_t lo, int64_t hi, int64_t d) {
  constexpr int64_t L = kLanes<acc_t>;
  int64_t c0 = 0;
  for (; c0 + 2 * L <= d; c0 += 2 * L) weighted_blocks<acc_t, 2>(out, weights, rows, lo, hi, d, c0);
  if (c0 + L <= d) {
    weighted_blocks<acc_t, 1>(out, weights, rows, lo, hi, d, c0);
    c0 += L;
  }
  for (int64_t k = lo; k < hi && c0 < d; ++k) {  // features beyond the last full block
    for (int64_t c = c0; c < d; ++c) out[c] += weights[k] * rows[k * d + c];
  }
}

// Chunk rows [c0, c1) of one sequence -> natural (chunk, d) and/or transposed (d, chunk) buffers.
template <typename scalar_t, typename acc_t>
void load_chunk(const Rows<scalar_t>& x, int64_t n, int64_t c0, int64_t c1, int64_t d, acc_t* natural,
                acc_t* transposed) {
  for (int64_t t = c0; t < c1; ++t) {
    const scalar_t* row = x.row(n, t);
    for (int64_t c = 0; c < d; ++c) {
      const acc_t value = static_cast<acc_t>(row[c]);
      if (natural) natural[(t - c0) * d + c] = value;
      if (transposed) transposed[c * kChunkKeys + (t - c0)] = value;
    }
  }
  if (transposed) {  // the register-blocked score loop reads up to the chunk's end: keep it finite
    for (int64_t c = 0; c < d; ++c) std::fill(transposed + c * kChunkKeys + (c1 - c0), transposed + (c + 1) * kChunkKeys, acc_t(0));
  }
}

template <typename scalar_t>
void forward_kernel(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& roles,
                    at::Tensor& out, at::Tensor& lse, int64_t g, int64_t w, double scale_, const Dropout& dropout) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t heads = q.size(1), s = q.size(2), d = q.size(3);
  const int64_t n_seq = q.size(0) * heads, tiles = (s + kTileRows - 1) / kTileRows;
  const acc_t scale = static_cast<acc_t>(scale_);
  const acc_t minus_inf = -std::numeric_limits<acc_t>::infinity();
  const Rows<scalar_t> Q(q), K(k), V(v), O(out);
  acc_t* lse_ptr = lse.mutable_data_ptr<acc_t>();
  const uint8_t* roles_ptr = roles.const_data_ptr<uint8_t>();
  // per thread: q tile, accumulators, max, sum, K chunk (transposed), V chunk, scores
  const int64_t per_thread = 2 * kTileRows * d + 2 * kTileRows + 2 * kChunkKeys * d + kChunkKeys;
  const int64_t threads = at::get_num_threads();
  at::Tensor scratch = at::empty({threads, per_thread}, q.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  acc_t* scratch_ptr = scratch.mutable_data_ptr<acc_t>();

  at::parallel_for(0, n_seq * tiles, 1, [&](int64_t begin, int64_t end) {
    const int64_t thread = at::get_thread_num();
    TORCH_CHECK(thread < threads, "fused window attention: thread id ", thread, " >= ", threads);
    acc_t* q_tile = scratch_ptr + thread * per_thread;
    acc_t* acc = q_tile + kTileRows * d;
    acc_t* row_max = acc + kTileRows * d;
    acc_t* row_sum = row_max + kTileRows;
    acc_t* keys_t = row_sum + kTileRows;
    acc_t* values = keys_t + kChunkKeys * d;
    acc_t* scores = values + kChunkKeys * d;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / tiles, i0 = (task % tiles) * kTileRows, i1 = std::min(s, i0 + kTileRows);
      const Pattern pattern{roles_ptr + (n / heads) * s, s, g, w};
      for (int64_t i = i0; i < i1; ++i) {
        const scalar_t* row = Q.row(n, i);
        for (int64_t c = 0; c < d; ++c) q_tile[(i - i0) * d + c] = static_cast<acc_t>(row[c]);
      }
      std::fill(acc, acc + kTileRows * d, acc_t(0));
      std::fill(row_max, row_max + kTileRows, minus_inf);
      std::fill(row_sum, row_sum + kTileRows, acc_t(0));
      const auto load = [&](int64_t c0, int64_t c1) {
        load_chunk<scalar_t, acc_t>(K, n, c0, c1, d, nullptr, keys_t);
        load_chunk<scalar_t, acc_t>(V, n, c0, c1, d, values, nullptr);
      };
      const auto visit = [&](Pass pass, int64_t i, int64_t lo, int64_t hi, int64_t c0) {
        const int64_t r = i - i0;
        row_scores(q_tile + r * d, keys_t, scores, lo, hi, d);
        pattern.mask(pass, i, c0, lo, hi, scale, minus_inf, scores);
        acc_t chunk_max = minus_inf;
#pragma omp simd reduction(max : chunk_max)
        for (int64_t j = lo; j < hi; ++j) chunk_max = std::max(chunk_max, scores[j]);
        if (chunk_max == minus_inf) return;
        const acc_t new_max = std::max(row_max[r], chunk_max);
        const acc_t correction = row_max[r] == minus_inf ? acc_t(0) : std::exp(row_max[r] - new_max);
        acc_t sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = lo; j < hi; ++j) {
          const acc_t p = exp_approx(scores[j] - new_max);  // masked: -inf -> 0 (float: < 1e-37)
          scores[j] = p;
          sum += p;
        }
        row_sum[r] = row_sum[r] * correction + sum;
        row_max[r] = new_max;
        if (dropout.probability > 0) {  // the normaliser keeps every key; the weighted sum does not
          for (int64_t j = lo; j < hi; ++j) scores[j] *= dropout.factor<acc_t>(n, s, i, c0 + j);
        }
        acc_t* acc_row = acc + r * d;
        if (correction != acc_t(1)) {
          for (int64_t c = 0; c < d; ++c) acc_row[c] *= correction;
        }
        add_weighted_rows(acc_row, scores, values, lo, hi, d);
      };
      sweep_tile(pattern, i0, i1, load, visit);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r = i - i0;
        const acc_t inverse = acc_t(1) / row_sum[r];
        scalar_t* out_row = O.row(n, i);
        for (int64_t c = 0; c < d; ++c) out_row[c] = static_cast<scalar_t>(acc[r * d + c] * inverse);
        lse_ptr[n * s + i] = row_max[r] + std::log(row_sum[r]);
      }
    }
  });
}

template <typename scalar_t>
void backward_kernel(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& out, const at::Tensor& lse, const at::Tensor& roles, at::Tensor& grad_q,
                     at::Tensor& grad_k, at::Tensor& grad_v, int64_t g, int64_t w, double scale_,
                     const Dropout& dropout) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t heads = q.size(1), s = q.size(2), d = q.size(3);
  const int64_t n_seq = q.size(0) * heads;
  const acc_t scale = static_cast<acc_t>(scale_);
  const acc_t minus_inf = -std::numeric_limits<acc_t>::infinity();
  const Rows<scalar_t> Q(q), K(k), V(v), O(out), dO(grad_out), dQ(grad_q), dK(grad_k), dV(grad_v);
  const acc_t* lse_ptr = lse.const_data_ptr<acc_t>();
  const uint8_t* roles_ptr = roles.const_data_ptr<uint8_t>();
  // per thread: q, dO, dq tiles; row lse and delta; K^T, V^T, K chunks; p, dp; dK, dV of the sequence
  const int64_t per_thread = 3 * kTileRows * d + 2 * kTileRows + 3 * kChunkKeys * d + 2 * kChunkKeys + 2 * s * d;
  const int64_t threads = at::get_num_threads();
  at::Tensor scratch = at::empty({threads, per_thread}, q.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
  acc_t* scratch_ptr = scratch.mutable_data_ptr<acc_t>();

  at::parallel_for(0, n_seq, 1, [&](int64_t begin, int64_t end) {
    const int64_t thread = at::get_thread_num();
    TORCH_CHECK(thread < threads, "fused window attention: thread id ", thread, " >= ", threads);
    acc_t* q_tile = scratch_ptr + thread * per_thread;
    acc_t* do_tile = q_tile + kTileRows * d;
    acc_t* dq_tile = do_tile + kTileRows * d;
    acc_t* row_lse = dq_tile + kTileRows * d;
    acc_t* row_delta = row_lse + kTileRows;
    acc_t* keys_t = row_delta + kTileRows;
    acc_t* values_t = keys_t + kChunkKeys * d;
    acc_t* keys = values_t + kChunkKeys * d;
    acc_t* probs = keys + kChunkKeys * d;
    acc_t* dprobs = probs + kChunkKeys;
    acc_t* dk_seq = dprobs + kChunkKeys;
    acc_t* dv_seq = dk_seq + s * d;
    for (int64_t n = begin; n < end; ++n) {
      const Pattern pattern{roles_ptr + (n / heads) * s, s, g, w};
      std::fill(dk_seq, dk_seq + 2 * s * d, acc_t(0));
      for (int64_t i0 = 0; i0 < s; i0 += kTileRows) {
        const int64_t i1 = std::min(s, i0 + kTileRows);
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t r = i - i0;
          const scalar_t *q_row = Q.row(n, i), *do_row = dO.row(n, i), *o_row = O.row(n, i);
          acc_t delta = 0;
          for (int64_t c = 0; c < d; ++c) {
            q_tile[r * d + c] = static_cast<acc_t>(q_row[c]);
            do_tile[r * d + c] = static_cast<acc_t>(do_row[c]);
            delta += do_tile[r * d + c] * static_cast<acc_t>(o_row[c]);
          }
          row_delta[r] = delta;
          row_lse[r] = lse_ptr[n * s + i];
        }
        std::fill(dq_tile, dq_tile + kTileRows * d, acc_t(0));
        const auto load = [&](int64_t c0, int64_t c1) {
          load_chunk<scalar_t, acc_t>(K, n, c0, c1, d, keys, keys_t);
          load_chunk<scalar_t, acc_t>(V, n, c0, c1, d, nullptr, values_t);
        };
        const auto visit = [&](Pass pass, int64_t i, int64_t lo, int64_t hi, int64_t c0) {
          const int64_t r = i - i0;
          const acc_t* q_row = q_tile + r * d;
          const acc_t* do_row = do_tile + r * d;
          row_scores(q_row, keys_t, probs, lo, hi, d);
          row_scores(do_row, values_t, dprobs, lo, hi, d);
          pattern.mask(pass, i, c0, lo, hi, scale, minus_inf, probs);
          const acc_t lse_r = row_lse[r], delta = row_delta[r];
          if (dropout.probability > 0) {  // p -> p z (z: 1 / (1 - p_drop) or 0); ds = p (z dP - delta)
            for (int64_t j = lo; j < hi; ++j) {
              const acc_t p = exp_approx(probs[j] - lse_r), z = dropout.factor<acc_t>(n, s, i, c0 + j);
              probs[j] = p * z;
              dprobs[j] = p * (z * dprobs[j] - delta);
            }
          } else {
#pragma omp simd
            for (int64_t j = lo; j < hi; ++j) {
              const acc_t p = exp_approx(probs[j] - lse_r);  // masked: -inf -> 0 (float: < 1e-37)
              probs[j] = p;
              dprobs[j] = p * (dprobs[j] - delta);  // ds: gradient of the scaled score
            }
          }
          add_weighted_rows(dq_tile + r * d, dprobs, keys, lo, hi, d);
          for (int64_t j = lo; j < hi; ++j) {
            acc_t* dk_row = dk_seq + (c0 + j) * d;
            acc_t* dv_row = dv_seq + (c0 + j) * d;
            const acc_t ds = dprobs[j], p = probs[j];
#pragma omp simd
            for (int64_t c = 0; c < d; ++c) {
              dk_row[c] += ds * q_row[c];
              dv_row[c] += p * do_row[c];
            }
          }
        };
        sweep_tile(pattern, i0, i1, load, visit);
        for (int64_t i = i0; i < i1; ++i) {
          scalar_t* dq_row = dQ.row(n, i);
          for (int64_t c = 0; c < d; ++c) dq_row[c] = static_cast<scalar_t>(dq_tile[(i - i0) * d + c] * scale);
        }
      }
      for (int64_t t = 0; t < s; ++t) {
        scalar_t *dk_row = dK.row(n, t), *dv_row = dV.row(n, t);
        for (int64_t c = 0; c < d; ++c) {
          dk_row[c] = static_cast<scalar_t>(dk_seq[t * d + c] * scale);
          dv_row[c] = static_cast<scalar_t>(dv_seq[t * d + c]);
        }
      }
    }
  });
}

// (B, H, s, d) over (B, s, H, d) memory: what a BERT layer reshapes to (B, s, H * d) for free.
at::Tensor like_heads(const at::Tensor& q) {
  return at::empty({q.size(0), q.size(2), q.size(1), q.size(3)}, q.options()).transpose(1, 2);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fused_attention_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v, const at::Tensor& roles,
                                                              int64_t global_keys, int64_t window,
                                                              double scale, double dropout, int64_t seed) {
  at::Tensor out = like_heads(q);
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::toOpMathType(q.scalar_type())));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, q.scalar_type(), "fused_attention_forward_cpu", [&] {
    forward_kernel<scalar_t>(q, k, v, roles, out, lse, global_keys, window, scale,
                             Dropout{static_cast<float>(dropout), static_cast<uint64_t>(seed)});
  });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_attention_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& roles, int64_t global_keys,
    int64_t window, double scale, double dropout, int64_t seed) {
  at::Tensor grad_q = like_heads(q), grad_k = like_heads(k), grad_v = like_heads(v);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, q.scalar_type(), "fused_attention_backward_cpu", [&] {
    backward_kernel<scalar_t>(grad_out, q, k, v, out, logsumexp, roles, grad_q, grad_k, grad_v, global_keys, window,
                              scale, Dropout{static_cast<float>(dropout), static_cast<uint64_t>(seed)});
  });
  return {grad_q, grad_k, grad_v};
}

}  // namespace window_attention
