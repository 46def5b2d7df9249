// CPU kernels of the fused GatModel step (lib.linkpred.kernels builds and loads them; lib.linkpred.fused_gat and
// lib.linkpred.model call them).  Written by hand because torch has no CPU kernel that fuses these element-wise passes
// and torch.compile's CPU code was slower than eager here; each replaces three to six passes over an [N, C] tensor
// with one each way:
//
//   dropout_apply:             out = x * keep / q                                    (x any shape)
//   residual_dropout_norm:     out = LayerNorm(x + (y + b) * keep / q; gamma, beta)   (x, y [N, C], b [C])
//   pair_dot:                  logits[p] = z[src[p]] . z[dst[p]]                      (z [N, D], pairs [P])
//   prepare_edges:             the fused layer's sorted edges and sparse patterns      (by counting sorts)
//   edge_softmax:              its attention weights over each target's in-edges       (a [N, 2K] -> [E', K])
//
// keep_i (element i of the tensor, row-major) is field i of `bits` < t, the fields being b-bit unsigned integers
// packed little-endian (b in 1, 2, 4, 8, 16): lib.linkpred.fused_gat.DropoutBits draws them, and its torch fallback
// reads the same fields, so both paths drop the same elements.

#include <ATen/Parallel.h>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

// m[j] = scale where field start + j < t, else 0, for j < len.
template <int B>
inline void multipliers(const uint8_t* bits, int64_t start, int64_t len, uint32_t t, float scale, float* m) {
  if constexpr (B == 16) {
    const uint8_t* w = bits + 2 * start;
    for (int64_t j = 0; j < len; ++j) m[j] = (uint32_t(w[2 * j]) | (uint32_t(w[2 * j + 1]) << 8)) < t ? scale : 0.f;
  } else if constexpr (B == 8) {
    const uint8_t* w = bits + start;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) m[j] = w[j] < t ? scale : 0.f;
  } else {
    constexpr int64_t per = 8 / B;  // fields per byte
    constexpr uint32_t mask = (1u << B) - 1;
    auto one = [&](int64_t f) { return ((uint32_t(bits[f / per]) >> ((f % per) * B)) & mask) < t ? scale : 0.f; };
    int64_t j = 0;
    for (; j < len && (start + j) % per != 0; ++j) m[j] = one(start + j);  // up to a byte boundary (rows of odd width)
    const uint8_t* w = bits + (start + j) / per;
    const int64_t whole = (len - j) / per;
    for (int64_t q = 0; q < whole; ++q) {
      const uint32_t v = w[q];
      for (int64_t k = 0; k < per; ++k) m[j + q * per + k] = ((v >> (k * B)) & mask) < t ? scale : 0.f;
    }
    for (j += whole * per; j < len; ++j) m[j] = one(start + j);
  }
}

#define DISPATCH_BITS(b, ...)                                                        \
  switch (b) {                                                                       \
    case 1: { constexpr int B = 1; __VA_ARGS__; break; }                             \
    case 2: { constexpr int B = 2; __VA_ARGS__; break; }                             \
    case 4: { constexpr int B = 4; __VA_ARGS__; break; }                             \
    case 8: { constexpr int B = 8; __VA_ARGS__; break; }                             \
    case 16: { constexpr int B = 16; __VA_ARGS__; break; }                           \
    default: TORCH_CHECK(false, "bits per element must be 1, 2, 4, 8 or 16, not ", b); \
  }

// Elements per block: a multiple of 8 (a block starts on a byte of every field width) and of the SIMD width.
constexpr int64_t kBlock = 512;

void check_bits(const torch::Tensor& bits, int64_t n, int64_t b) {
  TORCH_CHECK(bits.scalar_type() == at::kByte && bits.is_contiguous() && bits.device().is_cpu(),
              "dropout bits must be a contiguous uint8 CPU tensor");
  TORCH_CHECK(bits.numel() * 8 >= n * b, "dropout bits hold ", bits.numel() * 8 / b, " fields of ", b,
              " bits but the tensor has ", n, " elements");
}

void check_float(const torch::Tensor& x, const char* name) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && x.device().is_cpu(), name,
              " must be a contiguous float32 CPU tensor");
}

