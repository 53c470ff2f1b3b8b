// Damaged recordings: every file of every fixture tree deleted, emptied, garbled or turned into a
// dangling symlink in turn. Discovery must never crash or throw (other than InputError for a
// root that is not a tree at all), and each problem must be reported once.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "../topology/fixture_hosts.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/topology/json.hpp"
#include "gpuorch/topology/labels.hpp"
#include "gpuorch/topology/matrix.hpp"
#include "support/paths.hpp"

namespace gpuorch {
namespace {
namespace fs = std::filesystem;

enum class Mutation { kDelete, kEmpty, kGarble, kDangle };

void mutate(const fs::path& p, Mutation m, std::mt19937& rng) {
  fs::remove(p);
  switch (m) {
    case Mutation::kDelete:
      break;
    case Mutation::kEmpty:
      std::ofstream(p, std::ios::binary);
      break;
    case Mutation::kGarble: {
      std::ofstream out(p, std::ios::binary);
      std::uniform_int_distribution<int> byte(0, 255);
      for (int i = 0; i < 64; ++i) out.put(static_cast<char>(byte(rng)));
      out << "\n-1,zz:99.x 0x 1-0 \xff\n";
      break;
    }
    case Mutation::kDangle:
      fs::create_symlink("nowhere/at/all", p);
      break;
  }
}

// Runs everything the CLI would print and checks the problems.
void check(const fs::path& root, const std::string& what) {
  discover::Discovery d;
  try {
    d = testing::discover_fixture(root);
  } catch (const base::InputError&) {
    return;  // e.g. sys/ itself removed: the root is refused, once, as bad input
  }
  (void)topology::render_matrix(d.host);
  (void)topology::to_json_text(topology::to_json(d.host));
  (void)topology::inventory_yaml(topology::node_spec(d.host));
  const std::set<std::string> unique(d.problems.begin(), d.problems.end());
  EXPECT_EQ(unique.size(), d.problems.size()) << what;
  for (const auto& p : d.problems) {
    EXPECT_EQ(p.find('\n'), std::string::npos) << what << ": " << p;
    EXPECT_NE(p.find(": "), std::string::npos) << what << ": " << p;
  }
}

class Mutations : public ::testing::TestWithParam<std::string> {};

TEST_P(Mutations, NeverCrashAndReportOnce) {
  const testing::TreeCopy copy(GetParam(), "mutate");
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(copy.dir())) {
    if (e.is_regular_file() || e.is_symlink()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  std::mt19937 rng(42);
  // Every file once; a rotating mutation keeps the run short on 2 cores.
  for (std::size_t i = 0; i < files.size(); ++i) {
    const fs::path& f = files[i];
    const fs::path saved = f.string() + ".saved";
    fs::rename(f, saved);
    const auto m = static_cast<Mutation>(i % 4);
    mutate(f, m, rng);
    check(copy.dir(), f.string() + " mutation " + std::to_string(i % 4));
    fs::remove(f);
    fs::rename(saved, f);
  }
}

// A few damages whose report is known: one line, naming the file.
TEST(MutationReports, NamedOnce) {
  const testing::TreeCopy copy("dgx-h100", "named");
  const fs::path numa =
      copy.dir() /
      "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0/numa_node";
  ASSERT_TRUE(fs::exists(numa));
  std::ofstream(numa) << "zero\n";
  std::ofstream(copy.dir() / "nvml.json") << "{\"format\": ";
  const auto d = testing::discover_fixture(copy.dir());
  int numa_lines = 0, nvml_lines = 0;
  for (const auto& p : d.problems) {
    numa_lines += p.find("0000:19:00.0/numa_node") != std::string::npos ? 1 : 0;
    nvml_lines += p.find("nvml.json") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(numa_lines, 1);
  EXPECT_EQ(nvml_lines, 1);
  // The GPUs are still described, from procfs, and the NICs and CPUs unchanged.
  EXPECT_EQ(d.host.gpus.size(), 8u);
  EXPECT_EQ(d.host.nics.size(), 8u);
  EXPECT_EQ(d.host.logical_cpus, 224);
}

TEST(MutationReports, BadRootIsInputError) {
  discover::Options o;
  o.root = "/nonexistent/recording";
  EXPECT_THROW(discover::discover_host(o), base::InputError);
  o.root = ::gpuorch::test::fixtures_dir();  // a directory, but no sys/ inside
  EXPECT_THROW(discover::discover_host(o), base::InputError);
}

INSTANTIATE_TEST_SUITE_P(Topo, Mutations, ::testing::Values("dgx-h100", "mi250", "t4x2", "h200-vm"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace gpuorch
