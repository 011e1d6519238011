#include "exec/kernels/attention_cpu.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

// One variant per CPU level, picked once at load time (cpu_level()): the products below
// are tiled to the level's vector registers.  A tile sized for AVX-512's 32 registers of
// 16 floats spills on AVX2's 16 of 8 (measured 2.6x slower than LibTorch's matmuls on an
// AVX2-only EPYC, docs/PERFORMANCE.md), so each level gets its own tile shapes, not one
// shape compiled three ways.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define QN_X86_LEVELS 1
#define QN_TARGET(isa) __attribute__((target(isa), flatten))
#else
#define QN_X86_LEVELS 0
#endif

namespace quintnet::exec::kernels {
namespace {

constexpr int64_t kTile = 16;  // padding granularity of every operand: a multiple of each level's width

int64_t padded(int64_t n) {
  return (n + kTile - 1) / kTile * kTile;
}

// Each level's vector: W floats as one value (GCC's vector extension), one register of
// the level.  aligned(4): loads from any float address.
struct Avx512 {
  static constexpr int64_t W = 16;
  typedef float vec __attribute__((vector_size(W * sizeof(float)), aligned(4)));
};
struct Avx2 {
  static constexpr int64_t W = 8;
  typedef float vec __attribute__((vector_size(W * sizeof(float)), aligned(4)));
};
struct Baseline {  // SSE2 on x86, NEON on ARM: 16 bytes everywhere
  static constexpr int64_t W = 4;
  typedef float vec __attribute__((vector_size(W * sizeof(float)), aligned(4)));
};

// R rows × J·W columns of C = A · B, accumulated over K in R·J registers.  Rows past
// `rows` repeat the last valid one and are not stored: no branch inside the K loop.
template <class L, int R, int J>
inline void gemm_tile(int64_t rows, int64_t K, int64_t Np, const float* A, int64_t a_row, int64_t a_col,
                      const float* __restrict__ B, float* __restrict__ C, int64_t ldc) {
  using vec = typename L::vec;
  const float* a[R];
  for (int r = 0; r < R; ++r) a[r] = A + std::min<int64_t>(r, rows - 1) * a_row;
  vec acc[R][J] = {};
  for (int64_t k = 0; k < K; ++k) {
    vec b[J];
    for (int j = 0; j < J; ++j) b[j] = *reinterpret_cast<const vec*>(B + k * Np + j * L::W);
    for (int r = 0; r < R; ++r) {
      const float x = a[r][k * a_col];
      for (int j = 0; j < J; ++j) acc[r][j] += x * b[j];
    }
  }
  for (int r = 0; r < rows && r < R; ++r)
    for (int j = 0; j < J; ++j) *reinterpret_cast<vec*>(C + r * ldc + j * L::W) = acc[r][j];
}

// Columns [n0, n0 + J·W) of C for every row, R rows at a time.
template <class L, int R, int J>
inline void gemm_rows(int64_t M, int64_t K, int64_t Np, int64_t n0, const float* A, int64_t a_row,
                      int64_t a_col, const float* __restrict__ B, float* __restrict__ C, int64_t ldc) {
  for (int64_t m0 = 0; m0 < M; m0 += R)
    gemm_tile<L, R, J>(std::min<int64_t>(R, M - m0), K, Np, A + m0 * a_row, a_row, a_col, B + n0,
                       C + m0 * ldc + n0, ldc);
}

// C[M, Np] = A[M, K] · B[K, Np] for the small matrices of one head: A read through
// strides (so Aᵀ costs nothing), B row-major with Np a multiple of 16 (zero padded),
// C with leading dimension ldc.  Tiles of R·J accumulators plus J loads of B: 8 to 12
// independent FMA chains (two FMA units, 4-5 cycles each), within the level's registers.
template <class L>
inline void small_gemm(int64_t M, int64_t K, int64_t Np, const float* A, int64_t a_row, int64_t a_col,
                       const float* __restrict__ B, float* __restrict__ C, int64_t ldc) {
  int64_t n0 = 0;
  if constexpr (L::W == 16) {  // 32 registers: 8 accumulators of 64, 32 or 16 columns
    for (; n0 + 4 * kTile <= Np; n0 += 4 * kTile) gemm_rows<L, 2, 4>(M, K, Np, n0, A, a_row, a_col, B, C, ldc);
    for (; n0 + 2 * kTile <= Np; n0 += 2 * kTile) gemm_rows<L, 4, 2>(M, K, Np, n0, A, a_row, a_col, B, C, ldc);
    for (; n0 < Np; n0 += kTile) gemm_rows<L, 8, 1>(M, K, Np, n0, A, a_row, a_col, B, C, ldc);
  } else if constexpr (L::W == 8) {  // 16 registers: 6 rows × 16 columns (12 accumulators, 2 of B, 1 of A)
    for (; n0 < Np; n0 += kTile) gemm_rows<L, 6, 2>(M, K, Np, n0, A, a_row, a_col, B, C, ldc);
  } else {  // 16 registers, no FMA: 2 rows × 16 columns
    for (; n0 < Np; n0 += kTile) gemm_rows<L, 2, 4>(M, K, Np, n0, A, a_row, a_col, B, C, ldc);
  }
}

// exp(x) for x ≤ 0 (scores minus their row maximum), branch-free so the loop that
// calls it vectorises: 2^n · e^r with n = round(x·log2 e), |r| ≤ ln2/2 and Cephes' expf
// polynomial (relative error ~1e-7, as libm's expf).  Below e^-87 it flushes to ~1e-38.
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  // Round to nearest with the 1.5·2²³ trick: vectorises without SSE4.1's roundps.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // Cody-Waite: ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;  // 2^n (n ≥ -126)
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// Reductions in kTile independent lanes (then the lanes in order): a vector register
// instead of one long chain of dependent scalar adds (4 cycles each).  The order is
// fixed, so results stay deterministic.
template <class Combine>
inline float reduce_lanes(const float* x, const float* y, int64_t n, float init, Combine combine) {
  float lanes[kTile];
  std::fill(lanes, lanes + kTile, init);
  int64_t j = 0;
  for (; j + kTile <= n; j += kTile)
    for (int64_t w = 0; w < kTile; ++w) lanes[w] = combine(lanes[w], y ? x[j + w] * y[j + w] : x[j + w]);
  for (int64_t w = 0; j + w < n; ++w) lanes[w] = combine(lanes[w], y ? x[j + w] * y[j + w] : x[j + w]);
  float out = lanes[0];
  for (int64_t w = 1; w < kTile; ++w) out = combine(out, lanes[w]);
  return out;
}
inline float sum(const float* x, int64_t n) {
  return reduce_lanes(x, nullptr, n, 0.0f, [](float a, float b) { return a + b; });
}
inline float dot(const float* x, const float* y, int64_t n) {
  return reduce_lanes(x, y, n, 0.0f, [](float a, float b) { return a + b; });
}
inline float max(const float* x, int64_t n) {
  return reduce_lanes(x, nullptr, n, x[0], [](float a, float b) { return std::max(a, b); });
}

// softmax(scale · row[0, cols)) into out[0, T); out[cols, T) = 0 (the causal future).
inline void softmax_row(const float* row, int64_t cols, int64_t T, float scale, float* __restrict__ out) {
  const float max_score = max(row, cols);
  for (int64_t j = 0; j < cols; ++j) out[j] = exp_nonpositive((row[j] - max_score) * scale);  // vectorised
  const float inv = 1.0f / sum(out, cols);
  for (int64_t j = 0; j < cols; ++j) out[j] *= inv;
  std::fill(out + cols, out + T, 0.0f);
}

// One head's scratch: every operand of the products above in its padded layout.
struct HeadScratch {
  int64_t T, d, Tp, dp;
  std::vector<float> rows, cols, scores, result;  // [T, dp] [d, Tp] [T, Tp] [T, dp]
  HeadScratch(int64_t tokens, int64_t head_dim)
      : T(tokens),
        d(head_dim),
        Tp(padded(tokens)),
        dp(padded(head_dim)),
        rows(T * dp),
        cols(d * Tp),
        scores(T * Tp),
        result(T * dp) {}
};

// Head h of batch b of x ([B, T, H, d] with strides stride_b, stride_t) as rows [T, dp]
// or transposed as columns [d, Tp], zero padded.
void rows_of(const float* x, int64_t stride_b, int64_t stride_t, int64_t b, int64_t h, const HeadScratch& s,
             float* out) {
  for (int64_t t = 0; t < s.T; ++t) {
    std::memcpy(out + t * s.dp, x + b * stride_b + t * stride_t + h * s.d, sizeof(float) * s.d);
    std::fill(out + t * s.dp + s.d, out + (t + 1) * s.dp, 0.0f);
  }
}
void columns_of(const float* x, int64_t stride_b, int64_t stride_t, int64_t b, int64_t h,
                const HeadScratch& s, float* out) {
  std::fill(out, out + s.d * s.Tp, 0.0f);
  for (int64_t t = 0; t < s.T; ++t)
    for (int64_t c = 0; c < s.d; ++c) out[c * s.Tp + t] = x[b * stride_b + t * stride_t + h * s.d + c];
}
// result [T, dp] -> head h of batch b of a contiguous [B, T, H, d] tensor.
void store_rows(const HeadScratch& s, int64_t heads, int64_t b, int64_t h, float* out) {
  for (int64_t t = 0; t < s.T; ++t)
    std::memcpy(out + ((b * s.T + t) * heads + h) * s.d, s.result.data() + t * s.dp, sizeof(float) * s.d);
}

template <class L>
void forward(const AttentionDims& a, const float* q, const float* k, const float* v, float* out, float* probs,
             int64_t first, int64_t last) {
  const int64_t T = a.tokens, d = a.head_dim, H = a.heads;
  HeadScratch s(T, d);
  for (int64_t n = first; n < last; ++n) {
    const int64_t b = n / H, h = n % H;
    float* p = probs + n * T * T;
    // S = Q Kᵀ, P = softmax(scale · S) row by row, O = P V.
    columns_of(k, a.stride_b, a.stride_t, b, h, s, s.cols.data());
    small_gemm<L>(T, d, s.Tp, q + b * a.stride_b + h * d, a.stride_t, 1, s.cols.data(), s.scores.data(), s.Tp);
    for (int64_t i = 0; i < T; ++i)
      softmax_row(s.scores.data() + i * s.Tp, a.causal ? i + 1 : T, T, a.scale, p + i * T);
    rows_of(v, a.stride_b, a.stride_t, b, h, s, s.rows.data());
    small_gemm<L>(T, T, s.dp, p, T, 1, s.rows.data(), s.result.data(), s.dp);
    store_rows(s, H, b, h, out);
  }
}

template <class L>
void backward(const AttentionDims& a, const float* q, const float* k, const float* v, const float* probs,
              const float* dout, float* dq, float* dk, float* dv, int64_t first, int64_t last) {
  const int64_t T = a.tokens, d = a.head_dim, H = a.heads;
  const int64_t dout_b = T * H * d, dout_t = H * d;  // dout is contiguous [B, T, H, d]
  HeadScratch s(T, d);
  for (int64_t n = first; n < last; ++n) {
    const int64_t b = n / H, h = n % H;
    const float* p = probs + n * T * T;
    const float* dout_head = dout + b * dout_b + h * d;
    // dV = Pᵀ dO
    rows_of(dout, dout_b, dout_t, b, h, s, s.rows.data());
    small_gemm<L>(T, T, s.dp, p, 1, T, s.rows.data(), s.result.data(), s.dp);
    store_rows(s, H, b, h, dv);
    // dP = dO Vᵀ, then the softmax backward in place: dS = scale · P ⊙ (dP − Σ_j P dP).
    columns_of(v, a.stride_b, a.stride_t, b, h, s, s.cols.data());
    small_gemm<L>(T, d, s.Tp, dout_head, dout_t, 1, s.cols.data(), s.scores.data(), s.Tp);
    for (int64_t i = 0; i < T; ++i) {
      float* ds = s.scores.data() + i * s.Tp;
      const float* pi = p + i * T;
      const float pi_dot_ds = dot(pi, ds, T);
      for (int64_t j = 0; j < T; ++j)
        ds[j] = pi[j] * (ds[j] - pi_dot_ds) * a.scale;  // 0 where P is (the future)
    }
    // dQ = dS K, dK = dSᵀ Q
    rows_of(k, a.stride_b, a.stride_t, b, h, s, s.rows.data());
    small_gemm<L>(T, T, s.dp, s.scores.data(), s.Tp, 1, s.rows.data(), s.result.data(), s.dp);
    store_rows(s, H, b, h, dq);
    rows_of(q, a.stride_b, a.stride_t, b, h, s, s.rows.data());
    small_gemm<L>(T, T, s.dp, s.scores.data(), 1, s.Tp, s.rows.data(), s.result.data(), s.dp);
    store_rows(s, H, b, h, dk);
  }
}

// The levels' entry points: each compiles its level's forward and backward for its
// instruction set (flatten: every helper inlined, so nothing runs at the baseline's).
#define QN_LEVEL_ENTRY(name, L, attributes)                                                                       \
  attributes void forward_##name(const AttentionDims& a, const float* q, const float* k, const float* v,         \
                                 float* out, float* probs, int64_t first, int64_t last) {                       \
    forward<L>(a, q, k, v, out, probs, first, last);                                                            \
  }                                                                                                             \
  attributes void backward_##name(const AttentionDims& a, const float* q, const float* k, const float* v,        \
                                  const float* probs, const float* dout, float* dq, float* dk, float* dv,        \
                                  int64_t first, int64_t last) {                                                \
    backward<L>(a, q, k, v, probs, dout, dq, dk, dv, first, last);                                              \
  }