template <int B>
void dropout_rows(const float* x, const uint8_t* bits, uint32_t t, float scale, float* out, int64_t n) {
  at::parallel_for(0, (n + kBlock - 1) / kBlock, 16, [&](int64_t lo, int64_t hi) {
    float m[kBlock];
    for (int64_t blk = lo; blk < hi; ++blk) {
      const int64_t i = blk * kBlock, len = std::min(kBlock, n - i);
      multipliers<B>(bits, i, len, t, scale, m);
      const float* __restrict__ xs = x + i;
      float* __restrict__ os = out + i;
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) os[j] = xs[j] * m[j];
    }
  });
}

template <int B>
void norm_forward(const float* x, const float* y, const float* y_bias, const uint8_t* bits, uint32_t t, float scale,
                  const float* gamma, const float* beta, float eps, float* out, float* sum_out, float* mean, float* rstd, int64_t n,
                  int64_t c) {
  at::parallel_for(0, n, 64, [&](int64_t lo, int64_t hi) {
    std::vector<float> mbuf(c), dev(c);
    float* __restrict__ m = mbuf.data();
    float* __restrict__ d = dev.data();
    for (int64_t r = lo; r < hi; ++r) {
      const float* __restrict__ xr = x + r * c;
      const float* __restrict__ yr = y + r * c;
      float* __restrict__ sr = sum_out + r * c;
      float* __restrict__ outr = out + r * c;
      multipliers<B>(bits, r * c, c, t, scale, m);
      float total = 0.f;
#pragma omp simd reduction(+ : total)
      for (int64_t j = 0; j < c; ++j) {
        sr[j] = xr[j] + (yr[j] + y_bias[j]) * m[j];
        total += sr[j];
      }
      const float mu = total / c;
      float sq = 0.f;
#pragma omp simd reduction(+ : sq)
      for (int64_t j = 0; j < c; ++j) {
        d[j] = sr[j] - mu;
        sq += d[j] * d[j];
      }
      const float rs = 1.f / std::sqrt(sq / c + eps);
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) outr[j] = d[j] * rs * gamma[j] + beta[j];
      mean[r] = mu;
      rstd[r] = rs;
    }
  });
}

template <int B>
void norm_backward(const float* g, const float* sum_in, const float* mean, const float* rstd, const uint8_t* bits,
                   uint32_t t, float scale, const float* gamma, float* gx, float* gy, float* partial, int64_t n,
                   int64_t c) {  // partial [threads, 3, C]: grad gamma, grad beta, grad y's bias (column sums of gy)
  at::parallel_for(0, n, 64, [&](int64_t lo, int64_t hi) {
    std::vector<float> xhat(c), dxhat(c), mbuf(c), ggamma(c, 0.f), gbeta(c, 0.f), gbias(c, 0.f);
    float* __restrict__ xh = xhat.data();
    float* __restrict__ dx = dxhat.data();
    float* __restrict__ gg = ggamma.data();
    float* __restrict__ gb = gbeta.data();
    float* __restrict__ gyb = gbias.data();
    float* __restrict__ m = mbuf.data();
    for (int64_t r = lo; r < hi; ++r) {
      const float* __restrict__ gr = g + r * c;
      const float* __restrict__ sr = sum_in + r * c;
      const float mu = mean[r], rs = rstd[r];
      float a = 0.f, bdot = 0.f;
#pragma omp simd reduction(+ : a, bdot)
      for (int64_t j = 0; j < c; ++j) {
        xh[j] = (sr[j] - mu) * rs;
        dx[j] = gr[j] * gamma[j];
        gg[j] += gr[j] * xh[j];
        gb[j] += gr[j];
        a += dx[j];
        bdot += dx[j] * xh[j];
      }
      a /= c;
      bdot /= c;
      multipliers<B>(bits, r * c, c, t, scale, m);
      float* __restrict__ gxr = gx + r * c;
      float* __restrict__ gyr = gy + r * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const float v = rs * (dx[j] - a - xh[j] * bdot);
        gxr[j] = v;
        gyr[j] = v * m[j];
        gyb[j] += gyr[j];
      }
    }
    float* dst = partial + int64_t(at::get_thread_num()) * 3 * c;
    for (int64_t j = 0; j < c; ++j) {
      dst[j] += gg[j];
      dst[c + j] += gb[j];
      dst[2 * c + j] += gyb[j];
    }
  });
}

