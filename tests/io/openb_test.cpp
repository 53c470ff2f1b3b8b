// The openb trace loaders: good files, and every kind of bad input reported once as
// "file:line: problem" (InputError).
#include "gpuorch/io/openb.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>

#include "gpuorch/cluster/cluster.hpp"
#include "support/test_support.hpp"

namespace gpuorch::io {
namespace {

using test::fixture;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::string_literals;

const std::string kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n";
const std::string kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";

TEST(LoadOpenbNodes, ReadsTheFixture) {
  const auto nodes = load_openb_nodes(fixture("openb_nodes.csv"));
  ASSERT_EQ(nodes.size(), 5U);
  EXPECT_EQ(nodes[0].name, "node-a");
  EXPECT_EQ(nodes[0].cpu_milli, 64000);
  EXPECT_EQ(nodes[0].memory_mib, 262144);
  EXPECT_EQ(nodes[0].gpu_count, 8);
  EXPECT_EQ(nodes[0].gpu_model, "G2");
  EXPECT_THAT(nodes[0].labels, ElementsAre(std::pair<std::string, std::string>{"gpu-model", "G2"}));
  EXPECT_EQ(nodes[3].name, "node-d");  // a CPU-only node
  EXPECT_EQ(nodes[3].gpu_count, 0);
  EXPECT_EQ(nodes[3].gpu_model, "");
  EXPECT_TRUE(nodes[3].labels.empty());
  EXPECT_EQ(nodes[4].gpu_model, "V100M16");
}

TEST(LoadOpenbNodes, ModelOfANodeWithoutGpusIsDropped) {
  const test::TempDir dir;
  const std::string path = dir.file("n.csv");
  test::write_text(path, kNodeHeader + "x,1000,1000,0,T4\n");
  const auto nodes = load_openb_nodes(path);
  ASSERT_EQ(nodes.size(), 1U);
  EXPECT_EQ(nodes[0].gpu_model, "");
}

TEST(LoadOpenbPods, ReadsTheElevenColumnFixture) {
  const PodTrace t = load_openb_pods(fixture("openb_pods.csv"));
  EXPECT_EQ(t.path, fixture("openb_pods.csv"));
  ASSERT_EQ(t.pods.size(), 8U);
  EXPECT_THAT(t.lines, ElementsAre(2U, 3U, 4U, 5U, 6U, 7U, 8U, 9U));
  EXPECT_EQ(t.pods[0].name, "pod-00");
  EXPECT_EQ(t.pods[0].cpu_milli, 12000);
  EXPECT_EQ(t.pods[0].memory_mib, 16384);
  EXPECT_EQ(t.pods[0].gpu_count, 1);
  EXPECT_EQ(t.pods[0].gpu_milli, 1000);
  EXPECT_TRUE(t.pods[0].allowed_models.empty());
  EXPECT_EQ(t.pods[1].gpu_milli, 460);
  // A CPU-only pod has no model constraint whatever gpu_spec says.
  EXPECT_TRUE(t.pods[2].cpu_only());
  EXPECT_TRUE(t.pods[2].allowed_models.empty());
  // gpu_spec is a '|'-separated list; empty parts are dropped.
  EXPECT_THAT(t.pods[3].allowed_models, ElementsAre("V100M16", "T4"));
  EXPECT_THAT(t.pods[4].allowed_models, ElementsAre("T4"));
  EXPECT_THAT(t.pods[6].allowed_models, ElementsAre("P100"));
  EXPECT_EQ(t.pods[7].gpu_count, 8);
}

TEST(LoadOpenbPods, ReadsTheFiveColumnFixture) {
  const PodTrace t = load_openb_pods(fixture("openb_pods_5col.csv"));
  ASSERT_EQ(t.pods.size(), 4U);
  EXPECT_EQ(t.pods[1].name, "pod-b");
  EXPECT_EQ(t.pods[1].gpu_milli, 460);
  EXPECT_EQ(t.pods[3].gpu_count, 4);
  for (const auto& p : t.pods) EXPECT_TRUE(p.allowed_models.empty());
}

TEST(LoadOpenbPods, ToleratesCrLfAndBlankLines) {
  const test::TempDir dir;
  const std::string path = dir.file("p.csv");
  test::write_text(
      path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\r\n\r\na,1,2,1,500\r\n\nb,1,2,0,0\r\n");
  const PodTrace t = load_openb_pods(path);
  ASSERT_EQ(t.pods.size(), 2U);
  EXPECT_THAT(t.lines, ElementsAre(3U, 5U));
}

// Writes `text` into a file and returns the loader's error message, which must be one line
// starting with "<path>:<line>: " (or "<path>: " for problems of the whole file).
struct BadInput {
  std::string name;
  std::string text;
  std::size_t line;  // 0: the whole file
  std::string problem;
};

void check_bad(const BadInput& bad, bool pods) {
  SCOPED_TRACE(bad.name);
  const test::TempDir dir;
  const std::string path = dir.file(bad.name + ".csv");
  test::write_text(path, bad.text);
  const std::string message = test::input_error([&] {
    if (pods) {
      load_openb_pods(path);
    } else {
      load_openb_nodes(path);
    }
  });
  const std::string where =
      bad.line == 0 ? path + ": " : path + ":" + std::to_string(bad.line) + ": ";
  EXPECT_THAT(message, StartsWith(where));
  EXPECT_THAT(message, HasSubstr(bad.problem));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(LoadOpenbPods, EveryBadInputIsOneLocatedLine) {
  const std::string ok = "a,1000,100,1,500,,LS,Running,0,1,2\n";
  const std::vector<BadInput> cases{
      {"missing_column", kPodHeader + ok + "b,1000,100,1,500,,LS,Running,0,1\n", 3,
       "expected 11 columns"},
      {"extra_column", kPodHeader + ok + ok + "c,1000,100,1,500,,LS,Running,0,1,2,3\n", 4,
       "found 12"},
      {"wrong_header", "name,cpu,memory_mib,num_gpu,gpu_milli\nx,1,1,0,0\n", 1,
       "header is 'name,cpu,memory_mib,num_gpu,gpu_milli', expected 'name,cpu_milli,"},
      {"header_width", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nx,1,1,0,0,\n", 1,
       "header has 6 columns, expected 5"},
      {"not_a_number", kPodHeader + ok + "b,12k,100,1,500,,LS,Running,0,1,2\n", 3,
       "column 'cpu_milli': '12k' is not an integer"},
      {"fraction", kPodHeader + "b,1000,100,1,0.5,,LS,Running,0,1,2\n", 2,
       "column 'gpu_milli': '0.5' is not an integer"},
      {"negative", kPodHeader + ok + "b,1000,-100,1,500,,LS,Running,0,1,2\n", 3,
       "column 'memory_mib': -100 is negative"},
      {"milli_above_1000", kPodHeader + "b,1000,100,1,1001,,LS,Running,0,1,2\n", 2,
       "gpu_milli 1001 is above 1000"},
      {"huge_number", kPodHeader + "b,99999999999999999999999,100,1,500,,LS,Running,0,1,2\n", 2,
       "out of range"},
      {"empty_number", kPodHeader + "b,,100,1,500,,LS,Running,0,1,2\n", 2,
       "column 'cpu_milli' is empty"},
      {"gpus_without_milli", kPodHeader + "b,1000,100,2,0,,LS,Running,0,1,2\n", 2,
       "num_gpu is 2 but gpu_milli is 0"},
      {"milli_without_gpus", kPodHeader + "b,1000,100,0,300,,LS,Running,0,1,2\n", 2,
       "gpu_milli is 300 but num_gpu is 0"},
      {"shared_multi_gpu", kPodHeader + "b,1000,100,2,500,,LS,Running,0,1,2\n", 2,
       "must ask for one GPU, not 2"},
      {"too_many_gpus", kPodHeader + "b,1000,100,65,1000,,LS,Running,0,1,2\n", 2,
       "num_gpu 65 is above 64"},
      {"empty_name", kPodHeader + ",1000,100,1,500,,LS,Running,0,1,2\n", 2,
       "column 'name' is empty"},
      {"duplicate_name", kPodHeader + ok + "b,1,1,0,0,,,,,,\n\n" + ok, 5, "duplicate pod name 'a'"},
      {"empty_file", "", 0, "empty file"},
      {"blank_file", "\n\n", 0, "empty file"},
      {"header_only", kPodHeader, 0, "no pods (header only)"},
      {"binary",
       "\x7f"
       "ELF\x02\x01\x01\0\0\0garbage"s,
       0, "binary content"},
      {"nul_in_row", kPodHeader + "a,1000,1\0\0,1,500,,LS,R,0,1,2\n"s, 0, "binary content"},
      {"unterminated_quote", kPodHeader + "\"a,1000,100,1,500,,LS,Running,0,1,2\n", 2,
       "expected 11 columns"},
  };
  for (const auto& c : cases) check_bad(c, true);
}

TEST(LoadOpenbNodes, EveryBadInputIsOneLocatedLine) {
  const std::vector<BadInput> cases{
      {"wrong_header", "sn,cpu_milli,memory_mib,gpus,model\nx,1,1,1,T4\n", 1,
       "header is 'sn,cpu_milli,memory_mib,gpus,model', expected "
       "'sn,cpu_milli,memory_mib,gpu,model'"},
      {"header_width", "sn,cpu_milli,memory_mib,gpu\nx,1,1,1\n", 1, "header is"},
      {"missing_column", kNodeHeader + "x,1000,1000,1\n", 2, "expected 5 columns"},
      {"extra_column", kNodeHeader + "x,1000,1000,1,T4\ny,1000,1000,1,T4,zone\n", 3, "found 6"},
      {"not_a_number", kNodeHeader + "x,1000,lots,1,T4\n", 2,
       "column 'memory_mib': 'lots' is not an integer"},
      {"negative", kNodeHeader + "x,-1000,1000,1,T4\n", 2, "column 'cpu_milli': -1000 is negative"},
      {"gpus_without_model", kNodeHeader + "x,1000,1000,2,\n", 2,
       "node has GPUs but column 'model' is empty"},
      {"too_many_gpus", kNodeHeader + "x,1000,1000,65,T4\n", 2, "65 GPUs on one node"},
      {"duplicate_name", kNodeHeader + "x,1,1,1,T4\ny,1,1,1,T4\nx,1,1,1,T4\n", 4,
       "duplicate node name 'x'"},
      {"empty_name", kNodeHeader + ",1,1,1,T4\n", 2, "column 'sn' is empty"},
      {"empty_file", "", 0, "empty file"},
      {"header_only", kNodeHeader, 0, "no nodes (header only)"},
      {"binary", "PK\x03\x04\x14\0\x08\0"s, 0, "binary content"},
  };
  for (const auto& c : cases) check_bad(c, false);
}

// The first 8 KiB look like text; the control byte comes later, in a field kept for output.
TEST(LoadOpenb, ControlCharactersPastTheFirstBytesNameTheirLineAndColumn) {
  std::string nodes = kNodeHeader;
  for (int i = 0; i < 400; ++i) nodes += fmt::format("node-{:04d},64000,262144,8,V100\n", i);
  ASSERT_GT(nodes.size(), 8192U);
  check_bad({"esc_in_model", nodes + "evil,1000,1000,1,T4\x1b[2J\n", 402,
             "column 'model' holds a control character (0x1b) at byte 2"},
            false);
  std::string pods = kPodHeader;
  for (int i = 0; i < 300; ++i) pods += fmt::format("pod-{:04d},1000,100,1,500,,LS,R,0,1,2\n", i);
  ASSERT_GT(pods.size(), 8192U);
  check_bad({"nul_in_name", pods + "p\0d,1000,100,1,500,,LS,R,0,1,2\n"s, 302,
             "column 'name' holds a control character (0x00) at byte 1"},
            true);
  check_bad({"tab_in_spec", pods + "pod-x,1000,100,1,500,A\tB,LS,R,0,1,2\n"s, 302,
             "column 'gpu_spec' holds a control character (0x09) at byte 1"},
            true);
}

// A 10 MB line is refused at kCsvMaxLineBytes while it is read: the reader never holds it whole
// (before, one such line of commas took 560 MB).
TEST(LoadOpenb, ALineOverTheMaximumIsRefusedWithoutBufferingIt) {
  const test::TempDir dir;
  const std::string path = dir.file("long.csv");
  {
    std::ofstream out(path, std::ios::binary);
    out << kNodeHeader << "a,1,1,1,T4\n";
    const std::string commas(1 << 20, ',');
    for (int i = 0; i < 10; ++i) out << commas;
    out << "\n";
  }
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  EXPECT_EQ(test::input_error([&] { load_openb_nodes(path); }),
            fmt::format("{}:3: line longer than {} bytes", path, base::kCsvMaxLineBytes));
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 16 * 1024);  // KiB
}

TEST(LoadOpenb, MissingFileIsAnInputError) {
  EXPECT_EQ(test::input_error([] { load_openb_pods("/nonexistent/pods.csv"); }),
            "/nonexistent/pods.csv: the CSV file cannot be opened: No such file or directory");
  EXPECT_EQ(test::input_error([] { load_openb_nodes("/nonexistent/nodes.csv"); }),
            "/nonexistent/nodes.csv: the CSV file cannot be opened: No such file or directory");
}

TEST(UnknownModelWarnings, OneLinePerMissingModelAtItsFirstLine) {
  const test::TempDir dir;
  const std::string path = dir.file("p.csv");
  test::write_text(path, kPodHeader + "a,1,1,1,500,T4,,,,,\n" + "b,1,1,1,500,H100|T4,,,,,\n" +
                             "c,1,1,0,0,A100,,,,,\n" + "d,1,1,2,1000,H100,,,,,\n" +
                             "e,1,1,1,1000,A100,,,,,\n");
  const PodTrace t = load_openb_pods(path);
  const cluster::Cluster c(load_openb_nodes(fixture("openb_nodes.csv")));
  EXPECT_THAT(
      unknown_model_warnings(t, c),
      ElementsAre(path + ":6: warning: GPU model 'A100' is not in the cluster (1 pod names it)",
                  path + ":3: warning: GPU model 'H100' is not in the cluster (2 pods name it)"));
  const PodTrace fine = load_openb_pods(fixture("openb_pods.csv"));
  EXPECT_TRUE(unknown_model_warnings(fine, c).empty());
}

}  // namespace
}  // namespace gpuorch::io
