// The autotuner: the Bayesian optimizer finds the maximum of simple functions
// in few samples (fixed seed: deterministic), and the parameter manager
// discards warmup samples, leaves knobs set in the environment alone, logs one
// row per sample and ends on the best values it measured.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cc/common/autotune/bayesian_optimizer.h"
#include "cc/common/negotiation/message.h"
#include "cc/common/autotune/parameter_manager.h"

namespace tfhvd {
namespace {

TEST(BayesianOptimizer, FindsTheMaximumOfA1DFunction) {
  auto f = [](double x) { return -(x - 0.73) * (x - 0.73); };
  BayesianOptimizer bo(1, 0.01, 7);
  bo.AddSample({0.1}, f(0.1));
  for (int i = 0; i < 12; ++i) {
    std::vector<double> x = bo.NextSample();
    ASSERT_EQ(x.size(), 1u);
    ASSERT_GE(x[0], 0.0);
    ASSERT_LE(x[0], 1.0);
    bo.AddSample(x, f(x[0]));
  }
  EXPECT_NEAR(bo.Best()[0], 0.73, 0.03);
}

TEST(BayesianOptimizer, FindsTheMaximumOfA2DFunctionWithABinaryDimension) {
  // The binary dimension halves the score when off.
  auto f = [](const std::vector<double>& x) {
    double bump = std::exp(-((x[0] - 0.3) * (x[0] - 0.3)) / 0.02);
    return bump * (x[1] > 0.5 ? 1.0 : 0.5);
  };
  BayesianOptimizer bo(2, 0.01, 3);
  bo.SetBinary(1);
  bo.AddSample({0.9, 0.0}, f({0.9, 0.0}));
  for (int i = 0; i < 20; ++i) {
    std::vector<double> x = bo.NextSample();
    ASSERT_TRUE(x[1] == 0.0 || x[1] == 1.0) << x[1];
    bo.AddSample(x, f(x));
  }
  EXPECT_NEAR(bo.Best()[0], 0.3, 0.05);
  EXPECT_EQ(bo.Best()[1], 1.0);
}

TEST(BayesianOptimizer, IsDeterministicForASeed) {
  auto run = [] {
    BayesianOptimizer bo(2, 0.8, 11);
    std::vector<std::vector<double>> seen;
    bo.AddSample({0.5, 0.5}, 1.0);
    for (int i = 0; i < 5; ++i) {
      auto x = bo.NextSample();
      seen.push_back(x);
      bo.AddSample(x, x[0] - x[1]);
    }
    return seen;
  };
  EXPECT_EQ(run(), run());
}

TEST(BayesianOptimizer, PosteriorFollowsTheSamples) {
  BayesianOptimizer bo(1, 1e-4, 1);
  bo.AddSample({0.2}, 1.0);
  bo.AddSample({0.8}, 3.0);
  bo.NextSample();  // fits
  double m_low, m_high, sd_at, sd_far;
  bo.Predict({0.2}, &m_low, &sd_at);
  bo.Predict({0.8}, &m_high, &sd_far);
  EXPECT_LT(m_low, m_high);
  EXPECT_LT(sd_at, 0.05);  // almost no noise: sure at a sample
}

Parameters TuneParams() {
  Parameters p;
  p.autotune = true;
  p.autotune_warmup_samples = 2;
  p.autotune_steps_per_sample = 3;
  p.autotune_bayes_opt_max_samples = 8;
  p.autotune_gaussian_process_noise = 0.05;
  return p;
}

// Feeds the manager `cycles` reducing cycles of 1 MB each, each taking
// 1 MB / rate(values) seconds, and applies what it proposes at once.
struct Driver {
  ParameterManager* pm;
  double now = 0;
  int proposals = 0;
  std::vector<TunedParameters> applied;
  template <typename Rate>
  void Run(int cycles, Rate rate) {
    for (int i = 0; i < cycles; ++i) {
      now += 1e6 / rate(pm->current());
      TunedParameters next;
      if (pm->Update(1000000, now, &next)) {
        ++proposals;
        applied.push_back(next);
        now += 0.001;
        pm->Applied(now);
      }
    }
  }
};

TEST(ParameterManager, DiscardsWarmupAndTunesToTheBest) {
  const std::string log = ::testing::TempDir() + "/autotune_log.csv";
  Parameters p = TuneParams();
  p.autotune_log = log;
  ParameterManager pm(p, /*hierarchical_tunable=*/false);
  ASSERT_EQ(pm.tuned().size(), 3u);  // fusion, cycle time, cache (one host)
  // Throughput peaks at 16 MiB fusion and 5 ms cycles, cache on.
  auto rate = [](const TunedParameters& v) {
    double f = static_cast<double>(v.fusion_threshold_bytes) / (64.0 * 1024 * 1024);
    double c = (v.cycle_time_ms - 1) / 24;
    double score = 100e6 * std::exp(-((f - 0.25) * (f - 0.25) + (c - 0.17) * (c - 0.17)) / 0.05);
    return (v.response_cache ? 1.0 : 0.6) * score + 1e6;
  };
  Driver d{&pm};
  // The first cycle only starts the clock; warmup: 2 samples of 3 cycles.
  d.Run(1 + 2 * 3, rate);
  EXPECT_EQ(d.proposals, 0);
  EXPECT_EQ(pm.scored_samples(), 0);
  d.Run(3, rate);  // the first scored sample (the start values) -> first proposal
  EXPECT_EQ(pm.scored_samples(), 1);
  EXPECT_EQ(d.proposals, 1);
  d.Run(3 * 20, rate);
  EXPECT_FALSE(pm.active());
  EXPECT_EQ(pm.scored_samples(), 8);
  EXPECT_EQ(d.proposals, 8);  // 7 tries + the best at the end
  // The final values are the best of the samples measured.
  double best = 0;
  for (size_t i = 0; i + 1 < d.applied.size(); ++i) best = std::max(best, rate(d.applied[i]));
  best = std::max(best, rate(TunedParameters{p.fusion_threshold_bytes, p.cycle_time_ms, true}));
  EXPECT_DOUBLE_EQ(rate(d.applied.back()), best);
  EXPECT_EQ(pm.current(), d.applied.back());
  // Nothing changes after the end.
  d.Run(30, rate);
  EXPECT_EQ(d.proposals, 8);
  // One header and one row per scored sample.
  std::ifstream in(log);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[0], "sample,fusion_threshold_bytes,cycle_time_ms,response_cache,"
                      "hierarchical_allreduce,score_bytes_per_second");
  EXPECT_EQ(lines[1].rfind("1,67108864,1.0,1,0,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[8].rfind("8,", 0), 0u) << lines[8];
}

TEST(ParameterManager, ConvergesNearTheOptimumWithEnoughSamples) {
  Parameters p = TuneParams();
  p.autotune_bayes_opt_max_samples = 20;
  p.set_knobs = {"HOROVOD_CACHE_CAPACITY"};
  ParameterManager pm(p, false);
  auto rate = [](const TunedParameters& v) {
    double f = static_cast<double>(v.fusion_threshold_bytes) / (64.0 * 1024 * 1024);
    double c = (v.cycle_time_ms - 1) / 24;
    return 1e6 + 100e6 * std::exp(-((f - 0.4) * (f - 0.4) + (c - 0.6) * (c - 0.6)) / 0.08);
  };
  Driver d{&pm};
  d.Run(1 + 2 * 3 + 3 * 20, rate);
  ASSERT_FALSE(pm.active());
  EXPECT_GT(rate(pm.current()), 0.9 * rate(TunedParameters{26843546, 15.4, true}));
}

TEST(ParameterManager, LeavesKnobsSetInTheEnvironmentAlone) {
  Parameters p = TuneParams();
  p.fusion_threshold_bytes = 1234567;
  p.cache_capacity = 0;
  p.set_knobs = {"HOROVOD_FUSION_THRESHOLD", "HOROVOD_CACHE_CAPACITY"};
  ParameterManager pm(p, /*hierarchical_tunable=*/true);
  ASSERT_EQ(pm.tuned().size(), 2u);
  EXPECT_EQ(pm.tuned()[0], ParameterManager::Knob::CYCLE_TIME);
  EXPECT_EQ(pm.tuned()[1], ParameterManager::Knob::HIERARCHICAL_ALLREDUCE);
  Driver d{&pm};
  d.Run(200, [](const TunedParameters& v) { return 1e6 * v.cycle_time_ms; });
  ASSERT_FALSE(d.applied.empty());
  bool cycle_changed = false, hierarchical_on = false;
  for (const auto& v : d.applied) {
    EXPECT_EQ(v.fusion_threshold_bytes, 1234567);
    EXPECT_FALSE(v.response_cache);
    EXPECT_GE(v.cycle_time_ms, 1.0);
    EXPECT_LE(v.cycle_time_ms, 25.0);
    cycle_changed |= v.cycle_time_ms != p.cycle_time_ms;
    hierarchical_on |= v.hierarchical_allreduce;
  }
  EXPECT_TRUE(cycle_changed);
  EXPECT_TRUE(hierarchical_on);
}

TEST(ParameterManager, NothingToTuneWhenEverythingIsFixed) {
  Parameters p = TuneParams();
  p.set_knobs = {"HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY"};
  ParameterManager pm(p, false);
  EXPECT_FALSE(pm.active());
  TunedParameters next;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(pm.Update(1000, i, &next));
}

TEST(ParameterManager, RoundsToTheTunedSteps) {
  Parameters p = TuneParams();
  ParameterManager pm(p, true);
  TunedParameters v = pm.ValuesAt({0.5, 0.5, 0.2, 0.7});
  EXPECT_EQ(v.fusion_threshold_bytes, 32 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(v.cycle_time_ms, 13.0);
  EXPECT_FALSE(v.response_cache);
  EXPECT_TRUE(v.hierarchical_allreduce);
  EXPECT_EQ(pm.ValuesAt(pm.PointOf(v)), v);
}

TEST(ResponseListTuning, RoundTripsThroughTheWireEncoding) {
  ResponseList list;
  list.has_tuned = true;
  list.tuned = TunedParameters{3 * 1024 * 1024, 7.5, false, true};
  ResponseList back;
  ASSERT_TRUE(ParseResponseList(SerializeResponseList(list), &back));
  EXPECT_TRUE(back.has_tuned);
  EXPECT_EQ(back.tuned, list.tuned);
  ResponseList plain, plain_back;
  ASSERT_TRUE(ParseResponseList(SerializeResponseList(plain), &plain_back));
  EXPECT_FALSE(plain_back.has_tuned);
}

}  // namespace
}  // namespace tfhvd