void check_pairs(const torch::Tensor& src, const torch::Tensor& dst, int64_t n) {
  TORCH_CHECK(src.scalar_type() == at::kLong && dst.scalar_type() == at::kLong && src.numel() == dst.numel(),
              "pair_dot: src and dst must be int64 tensors of equal length");
  const int64_t* s = src.data_ptr<int64_t>();
  const int64_t* d = dst.data_ptr<int64_t>();
  for (int64_t p = 0; p < src.numel(); ++p)
    TORCH_CHECK(s[p] >= 0 && s[p] < n && d[p] >= 0 && d[p] < n, "pair_dot: pair ", p, " (", s[p], ", ", d[p],
                ") refers to a node outside 0..", n - 1);
}

}  // namespace

torch::Tensor dropout_apply(torch::Tensor x, torch::Tensor bits, int64_t b, int64_t t, double scale) {
  check_float(x, "dropout_apply: x");
  check_bits(bits, x.numel(), b);
  auto out = torch::empty_like(x);
  DISPATCH_BITS(b, dropout_rows<B>(x.data_ptr<float>(), bits.data_ptr<uint8_t>(), uint32_t(t), float(scale),
                                   out.data_ptr<float>(), x.numel()));
  return out;
}

// -> out, the sum x + dropout(y + y_bias) (saved for backward), and each row's mean and 1/std [N]; y_bias [C] or None
std::vector<torch::Tensor> residual_dropout_norm(torch::Tensor x, torch::Tensor y, c10::optional<torch::Tensor> y_bias,
                                                 torch::Tensor bits, int64_t b, int64_t t, double scale,
                                                 torch::Tensor gamma, torch::Tensor beta, double eps) {
  check_float(x, "residual_dropout_norm: x");
  check_float(y, "residual_dropout_norm: y");
  check_float(gamma, "residual_dropout_norm: weight");
  check_float(beta, "residual_dropout_norm: bias");
  TORCH_CHECK(x.dim() == 2 && x.sizes() == y.sizes() && gamma.numel() == x.size(1) && beta.numel() == x.size(1),
              "residual_dropout_norm: x and y must be [N, C] and weight, bias [C]");
  check_bits(bits, x.numel(), b);
  const int64_t n = x.size(0), c = x.size(1);
  const torch::Tensor yb = y_bias.has_value() ? y_bias->contiguous() : torch::zeros({c}, x.options());
  check_float(yb, "residual_dropout_norm: y's bias");
  TORCH_CHECK(yb.numel() == c, "residual_dropout_norm: y's bias must be [C]");
  auto out = torch::empty_like(x), sum = torch::empty_like(x);
  auto mean = torch::empty({n}, x.options()), rstd = torch::empty({n}, x.options());
  DISPATCH_BITS(b, norm_forward<B>(x.data_ptr<float>(), y.data_ptr<float>(), yb.data_ptr<float>(),
                                   bits.data_ptr<uint8_t>(), uint32_t(t), float(scale), gamma.data_ptr<float>(), beta.data_ptr<float>(), float(eps),
                                   out.data_ptr<float>(), sum.data_ptr<float>(), mean.data_ptr<float>(),
                                   rstd.data_ptr<float>(), n, c));
  return {out, sum, mean, rstd};
}

// -> grad x, grad y, grad weight, grad bias, grad y's bias
std::vector<torch::Tensor> residual_dropout_norm_backward(torch::Tensor g, torch::Tensor sum, torch::Tensor mean,
                                                          torch::Tensor rstd, torch::Tensor bits, int64_t b,
                                                          int64_t t, double scale, torch::Tensor gamma) {
  g = g.contiguous();
  check_float(g, "residual_dropout_norm_backward: grad");
  const int64_t n = sum.size(0), c = sum.size(1);
  auto gx = torch::empty_like(sum), gy = torch::empty_like(sum);
  auto partial = torch::zeros({at::get_num_threads(), 3, c}, sum.options());
  DISPATCH_BITS(b, norm_backward<B>(g.data_ptr<float>(), sum.data_ptr<float>(), mean.data_ptr<float>(),
                                    rstd.data_ptr<float>(), bits.data_ptr<uint8_t>(), uint32_t(t), float(scale),
                                    gamma.data_ptr<float>(), gx.data_ptr<float>(), gy.data_ptr<float>(),
                                    partial.data_ptr<float>(), n, c));
  auto reduced = partial.sum(0);
  return {gx, gy, reduced[0], reduced[1], reduced[2]};
}

