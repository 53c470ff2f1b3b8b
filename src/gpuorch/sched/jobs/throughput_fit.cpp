#include "gpuorch/sched/jobs/throughput_fit.hpp"

#include <nlopt.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace gpuorch::sched::jobs {
namespace {

constexpr std::size_t kParams = 7;
using Theta = std::array<double, kParams>;  // alpha_c beta_c alpha_n beta_n alpha_r beta_r gamma
constexpr double kTiny = 1e-8;              // the artifact's floor for times and parameters

Theta to_theta(const ThroughputParams& p) {
  return {p.alpha_c, p.beta_c, p.alpha_n, p.beta_n, p.alpha_r, p.beta_r, p.gamma};
}

ThroughputParams from_theta(const Theta& t) { return {t[0], t[1], t[2], t[3], t[4], t[5], t[6]}; }

// The network term's parameter pair (index of alpha; -1 for a single GPU) and its R - 2.
struct Network {
  int alpha = -1;
  double x = kTiny;
};

Network network(int nodes, int replicas) {
  Network n;
  n.x = std::max(double(replicas) - 2.0, kTiny);
  if (nodes > 1)
    n.alpha = 2;
  else if (replicas > 1)
    n.alpha = 4;
  return n;
}

double network_time(const Theta& t, const Network& n) {
  return n.alpha < 0 ? kTiny + kTiny * n.x : t[n.alpha] + t[n.alpha + 1] * n.x;
}

// Loss of §8.4 and, when `grad` is given, its gradient in every parameter.
double loss(const Theta& t, std::span<const ThroughputSample> samples, Theta* grad) {
  const double count = double(samples.size());
  const double g = t[6];
  double sum_c = 0, sum_o = 0;
  Theta d_c{}, d_o{};  // sums of residual x d(log prediction)
  for (const auto& s : samples) {
    const double a = s.local_batch;
    const Network net = network(s.nodes, s.replicas);
    const double tc = t[0] + t[1] * a;
    const double tn = network_time(t, net);
    const double pc = std::pow(tc, g), pn = std::pow(tn, g);
    const double sum = pc + pn;
    const double e_c = std::log(tc) - std::log(std::max(s.step_time - s.sync_time, kTiny));
    const double e_o = std::log(sum) / g - std::log(std::max(s.step_time, kTiny));
    sum_c += e_c * e_c;
    sum_o += e_o * e_o;
    if (grad == nullptr) continue;
    d_c[0] += e_c / tc;
    d_c[1] += e_c * a / tc;
    // d log t_o / d t_c = t_c^(g-1) / sum, and the same for t_n.
    const double wc = pc / tc / sum, wn = pn / tn / sum;
    d_o[0] += e_o * wc;
    d_o[1] += e_o * wc * a;
    if (net.alpha >= 0) {
      d_o[static_cast<std::size_t>(net.alpha)] += e_o * wn;
      d_o[static_cast<std::size_t>(net.alpha) + 1] += e_o * wn * net.x;
    }
    d_o[6] +=
        e_o * (-std::log(sum) / (g * g) + (pc * std::log(tc) + pn * std::log(tn)) / (g * sum));
  }
  const double rmse_c = std::sqrt(sum_c / count), rmse_o = std::sqrt(sum_o / count);
  const double rn = t[3] / t[2], rr = t[5] / t[4];
  const double value = rmse_c + rmse_o + 1e-3 * (g - 1) * (g - 1) + 1e-2 * (rn * rn + rr * rr);
  if (grad != nullptr) {
    // d sqrt(sum / N) = (sum of e de) / (N rmse); an exact fit has no slope to follow.
    const double kc = rmse_c > 0 ? 1.0 / (count * rmse_c) : 0.0;
    const double ko = rmse_o > 0 ? 1.0 / (count * rmse_o) : 0.0;
    for (std::size_t i = 0; i < kParams; ++i) (*grad)[i] = kc * d_c[i] + ko * d_o[i];
    (*grad)[6] += 2e-3 * (g - 1);
    (*grad)[2] += -2e-2 * rn * rn / t[2];
    (*grad)[3] += 2e-2 * rn / t[2];
    (*grad)[4] += -2e-2 * rr * rr / t[4];
    (*grad)[5] += 2e-2 * rr / t[4];
  }
  return value;
}

struct Problem {
  std::span<const ThroughputSample> samples;
  Theta fixed;                    // every parameter; the free ones are overwritten
  std::vector<std::size_t> free;  // indices NLopt varies
};

double objective(unsigned n, const double* x, double* grad, void* data) {
  const auto& p = *static_cast<const Problem*>(data);
  Theta t = p.fixed;
  for (unsigned i = 0; i < n; ++i) t[p.free[i]] = x[i];
  Theta full{};
  const double v = loss(t, p.samples, grad != nullptr ? &full : nullptr);
  if (grad != nullptr) {
    for (unsigned i = 0; i < n; ++i) grad[i] = full[p.free[i]];
  }
  return v;
}

}  // namespace

