// The simulator is a thin user of the scheduler core: every GPU placement of sim/ goes through
// sched::Scheduler (sched/replica_gang.hpp, sched/gang.hpp), so what `sim timeline` and `sim
// fill` evaluate is the scheduler gpuorch runs. This test fails, naming file:line, when a file
// under src/gpuorch/sim/ binds placements itself or chooses GPUs by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "support/paths.hpp"

namespace gpuorch {
namespace {

struct Forbidden {
  std::regex pattern;
  const char* why;
};

const std::vector<Forbidden>& forbidden() {
  static const std::vector<Forbidden> rules{
      {std::regex(R"(\bapply\s*\()"), "binds a placement itself (Cluster::apply)"},
      {std::regex(R"(\bcluster_?\s*(\.|->)\s*release\s*\()"),
       "releases placements behind the placer's back"},
      {std::regex(R"(\b(pick_gpus|pick_connected|lowest_free_gpus|best_fit_gpu|choose_gpus)\b)"),
       "chooses GPUs outside the scheduler's policy"},
      {std::regex(R"(\b(place_on_node|place_replicas|gang_replicas)\b)"),
       "uses the retired side path of placement"},
      {std::regex(R"(\bPlacement\s*\{|\bPlacement\s+[A-Za-z_]\w*\s*(;|\{|=))"),
       "makes a placement by hand"},
  };
  return rules;
}

// The code of a line without its // comment (the rules are about code, not prose).
std::string code_of(const std::string& line) {
  const std::size_t comment = line.find("//");
  return comment == std::string::npos ? line : line.substr(0, comment);
}

TEST(PlacementStructure, SimPlacesGpusOnlyThroughTheSchedulerCore) {
  const std::filesystem::path sim =
      std::filesystem::path(test::source_dir()) / "src" / "gpuorch" / "sim";
  ASSERT_TRUE(std::filesystem::is_directory(sim)) << sim;
  std::vector<std::string> findings;
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(sim)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
      const std::string code = code_of(line);
      for (const Forbidden& f : forbidden()) {
        if (std::regex_search(code, f.pattern)) {
          findings.push_back(std::filesystem::relative(entry.path(), test::source_dir()).string() +
                             ":" + std::to_string(number) + ": " + f.why + ": " + line);
        }
      }
    }
  }
  EXPECT_GT(files, 10U) << "src/gpuorch/sim/ should hold the simulator's sources";
  std::string all;
  for (const auto& f : findings) all += "\n  " + f;
  EXPECT_TRUE(findings.empty()) << "sim/ places GPUs outside the scheduler core:" << all;
}

// The rules catch what they are for (a rule that matches nothing guards nothing).
TEST(PlacementStructure, TheRulesCatchTheSidePaths) {
  const std::vector<std::string> bad{
      "  cluster.apply(p);",
      "  cluster->release(placements[0]);",
      "  p.gpus = sched::pick_gpus(left, 2, links);",
      "  auto q = sched::place_replicas(cluster, 4, spread);",
      "  cluster::Placement p;",
      "  out.push_back(cluster::Placement{n, 0, 0, 1000, {0}});",
  };
  for (const auto& line : bad) {
    bool caught = false;
    for (const Forbidden& f : forbidden())
      caught = caught || std::regex_search(code_of(line), f.pattern);
    EXPECT_TRUE(caught) << line;
  }
  const std::vector<std::string> good{
      "  placer.release(j->placements());",
      "  const auto d = placer.place(job, 4, sched::ReplicaSpread::kFewestNodes);",
      "  std::vector<cluster::Placement> out;",
      "  // cluster.apply( in a comment is prose",
  };
  for (const auto& line : good) {
    for (const Forbidden& f : forbidden()) {
      EXPECT_FALSE(std::regex_search(code_of(line), f.pattern)) << line << ": " << f.why;
    }
  }
}

}  // namespace
}  // namespace gpuorch