torch::Tensor pair_dot(torch::Tensor z, torch::Tensor src, torch::Tensor dst) {
  check_float(z, "pair_dot: z");
  src = src.contiguous();
  dst = dst.contiguous();
  check_pairs(src, dst, z.size(0));
  const int64_t p = src.numel(), d = z.size(1);
  auto out = torch::empty({p}, z.options());
  const float* zs = z.data_ptr<float>();
  const int64_t* s = src.data_ptr<int64_t>();
  const int64_t* e = dst.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, p, 1024, [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      const float* __restrict__ a = zs + s[q] * d;
      const float* __restrict__ b = zs + e[q] * d;
      float acc = 0.f;
#pragma omp simd reduction(+ : acc)
      for (int64_t j = 0; j < d; ++j) acc += a[j] * b[j];
      o[q] = acc;
    }
  });
  return out;
}

// grad z [N, D]: row src[p] gains g[p] z[dst[p]] and row dst[p] gains g[p] z[src[p]].  Pairs share rows, so each
// thread sums into a buffer of its own (up to a memory bound), added up at the end.
torch::Tensor pair_dot_backward(torch::Tensor g, torch::Tensor z, torch::Tensor src, torch::Tensor dst) {
  g = g.contiguous();
  check_float(g, "pair_dot_backward: grad");
  src = src.contiguous();
  dst = dst.contiguous();
  const int64_t n = z.size(0), d = z.size(1), p = src.numel();
  const int64_t per_buffer = n * d;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), (64ll << 20) / std::max<int64_t>(per_buffer, 1)));
  auto buffers = torch::zeros({threads, n, d}, z.options());
  const float* zs = z.data_ptr<float>();
  const float* gs = g.data_ptr<float>();
  const int64_t* s = src.data_ptr<int64_t>();
  const int64_t* e = dst.data_ptr<int64_t>();
  float* buf = buffers.data_ptr<float>();
  const int64_t chunk = (p + threads - 1) / threads;
  at::parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      float* out = buf + k * per_buffer;
      for (int64_t q = k * chunk; q < std::min(p, (k + 1) * chunk); ++q) {
        const float w = gs[q];
        float* __restrict__ oa = out + s[q] * d;
        float* __restrict__ ob = out + e[q] * d;
        const float* za = zs + s[q] * d;
        const float* zb = zs + e[q] * d;
        if (oa == ob) {  // a pair (i, i): both terms land on one row
          for (int64_t j = 0; j < d; ++j) oa[j] += 2.f * w * za[j];
          continue;
        }
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          oa[j] += w * zb[j];
          ob[j] += w * za[j];
        }
      }
    }
  });
  return threads == 1 ? buffers[0] : buffers.sum(0);
}

