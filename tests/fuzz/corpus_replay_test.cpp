// Each fuzz target (fuzz/<target>.cpp, entry point renamed gpuorch_fuzz_<target> by
// tests/CMakeLists.txt) on every input of its seed corpus fuzz/corpus/<target>/: the target's own
// promise (only InputError, no crash, no sanitizer report) holds on the inputs that once mattered,
// including the crashes the fuzzers found. A target without a corpus, or a corpus without a
// target here, fails.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "support/paths.hpp"
#include "support/test_support.hpp"

using FuzzEntry = int (*)(const std::uint8_t*, std::size_t);
#define GPUORCH_FUZZ_TARGETS(X) \
  X(api_path)                   \
  X(cel_selector)               \
  X(device_plugin_config)       \
  X(dra_claims)                 \
  X(dra_objects)                \
  X(etcd_answer)                \
  X(extender_requests)          \
  X(inventory)                  \
  X(k8s_objects)                \
  X(nccl_log)                   \
  X(openb_nodes)                \
  X(openb_pods) X(prometheus) X(sysfs_recording) X(tcp_store) X(topology_json) X(torch_rdzv_state)
#define GPUORCH_DECLARE(name) extern "C" int gpuorch_fuzz_##name(const std::uint8_t*, std::size_t);
GPUORCH_FUZZ_TARGETS(GPUORCH_DECLARE)
#undef GPUORCH_DECLARE

namespace gpuorch {
namespace {

namespace fs = std::filesystem;
const fs::path kFuzz = fs::path(::gpuorch::test::source_dir()) / "fuzz";

const std::map<std::string, FuzzEntry>& targets() {
#define GPUORCH_ENTRY(name) {#name, &gpuorch_fuzz_##name},
  static const std::map<std::string, FuzzEntry> t = {GPUORCH_FUZZ_TARGETS(GPUORCH_ENTRY)};
#undef GPUORCH_ENTRY
  return t;
}

TEST(FuzzCorpus, EveryTargetHasACorpusAndEveryCorpusATarget) {
  std::set<std::string> sources, corpora, listed;
  for (const auto& e : fs::directory_iterator(kFuzz)) {
    if (e.path().extension() == ".cpp") sources.insert(e.path().stem().string());
  }
  for (const auto& e : fs::directory_iterator(kFuzz / "corpus")) {
    if (e.is_directory()) corpora.insert(e.path().filename().string());
  }
  for (const auto& [name, entry] : targets()) listed.insert(name);
  EXPECT_EQ(sources, corpora) << "fuzz/<target>.cpp and fuzz/corpus/<target>/ must pair up";
  EXPECT_EQ(sources, listed) << "list each fuzz target in GPUORCH_FUZZ_TARGETS";
}

class FuzzCorpusReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzCorpusReplay, EveryInputKeepsTheTargetsPromise) {
  const FuzzEntry entry = targets().at(GetParam());
  int inputs = 0;
  for (const auto& e : fs::recursive_directory_iterator(kFuzz / "corpus" / GetParam())) {
    if (!e.is_regular_file()) continue;
    const std::string bytes = test::read_text(e.path().string());
    SCOPED_TRACE(e.path().string());
    // libFuzzer treats a non-zero return as "reject the input"; every target returns 0.
    EXPECT_EQ(entry(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
    ++inputs;
  }
  EXPECT_GT(inputs, 0) << "empty corpus";
}

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : targets()) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzCorpusReplay, ::testing::ValuesIn(target_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace gpuorch
