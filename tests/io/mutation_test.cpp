// Mutation test of the input parsers: thousands of seeded random corruptions of the good
// fixtures; every one must either load or fail with base::InputError (one line), never
// anything else.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/io/inventory.hpp"
#include "gpuorch/io/openb.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "support/mutate.hpp"
#include "support/test_support.hpp"

namespace gpuorch::io {
namespace {

enum class Kind { kNodes, kPods, kPods5, kInventory };

struct Outcome {
  int loaded = 0;
  int rejected = 0;
  int wrong = 0;
};

void feed(Kind kind, const std::string& text, const test::TempDir& dir,
          const cluster::Cluster& fixture_cluster, Outcome& out) {
  const std::string path = dir.file(kind == Kind::kInventory ? "inv.yaml" : "input.csv");
  try {
    switch (kind) {
      case Kind::kNodes: {
        test::write_text(path, text);
        const cluster::Cluster c(load_openb_nodes(path));
        EXPECT_GE(c.node_count(), 1U);
        break;
      }
      case Kind::kPods:
      case Kind::kPods5: {
        test::write_text(path, text);
        const PodTrace t = load_openb_pods(path);
        EXPECT_EQ(t.pods.size(), t.lines.size());
        unknown_model_warnings(t, fixture_cluster);
        sched::RequestResolver resolver(fixture_cluster);
        for (const auto& p : t.pods) resolver.resolve(p);
        break;
      }
      case Kind::kInventory: {
        const auto nodes = parse_inventory(text, path);
        const cluster::Cluster c(nodes);
        EXPECT_GE(c.node_count(), 1U);
        break;
      }
    }
    ++out.loaded;
  } catch (const base::InputError& e) {
    ++out.rejected;
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path, 0), 0U) << "message does not name the file: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos)
        << "message is not one line: " << test::escaped(message);
  } catch (const std::exception& e) {
    ++out.wrong;
    ADD_FAILURE() << "not an InputError: " << e.what() << "\ninput: " << test::escaped(text);
  } catch (...) {
    ++out.wrong;
    ADD_FAILURE() << "unknown exception\ninput: " << test::escaped(text);
  }
}

TEST(ParserMutation, CorruptedInputsLoadOrFailWithInputErrorOnly) {
  const std::pair<Kind, std::string> sources[] = {
      {Kind::kNodes, test::read_text(test::fixture("openb_nodes.csv"))},
      {Kind::kPods, test::read_text(test::fixture("openb_pods.csv"))},
      {Kind::kPods5, test::read_text(test::fixture("openb_pods_5col.csv"))},
      {Kind::kInventory, test::read_text(test::fixture("inventory.yaml"))},
  };
  const test::TempDir dir;
  const cluster::Cluster fixture_cluster(load_openb_nodes(test::fixture("openb_nodes.csv")));
  base::Rng rng(20240601);
  Outcome per_kind[4];
  constexpr int kCases = 2000;
  for (int i = 0; i < kCases; ++i) {
    const auto& [kind, text] = sources[i % 4];
    feed(kind, test::mutate(text, rng), dir, fixture_cluster, per_kind[i % 4]);
    if (::testing::Test::HasFailure() && per_kind[i % 4].wrong > 3) break;
  }
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(fmt::format("input kind {}", k));
    EXPECT_EQ(per_kind[k].wrong, 0);
    // Both outcomes occur, so the corruptions neither always break nor never break the input.
    EXPECT_GT(per_kind[k].loaded, 20);
    EXPECT_GT(per_kind[k].rejected, 20);
  }
}

}  // namespace
}  // namespace gpuorch::io