// lib.linkpred.fused_gat.prepare_edges by counting sorts, O(E + N): the same tensors as its torch ops (two sorts
// and a repeat_interleave), in a sixth of their time at the seed's graph size.
std::vector<torch::Tensor> prepare_edges(torch::Tensor edge_index, int64_t n, int64_t heads) {
  TORCH_CHECK(edge_index.scalar_type() == at::kLong && edge_index.dim() == 2 && edge_index.size(0) == 2,
              "prepare_edges: edge_index must be an int64 [2, E] tensor");
  edge_index = edge_index.contiguous();
  const int64_t e = edge_index.size(1);
  const int64_t* src_in = edge_index.data_ptr<int64_t>();
  const int64_t* dst_in = src_in + e;
  std::vector<int64_t> count(n + 1, 0);
  int64_t kept = 0;
  for (int64_t q = 0; q < e; ++q) {
    TORCH_CHECK(src_in[q] >= 0 && src_in[q] < n && dst_in[q] >= 0 && dst_in[q] < n, "prepare_edges: edge ", q,
                " (", src_in[q], ", ", dst_in[q], ") refers to a node outside 0..", n - 1);
    if (src_in[q] != dst_in[q]) {
      ++count[src_in[q] + 1];
      ++kept;
    }
  }
  const int64_t total = kept + n;  // one self-loop per node
  for (int64_t i = 0; i < n; ++i) ++count[i + 1];
  for (int64_t i = 0; i < n; ++i) count[i + 1] += count[i];
  // by source (stable: input order, the self-loops after the input's edges)
  std::vector<int64_t> by_src_s(total), by_src_d(total);
  {
    std::vector<int64_t> next(count.begin(), count.end() - 1);
    for (int64_t q = 0; q < e; ++q)
      if (src_in[q] != dst_in[q]) {
        const int64_t at = next[src_in[q]]++;
        by_src_s[at] = src_in[q];
        by_src_d[at] = dst_in[q];
      }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = next[i]++;
      by_src_s[at] = i;
      by_src_d[at] = i;
    }
  }
  // then by target, stable: sorted by (target, source)
  auto opts = edge_index.options();
  auto ei = torch::empty({2, total}, opts);
  auto ptr = torch::zeros({n + 1}, opts);
  int64_t* src = ei.data_ptr<int64_t>();
  int64_t* dst = src + total;
  int64_t* p = ptr.data_ptr<int64_t>();
  for (int64_t q = 0; q < total; ++q) ++p[by_src_d[q] + 1];
  for (int64_t i = 0; i < n; ++i) p[i + 1] += p[i];
  {
    std::vector<int64_t> next(p, p + n);
    for (int64_t q = 0; q < total; ++q) {
      const int64_t at = next[by_src_d[q]]++;
      src[at] = by_src_s[q];
      dst[at] = by_src_d[q];
    }
  }
  auto crow_heads = ptr * heads;
  auto col_heads = torch::empty({total * heads}, opts);
  int64_t* ch = col_heads.data_ptr<int64_t>();
  for (int64_t q = 0; q < total; ++q)
    for (int64_t k = 0; k < heads; ++k) ch[q * heads + k] = src[q] * heads + k;
  // the transpose: edge positions grouped by source, stable (so targets ascend within a group)
  std::vector<int64_t> group(total);
  {
    std::vector<int64_t> next(count.begin(), count.end() - 1);
    for (int64_t q = 0; q < total; ++q) group[next[src[q]]++] = q;
  }
  auto crow_t = torch::empty({n * heads + 1}, opts);
  auto col_t = torch::empty({total * heads}, opts);
  auto perm_t = torch::empty({total * heads}, opts);
  int64_t* ct = crow_t.data_ptr<int64_t>();
  int64_t* cc = col_t.data_ptr<int64_t>();
  int64_t* pt = perm_t.data_ptr<int64_t>();
  ct[0] = 0;
  int64_t at = 0;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < heads; ++k) {
      for (int64_t m = count[j]; m < count[j + 1]; ++m) {
        cc[at] = dst[group[m]];
        pt[at] = group[m] * heads + k;
        ++at;
      }
      ct[j * heads + k + 1] = at;
    }
  return {ei, ptr, crow_heads, col_heads, crow_t, col_t, perm_t};
}

