// A small Bayesian optimizer for the autotuner: Gaussian-process regression
// (RBF kernel, noise on the diagonal) over points in the unit cube, and
// expected improvement maximised over random candidates. Dimensions are
// tiny (<= 4) and samples few (<= a few dozen), so plain vectors and a
// Cholesky factorisation are all it needs.
//
//   BayesianOptimizer bo(/*dims=*/2, /*noise=*/0.8, /*seed=*/1);
//   bo.AddSample({0.5, 0.5}, score);
//   std::vector<double> next = bo.NextSample();  // in [0,1]^2
//   bo.AddSample(next, Measure(next));
//   bo.Best();                                    // the best sample so far
#ifndef TFHVD_COMMON_AUTOTUNE_BAYESIAN_OPTIMIZER_H_
#define TFHVD_COMMON_AUTOTUNE_BAYESIAN_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace tfhvd {

class BayesianOptimizer {
 public:
  // noise: added to the kernel's diagonal, in units of the scores' variance
  // (scores are standardised before fitting), so it says how much of the
  // spread between samples is measurement noise.
  BayesianOptimizer(size_t dims, double noise, uint64_t seed);

  // Dimensions listed here only take the values 0 or 1 (on/off parameters):
  // candidates are drawn from {0, 1} there.
  void SetBinary(size_t dim) { binary_.at(dim) = true; }

  void AddSample(const std::vector<double>& x, double y);
  // The point with the largest expected improvement over the best score so
  // far, among `candidates` random points and points near the best sample.
  // Without samples: a random point.
  std::vector<double> NextSample(size_t candidates = 1000);

  size_t size() const { return ys_.size(); }
  const std::vector<double>& Best() const { return xs_.at(best_); }
  double BestScore() const { return ys_.at(best_); }

  // The fitted posterior at x (standardised units); for the tests.
  void Predict(const std::vector<double>& x, double* mean, double* stddev);

 private:
  double Kernel(const std::vector<double>& a, const std::vector<double>& b) const;
  // Factorises K + noise*I for the samples with length scale `scale`; returns
  // the log marginal likelihood (fills chol_, alpha_).
  double Fit(double scale);
  void FitBest();
  double ExpectedImprovement(const std::vector<double>& x, double best);
  std::vector<double> RandomPoint();

  size_t dims_;
  double noise_;
  std::mt19937_64 rng_;
  std::vector<bool> binary_;
  std::vector<std::vector<double>> xs_;
  std::vector<double> ys_;
  size_t best_ = 0;
  // The fit: standardised scores, length scale, Cholesky factor (row-major,
  // lower), alpha = (K + noise I)^-1 z.
  std::vector<double> z_;
  double scale_ = 0.3;
  std::vector<double> chol_;
  std::vector<double> alpha_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_AUTOTUNE_BAYESIAN_OPTIMIZER_H_
