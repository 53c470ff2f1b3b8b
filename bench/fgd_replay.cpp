// fgd_replay: a check of the rules, not part of gpuorch's simulator. Runs `sim fill` experiments
// with the arrival order and node ranking that the FGD study's simulator drew from Go's math/rand
// (printed by bench/fgd_stream.go), so each seed can be compared with the study's own result for
// that seed. gpuorch draws these from its own generator, so its per-seed values are a different
// sample and only means over seeds compare; replaying the study's stream removes that difference.
//
//   go run bench/fgd_stream.go TRACE.csv 42 51 | fgd_replay NODES.csv TRACE.csv POLICY[,POLICY...]
//
// Prints one JSON object per (seed, policy): {"policy","seed","alloc":[131],"frag_amount":[131],
// "frag_ratio":[131]}, the same curves as `gpuorch sim fill --json`. Random is not replayable:
// the study draws its node among the feasible nodes in the order its filter goroutines finish.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/sched/fragmentation.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/sim/curves.hpp"
#include "gpuorch/sim/fill.hpp"

namespace {

using namespace gpuorch;

nlohmann::json curve_json(const sim::Curve& curve) {
  auto out = nlohmann::json::array();
  for (const auto& v : curve) out.push_back(v ? nlohmann::json(*v) : nlohmann::json(nullptr));
  return out;
}

// The same loop as sim::run_fill, with the arrivals and the tie-break ranking given.
sim::FillCurves replay(const sim::FillInput& input, const std::string& policy_name,
                       std::uint64_t seed, const std::vector<std::uint32_t>& arrivals,
                       std::vector<std::uint32_t> rank) {
  cluster::Cluster cluster(input.nodes);
  base::Rng rng(seed);  // unused by the deterministic policies
  const sched::FragmentationMeasure measure(input.target, cluster);
  sched::FragmentationTracker tracker(measure, cluster);
  const sched::PolicyContext context{&cluster, &measure, &rng};
  const auto policy = sched::make_policy(policy_name, context);
  sched::Scheduler scheduler(cluster, *policy);
  scheduler.set_tie_break_rank(std::move(rank));
  sched::RequestResolver resolver(cluster);
  std::vector<sched::PodRequest> requests;
  requests.reserve(input.pods.size());
  for (const auto& p : input.pods) requests.push_back(resolver.resolve(p));

  std::vector<sim::FillSample> samples;
  samples.reserve(arrivals.size());
  std::int64_t arrived = 0;
  for (const std::uint32_t i : arrivals) {
    arrived += input.pods[i].total_gpu_milli();
    const sched::Decision d = scheduler.schedule(requests[i]);
    if (d.outcome == sched::Outcome::kPlaced) tracker.refresh(cluster, d.placement.node);
    sim::FillSample s;
    s.arrived_gpu_milli = arrived;
    s.used_gpu_milli = cluster.gpu_milli_used();
    s.frag_milli = tracker.cluster_amount();
    const auto idle = static_cast<double>(cluster.gpu_milli_capacity() - s.used_gpu_milli);
    s.frag_ratio = idle > 0 ? 100.0 * s.frag_milli / idle : 0.0;
    samples.push_back(s);
  }
  return sim::build_curves(samples, cluster.gpu_milli_capacity());
}

int run(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fgd_replay NODES.csv TRACE.csv POLICY[,POLICY...] < stream\n");
    return 2;
  }
  std::vector<std::string> policies;
  std::stringstream list(argv[3]);
  for (std::string p; std::getline(list, p, ',');) policies.push_back(p);
  const sim::FillInput input = sim::make_fill_input("replay", io::load_openb_nodes(argv[1]),
                                                    io::load_openb_pods(argv[2]).pods);

  // The study ranks the nodes in name order; ours are in file order.
  std::vector<std::size_t> by_name(input.nodes.size());
  std::iota(by_name.begin(), by_name.end(), std::size_t{0});
  std::stable_sort(by_name.begin(), by_name.end(), [&](std::size_t a, std::size_t b) {
    return input.nodes[a].name < input.nodes[b].name;
  });

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::uint64_t seed = 0;
    std::size_t n = 0;
    in >> seed >> n;
    std::vector<std::uint32_t> arrivals(n);
    for (auto& a : arrivals) in >> a;
    std::vector<std::uint32_t> rank(input.nodes.size());
    for (const std::size_t node : by_name) in >> rank[node];
    if (!in) {
      std::fprintf(stderr, "fgd_replay: malformed stream line for seed %llu\n",
                   static_cast<unsigned long long>(seed));
      return 2;
    }
    for (const auto& a : arrivals) {
      if (a >= input.pods.size()) {
        std::fprintf(stderr, "fgd_replay: pod index %u out of range\n", a);
        return 2;
      }
    }
    for (const std::string& policy : policies) {
      const sim::FillCurves curves = replay(input, policy, seed, arrivals, rank);
      const nlohmann::json out = {{"policy", policy},
                                  {"seed", seed},
                                  {"alloc", curve_json(curves.alloc)},
                                  {"frag_amount", curve_json(curves.frag_amount)},
                                  {"frag_ratio", curve_json(curves.frag_ratio)}};
      std::cout << out.dump() << '\n' << std::flush;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fgd_replay: %s\n", e.what());
    return 2;
  }
}