// The fused layer's attention weights over each target's in-edges (edges sorted by target, ptr [N + 1]):
// logit [E', K] = a[src, k] + a[target, K + k] (a = h M^T [N, 2K]) and alpha [E', K] = softmax of LeakyReLU(logit)
// as PyG's softmax computes it, exp(v - max) / (sum + 1e-16).
std::vector<torch::Tensor> edge_softmax(torch::Tensor a, torch::Tensor src, torch::Tensor ptr, double slope) {
  check_float(a, "edge_softmax: a");
  TORCH_CHECK(src.scalar_type() == at::kLong && ptr.scalar_type() == at::kLong && src.is_contiguous() &&
                  ptr.is_contiguous(), "edge_softmax: src and ptr must be contiguous int64 tensors");
  const int64_t n = a.size(0), k2 = a.size(1), k = k2 / 2, e = src.numel();
  auto logit = torch::empty({e, k}, a.options()), alpha = torch::empty({e, k}, a.options());
  const float* av = a.data_ptr<float>();
  const int64_t* s = src.data_ptr<int64_t>();
  const int64_t* p = ptr.data_ptr<int64_t>();
  float* lv = logit.data_ptr<float>();
  float* al = alpha.data_ptr<float>();
  const float neg = float(slope);
  at::parallel_for(0, n, 256, [&](int64_t lo, int64_t hi) {
    std::vector<float> top(k), total(k);
    for (int64_t i = lo; i < hi; ++i) {
      std::fill(top.begin(), top.end(), -std::numeric_limits<float>::infinity());
      std::fill(total.begin(), total.end(), 0.f);
      for (int64_t q = p[i]; q < p[i + 1]; ++q)
        for (int64_t h = 0; h < k; ++h) {
          const float l = av[s[q] * k2 + h] + av[i * k2 + k + h];
          const float v = l > 0 ? l : l * neg;
          lv[q * k + h] = l;
          al[q * k + h] = v;
          top[h] = std::max(top[h], v);
        }
      for (int64_t q = p[i]; q < p[i + 1]; ++q)
        for (int64_t h = 0; h < k; ++h) {
          const float x = std::exp(al[q * k + h] - top[h]);
          al[q * k + h] = x;
          total[h] += x;
        }
      for (int64_t q = p[i]; q < p[i + 1]; ++q)
        for (int64_t h = 0; h < k; ++h) al[q * k + h] /= total[h] + 1e-16f;
    }
  });
  return {logit, alpha};
}

// grad a [N, 2K] from grad alpha [E', K]: the softmax's backward, alpha (grad - sum over the target's in-edges of
// alpha grad), then the LeakyReLU's, summed into the source's part (columns :K) and the target's (K:).  Serial: many
// edges share a source.
torch::Tensor edge_softmax_backward(torch::Tensor grad_alpha, torch::Tensor alpha, torch::Tensor logit,
                                    torch::Tensor src, torch::Tensor ptr, double slope, int64_t n) {
  grad_alpha = grad_alpha.contiguous();
  check_float(grad_alpha, "edge_softmax_backward: grad");
  const int64_t k = alpha.size(1);
  auto grad_a = torch::zeros({n, 2 * k}, alpha.options());
  const float* ga = grad_alpha.data_ptr<float>();
  const float* al = alpha.data_ptr<float>();
  const float* lv = logit.data_ptr<float>();
  const int64_t* s = src.data_ptr<int64_t>();
  const int64_t* p = ptr.data_ptr<int64_t>();
  float* out = grad_a.data_ptr<float>();
  const float neg = float(slope);
  std::vector<float> weighted(k);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(weighted.begin(), weighted.end(), 0.f);
    for (int64_t q = p[i]; q < p[i + 1]; ++q)
      for (int64_t h = 0; h < k; ++h) weighted[h] += al[q * k + h] * ga[q * k + h];
    for (int64_t q = p[i]; q < p[i + 1]; ++q)
      for (int64_t h = 0; h < k; ++h) {
        float g = al[q * k + h] * (ga[q * k + h] - weighted[h]);
        g = lv[q * k + h] > 0 ? g : g * neg;
        out[s[q] * 2 * k + h] += g;
        out[i * 2 * k + k + h] += g;
      }
  }
  return grad_a;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("dropout_apply", &dropout_apply, "x * keep / q");
  m.def("residual_dropout_norm", &residual_dropout_norm, "LayerNorm(x + dropout(y)) and what backward needs");
  m.def("residual_dropout_norm_backward", &residual_dropout_norm_backward, "its backward");
  m.def("pair_dot", &pair_dot, "logits[p] = z[src[p]] . z[dst[p]]");
  m.def("pair_dot_backward", &pair_dot_backward, "its backward with respect to z");
  m.def("prepare_edges", &prepare_edges, "fused_gat.prepare_edges' tensors");
  m.def("edge_softmax", &edge_softmax, "the fused layer's logits and attention weights");
  m.def("edge_softmax_backward", &edge_softmax_backward, "their backward into a = h M^T");
}