QN_LEVEL_ENTRY(baseline, Baseline, __attribute__((flatten)))
#if QN_X86_LEVELS
QN_LEVEL_ENTRY(avx2, Avx2, QN_TARGET("arch=x86-64-v3"))
QN_LEVEL_ENTRY(avx512, Avx512, QN_TARGET("arch=x86-64-v4"))
#endif

CpuLevel detect_cpu_level() {
#if QN_X86_LEVELS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return CpuLevel::kAvx512;
  if (__builtin_cpu_supports("x86-64-v3")) return CpuLevel::kAvx2;
#endif
  return CpuLevel::kBaseline;
}

CpuLevel& level_in_use() {
  static CpuLevel level = best_cpu_level();
  return level;
}

}  // namespace

CpuLevel best_cpu_level() {
  static const CpuLevel best = detect_cpu_level();
  return best;
}

CpuLevel cpu_level() {
  return level_in_use();
}

void set_cpu_level(CpuLevel level) {
  if (level > best_cpu_level())
    throw std::invalid_argument(std::string("this CPU cannot run the ") + cpu_level_name(level) +
                                " kernels (its best: " + cpu_level_name(best_cpu_level()) + ")");
  level_in_use() = level;
}

const char* cpu_level_name(CpuLevel level) {
  switch (level) {
    case CpuLevel::kAvx512: return "AVX-512";
    case CpuLevel::kAvx2: return "AVX2";
    case CpuLevel::kBaseline: break;
  }
  return "baseline";
}

void attention_forward(const AttentionDims& dims, const float* q, const float* k, const float* v, float* out,
                       float* probs, int64_t first, int64_t last) {
  switch (cpu_level()) {
#if QN_X86_LEVELS
    case CpuLevel::kAvx512: return forward_avx512(dims, q, k, v, out, probs, first, last);
    case CpuLevel::kAvx2: return forward_avx2(dims, q, k, v, out, probs, first, last);
#endif
    default: return forward_baseline(dims, q, k, v, out, probs, first, last);
  }
}

void attention_backward(const AttentionDims& dims, const float* q, const float* k, const float* v, const float* probs,
                        const float* dout, float* dq, float* dk, float* dv, int64_t first, int64_t last) {
  switch (cpu_level()) {
#if QN_X86_LEVELS
    case CpuLevel::kAvx512: return backward_avx512(dims, q, k, v, probs, dout, dq, dk, dv, first, last);
    case CpuLevel::kAvx2: return backward_avx2(dims, q, k, v, probs, dout, dq, dk, dv, first, last);
#endif
    default: return backward_baseline(dims, q, k, v, probs, dout, dq, dk, dv, first, last);
  }
}

}  // namespace quintnet::exec::kernels
