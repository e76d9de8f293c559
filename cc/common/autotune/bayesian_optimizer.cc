#include "cc/common/autotune/bayesian_optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tfhvd {

namespace {

constexpr double kPi = 3.14159265358979323846;
// Length scales tried at each fit (the one with the largest marginal
// likelihood wins): from "every sample matters only nearby" to "smooth".
constexpr double kScales[] = {0.08, 0.15, 0.3, 0.5, 0.8};
// Expected improvement's exploration margin (standardised score units).
constexpr double kXi = 0.01;

double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * kPi); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// Solves L y = b (L lower triangular, row-major n x n) in place.
void ForwardSolve(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  for (size_t i = 0; i < n; ++i) {
    double s = (*b)[i];
    for (size_t k = 0; k < i; ++k) s -= l[i * n + k] * (*b)[k];
    (*b)[i] = s / l[i * n + i];
  }
}

// Solves L^T x = b in place.
void BackSolve(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  for (size_t i = n; i-- > 0;) {
    double s = (*b)[i];
    for (size_t k = i + 1; k < n; ++k) s -= l[k * n + i] * (*b)[k];
    (*b)[i] = s / l[i * n + i];
  }
}

}  // namespace

BayesianOptimizer::BayesianOptimizer(size_t dims, double noise, uint64_t seed)
    : dims_(dims), noise_(std::max(noise, 1e-6)), rng_(seed), binary_(dims, false) {}

void BayesianOptimizer::AddSample(const std::vector<double>& x, double y) {
  xs_.push_back(x);
  ys_.push_back(y);
  if (y > ys_[best_]) best_ = ys_.size() - 1;
}

double BayesianOptimizer::Kernel(const std::vector<double>& a,
                                 const std::vector<double>& b) const {
  double d2 = 0;
  for (size_t i = 0; i < dims_; ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  return std::exp(-d2 / (2 * scale_ * scale_));
}

double BayesianOptimizer::Fit(double scale) {
  scale_ = scale;
  const size_t n = xs_.size();
  chol_.assign(n * n, 0.0);
  // K + noise I, factorised in place (Cholesky, lower).
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double s = Kernel(xs_[i], xs_[j]) + (i == j ? noise_ : 0.0);
      for (size_t k = 0; k < j; ++k) s -= chol_[i * n + k] * chol_[j * n + k];
      if (i == j) {
        chol_[i * n + i] = std::sqrt(std::max(s, 1e-12));
      } else {
        chol_[i * n + j] = s / chol_[j * n + j];
      }
    }
  }
  alpha_ = z_;
  ForwardSolve(chol_, n, &alpha_);
  double fit = 0;
  for (size_t i = 0; i < n; ++i) fit += alpha_[i] * alpha_[i];  // z^T K^-1 z
  BackSolve(chol_, n, &alpha_);
  double log_det = 0;
  for (size_t i = 0; i < n; ++i) log_det += std::log(chol_[i * n + i]);
  return -0.5 * fit - log_det - 0.5 * static_cast<double>(n) * std::log(2 * kPi);
}

void BayesianOptimizer::FitBest() {
  // Standardise the scores: the kernel's unit variance then matches them.
  const size_t n = ys_.size();
  double mean = 0, var = 0;
  for (double y : ys_) mean += y;
  mean /= static_cast<double>(n);
  for (double y : ys_) var += (y - mean) * (y - mean);
  double sd = n > 1 ? std::sqrt(var / static_cast<double>(n)) : 0.0;
  if (!(sd > 0)) sd = std::max(std::abs(mean), 1.0);
  z_.resize(n);
  for (size_t i = 0; i < n; ++i) z_[i] = (ys_[i] - mean) / sd;
  double best_scale = kScales[0], best_ll = -std::numeric_limits<double>::infinity();
  for (double s : kScales) {
    double ll = Fit(s);
    if (ll > best_ll) {
      best_ll = ll;
      best_scale = s;
    }
  }
  Fit(best_scale);
}

void BayesianOptimizer::Predict(const std::vector<double>& x, double* mean, double* stddev) {
  const size_t n = xs_.size();
  std::vector<double> k(n);
  for (size_t i = 0; i < n; ++i) k[i] = Kernel(x, xs_[i]);
  double m = 0;
  for (size_t i = 0; i < n; ++i) m += k[i] * alpha_[i];
  ForwardSolve(chol_, n, &k);
  double v = 1.0;
  for (size_t i = 0; i < n; ++i) v -= k[i] * k[i];
  *mean = m;
  *stddev = std::sqrt(std::max(v, 1e-12));
}

double BayesianOptimizer::ExpectedImprovement(const std::vector<double>& x, double best) {
  double mean, sd;
  Predict(x, &mean, &sd);
  double gain = mean - best - kXi;
  double z = gain / sd;
  return gain * NormalCdf(z) + sd * NormalPdf(z);
}

std::vector<double> BayesianOptimizer::RandomPoint() {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> x(dims_);
  for (size_t i = 0; i < dims_; ++i) x[i] = binary_[i] ? (u(rng_) < 0.5 ? 0.0 : 1.0) : u(rng_);
  return x;
}

std::vector<double> BayesianOptimizer::NextSample(size_t candidates) {
  if (ys_.empty()) return RandomPoint();
  FitBest();
  double best = *std::max_element(z_.begin(), z_.end());
  std::normal_distribution<double> step(0.0, 0.08);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> chosen;
  double chosen_ei = -1;
  // Random points over the whole cube, then as many near the best sample
  // (the optimum is usually close to it once a few samples are in).
  for (size_t c = 0; c < 2 * candidates; ++c) {
    std::vector<double> x;
    if (c < candidates) {
      x = RandomPoint();
    } else {
      x = xs_[best_];
      for (size_t i = 0; i < dims_; ++i) {
        if (binary_[i]) {
          if (u(rng_) < 0.2) x[i] = 1.0 - x[i];
        } else {
          x[i] = std::min(1.0, std::max(0.0, x[i] + step(rng_)));
        }
      }
    }
    double ei = ExpectedImprovement(x, best);
    if (ei > chosen_ei) {
      chosen_ei = ei;
      chosen = std::move(x);
    }
  }
  return chosen;
}

}  // namespace tfhvd