double compute_time(const ThroughputParams& p, double local) {
  return p.alpha_c + p.beta_c * local;
}

double sync_step_time(const ThroughputParams& p, int nodes, int replicas, double local) {
  const Theta t = to_theta(p);
  const double tc = compute_time(p, local);
  const double tn = network_time(t, network(nodes, replicas));
  return std::pow(std::pow(tc, p.gamma) + std::pow(tn, p.gamma), 1.0 / p.gamma);
}

double step_time(const ThroughputParams& p, int nodes, int replicas, double local, int accum) {
  return accum * compute_time(p, local) + sync_step_time(p, nodes, replicas, local);
}

double fit_loss(const ThroughputParams& p, std::span<const ThroughputSample> samples) {
  return samples.empty() ? 0.0 : loss(to_theta(p), samples, nullptr);
}

ThroughputParams fit_throughput(std::span<const ThroughputSample> samples) {
  Theta start = to_theta(ThroughputParams{});
  if (samples.empty()) return from_theta(start);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Theta lower{kTiny, kTiny, kTiny, kTiny, kTiny, kTiny, 1.0};
  Theta upper{kInf, kInf, kInf, kInf, kInf, kInf, 10.0};
  bool several_batches = false, multi_node = false, one_node_multi_gpu = false, over_two = false;
  double compute_sum = 0;
  for (const auto& s : samples) {
    several_batches |= s.local_batch != samples.front().local_batch;
    multi_node |= s.nodes > 1;
    one_node_multi_gpu |= s.nodes == 1 && s.replicas > 1;
    over_two |= s.replicas > 2;
    compute_sum += s.step_time - s.sync_time;
  }
  std::array<bool, kParams> pinned{};
  auto pin = [&](std::size_t i, double v) {
    start[i] = lower[i] = upper[i] = v;
    pinned[i] = true;
  };
  // One batch size cannot separate the fixed from the per-sample compute cost.
  if (!several_batches) pin(0, std::max(compute_sum / double(samples.size()) / 2, kTiny));
  if (!multi_node) pin(2, kTiny), pin(3, kTiny);
  if (!one_node_multi_gpu) pin(4, kTiny), pin(5, kTiny);
  if (!over_two) pin(3, kTiny), pin(5, kTiny);

  Problem problem{samples, start, {}};
  std::vector<double> x, lo, hi;
  for (std::size_t i = 0; i < kParams; ++i) {
    if (pinned[i]) continue;
    problem.free.push_back(i);
    x.push_back(start[i]);
    lo.push_back(lower[i]);
    hi.push_back(upper[i]);
  }
  Theta best = start;
  if (!x.empty()) {
    // SLSQP (quasi-Newton with BFGS updates, bounds kept): NLopt's L-BFGS, the artifact's method,
    // stops with a generic failure far from the optimum on this loss (test
    // TimelineSpeedupFit.RecoversTheParametersThatMadeItsSamples: gamma stayed near 1).
    nlopt_opt opt = nlopt_create(NLOPT_LD_SLSQP, static_cast<unsigned>(x.size()));
    nlopt_set_lower_bounds(opt, lo.data());
    nlopt_set_upper_bounds(opt, hi.data());
    nlopt_set_min_objective(opt, objective, &problem);
    // scipy's L-BFGS-B stops at a relative loss change of about 2.2e-9.
    nlopt_set_ftol_rel(opt, 2.2e-9);
    nlopt_set_maxeval(opt, 1000);
    double value = 0;
    // A failure (roundoff) still leaves the best point found in x, which the artifact also keeps.
    nlopt_optimize(opt, x.data(), &value);
    nlopt_destroy(opt);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isfinite(x[i])) best[problem.free[i]] = std::clamp(x[i], lo[i], hi[i]);
    }
  }
  ThroughputParams p = from_theta(best);
  // Until a job has run across nodes, assume crossing nodes costs at least a tenth more than
  // exchanging inside one (the artifact's optimistic prior).
  if (!multi_node) {
    p.alpha_n = std::max(p.alpha_n, 1.1 * p.alpha_r);
    p.beta_n = std::max(p.beta_n, 1.1 * p.beta_r);
  }
  return p;
}

}  // namespace gpuorch::sched::jobs
