// gpuorch's YAML inventory: node templates times a count; every bad input is one located line.
#include "gpuorch/io/inventory.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace gpuorch::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Label = std::pair<std::string, std::string>;

TEST(LoadInventory, ExpandsTemplatesTimesCount) {
  const auto nodes = load_inventory(test::fixture("inventory.yaml"));
  ASSERT_EQ(nodes.size(), 6U);
  EXPECT_EQ(nodes[0].name, "g2-0000");
  EXPECT_EQ(nodes[1].name, "g2-0001");
  EXPECT_EQ(nodes[2].name, "t4-0000");
  EXPECT_EQ(nodes[4].name, "t4-0002");
  EXPECT_EQ(nodes[5].name, "cpu-0000");  // count defaults to 1
  EXPECT_EQ(nodes[0].cpu_milli, 96000);
  EXPECT_EQ(nodes[0].memory_mib, 393216);
  EXPECT_EQ(nodes[0].gpu_count, 8);
  EXPECT_EQ(nodes[0].gpu_model, "G2");
  EXPECT_EQ(nodes[0].gpu_memory_mib, 32768);
  EXPECT_THAT(nodes[0].labels, ElementsAre(Label{"gpu-model", "G2"}, Label{"zone", "a"}));
  EXPECT_EQ(nodes[3].gpu_count, 2);
  EXPECT_EQ(nodes[3].gpu_model, "T4");
  EXPECT_EQ(nodes[3].gpu_memory_mib, 0);  // unknown
  EXPECT_EQ(nodes[5].gpu_count, 0);
  EXPECT_TRUE(nodes[5].labels.empty());
}

TEST(ParseInventory, ZeroCountTemplatesAndZeroGpusAreAllowed) {
  const auto nodes = parse_inventory(
      "nodes:\n"
      "  - {name: a, count: 0, cpu_milli: 1, memory_mib: 1}\n"
      "  - {name: b, count: 2, cpu_milli: 1, memory_mib: 1, gpu: {model: T4, count: 0}}\n",
      "inv.yaml");
  ASSERT_EQ(nodes.size(), 2U);
  EXPECT_EQ(nodes[0].name, "b-0000");
  EXPECT_EQ(nodes[0].gpu_count, 0);
  EXPECT_TRUE(nodes[0].labels.empty());
}

TEST(ParseInventory, GpuLinksFromAMatrixOrNvlinkIslands) {
  const auto nodes = parse_inventory(
      "nodes:\n"
      "  - name: pcie\n"
      "    cpu_milli: 1\n"
      "    memory_mib: 1\n"
      "    gpu:\n"
      "      model: T4\n"
      "      count: 3\n"
      "      links:\n"
      "        - [0, 50, 10]\n"
      "        - [50, 0, 10]\n"
      "        - [10, 10, 0]\n"
      "  - name: dgx\n"
      "    cpu_milli: 1\n"
      "    memory_mib: 1\n"
      "    gpu: {model: V100, count: 4, nvlink_islands: [[0, 2], [1]]}\n"
      "  - {name: plain, cpu_milli: 1, memory_mib: 1, gpu: {model: T4, count: 2}}\n",
      "inv.yaml");
  ASSERT_EQ(nodes.size(), 3U);
  EXPECT_THAT(nodes[0].gpu_links, ElementsAre(0, 50, 10, 50, 0, 10, 10, 10, 0));
  // 100 inside an island, 10 between islands and for GPUs in none.
  EXPECT_THAT(nodes[1].gpu_links,
              ElementsAre(0, 10, 100, 10, 10, 0, 10, 10, 100, 10, 0, 10, 10, 10, 10, 0));
  EXPECT_TRUE(nodes[2].gpu_links.empty());  // unknown
}

struct BadYaml {
  std::string name;
  std::string text;
  std::size_t line;  // 0: the whole file
  std::string problem;
};

const std::string kTemplate = "  - name: a\n    cpu_milli: 1000\n    memory_mib: 1000\n";

TEST(ParseInventory, EveryBadInputIsOneLocatedLine) {
  const std::vector<BadYaml> cases{
      {"unknown_root_key", "nodes:\n" + kTemplate + "racks: 3\n", 5,
       "unknown key 'racks' in the inventory"},
      {"unknown_template_key", "nodes:\n" + kTemplate + "    gpus: 8\n", 5,
       "unknown key 'gpus' in a node template"},
      {"unknown_gpu_key",
       "nodes:\n" + kTemplate + "    gpu:\n      model: T4\n      count: 1\n      mig: 7g\n", 8,
       "unknown key 'mig' in 'gpu'"},
      {"not_an_integer", "nodes:\n  - name: a\n    cpu_milli: lots\n    memory_mib: 1000\n", 3,
       "'cpu_milli' must be a whole number"},
      {"fraction", "nodes:\n  - name: a\n    cpu_milli: 1.5\n    memory_mib: 1000\n", 3,
       "'cpu_milli' must be a whole number"},
      {"list_for_integer", "nodes:\n  - name: a\n    cpu_milli: [1, 2]\n    memory_mib: 1000\n", 3,
       "'cpu_milli' must be a single value"},
      {"negative", "nodes:\n" + kTemplate + "    count: -2\n", 5, "'count' is negative"},
      {"huge_count", "nodes:\n" + kTemplate + "    count: 2000000\n", 2,
       "the inventory expands past 100000 nodes (the limit)"},
      {"too_many_gpus", "nodes:\n" + kTemplate + "    gpu: {model: T4, count: 65}\n", 5,
       "'count' above 64 GPUs per node"},
      {"empty_model", "nodes:\n" + kTemplate + "    gpu: {model: '', count: 1}\n", 5,
       "'model' is empty"},
      {"missing_model", "nodes:\n" + kTemplate + "    gpu: {count: 1}\n", 5, "missing key 'model'"},
      {"missing_name", "nodes:\n  - cpu_milli: 1\n    memory_mib: 1\n", 2, "missing key 'name'"},
      {"missing_cpu", "nodes:\n  - name: a\n    memory_mib: 1\n", 2, "missing key 'cpu_milli'"},
      {"name_not_string", "nodes:\n  - name: [a]\n    cpu_milli: 1\n    memory_mib: 1\n", 2,
       "'name' must be a single value"},
      {"empty_name", "nodes:\n  - name: ''\n    cpu_milli: 1\n    memory_mib: 1\n", 2,
       "'name' is empty"},
      {"labels_not_map", "nodes:\n" + kTemplate + "    labels: [a, b]\n", 5,
       "'labels' must be a mapping"},
      {"label_value_not_string", "nodes:\n" + kTemplate + "    labels:\n      zone: [a]\n", 6,
       "the value of 'zone' in 'labels' must be a single value"},
      {"links_and_islands",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      links: [[0, 1], [1, 0]]\n"
           "      nvlink_islands: [[0, 1]]\n",
       9, "give 'links' or 'nvlink_islands', not both"},
      {"links_one_gpu",
       "nodes:\n" + kTemplate + "    gpu:\n      model: T4\n      count: 1\n      links: [[0]]\n",
       8, "'links' needs a 'count' of at least 2 GPUs"},
      {"links_rows",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 3\n      links: [[0, 1, 1], [1, 0, 1]]\n",
       8, "'links' must be a list of 3 rows, one per GPU"},
      {"links_row_length",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      links:\n        - [0, 1]\n        - "
           "[1]\n",
       10, "row 1 of 'links' must be a list of 2 integers"},
      {"links_not_integer",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      links:\n        - [0, fast]\n        "
           "- [1, 0]\n",
       9, "'links' row 0 column 1 must be a whole number"},
      {"links_too_large",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      links:\n        - [0, 256]\n        - "
           "[256, 0]\n",
       9, "'links' row 0 column 1 is 256, outside 0..255"},
      {"links_diagonal",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      links:\n        - [0, 5]\n        - "
           "[5, 7]\n",
       10, "'links' row 1 column 1: the diagonal must be 0"},
      {"links_asymmetric",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      links:\n        - [0, 5]\n        - "
           "[6, 0]\n",
       10, "'links' is not symmetric: row 1 column 0 is 6, row 0 column 1 is 5"},
      {"islands_not_list",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      nvlink_islands: 3\n",
       8, "'nvlink_islands' must be a non-empty list of lists of GPU indices"},
      {"island_empty",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      nvlink_islands:\n        - []\n",
       9, "an NVLink island must be a non-empty list of GPU indices"},
      {"island_gpu_out_of_range",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 2\n      nvlink_islands:\n        - [0, 2]\n",
       9, "a GPU index in 'nvlink_islands' is 2, outside 0..1"},
      {"island_gpu_twice",
       "nodes:\n" + kTemplate +
           "    gpu:\n      model: T4\n      count: 4\n      nvlink_islands:\n        - [0, 1]\n   "
           "     - [2, 1]\n",
       10, "GPU 1 is in 'nvlink_islands' twice"},
      {"gpu_not_map", "nodes:\n" + kTemplate + "    gpu: 8\n", 5, "'gpu' must be a mapping"},
      {"template_not_map", "nodes:\n  - just-a-name\n", 2, "a node template must be a mapping"},
      {"duplicate_template", "nodes:\n" + kTemplate + kTemplate, 5, "duplicate template name 'a'"},
      {"nodes_not_list", "nodes: 3\n", 1, "'nodes' must be a non-empty list"},
      {"nodes_empty", "nodes: []\n", 1, "'nodes' must be a non-empty list"},
      {"root_not_map", "- a\n- b\n", 1, "the inventory must be a mapping"},
      {"syntax_error", "nodes:\n  - name: a\n    cpu_milli: [1000\n    memory_mib: 1\n", 0, ""},
      {"bad_indent", "nodes:\n  - name: a\n   cpu_milli: 1\n", 0, ""},
      {"empty_file", "", 0, "empty inventory"},
      {"only_comments", "# nothing here\n", 0, "empty inventory"},
      {"no_nodes", "nodes:\n  - {name: a, count: 0, cpu_milli: 1, memory_mib: 1}\n", 0,
       "the inventory has no nodes"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string message = test::input_error([&] { parse_inventory(c.text, "inv.yaml"); });
    if (c.line == 0 && c.problem.empty()) {
      // YAML syntax errors: located by the parser, on some line of the file.
      EXPECT_THAT(message, ::testing::MatchesRegex("inv\\.yaml:[0-9]+: .+"));
    } else {
      EXPECT_THAT(message, StartsWith(c.line == 0 ? "inv.yaml: "
                                                  : "inv.yaml:" + std::to_string(c.line) + ": "));
      EXPECT_THAT(message, HasSubstr(c.problem));
    }
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(ParseInventory, SyntaxErrorNamesTheLineOfTheProblem) {
  const std::string message = test::input_error([] {
    parse_inventory("nodes:\n  - name: a\n    cpu_milli: 1\n  memory_mib: : 1\n", "inv.yaml");
  });
  EXPECT_THAT(message, StartsWith("inv.yaml:4: "));
}

TEST(ParseInventory, NonScalarKeysAreInputErrors) {
  // A key that is a list or a mapping is legal YAML but no key of ours.
  EXPECT_THAT(test::input_error([] {
                parse_inventory(
                    "nodes:\n  - name: a\n    cpu_milli: 1\n    memory_mib: 1\n    [x]: 1\n",
                    "inv.yaml");
              }),
              StartsWith("inv.yaml:5: "));
  EXPECT_THAT(test::input_error([] { parse_inventory("? {a: 1}\n: 2\n", "inv.yaml"); }),
              StartsWith("inv.yaml:1: "));
  EXPECT_THAT(test::input_error([] {
                parse_inventory(
                    "nodes:\n  - name: a\n    cpu_milli: 1\n    memory_mib: 1\n    labels:\n"
                    "      [zone]: a\n",
                    "inv.yaml");
              }),
              StartsWith("inv.yaml:6: "));
}

TEST(ParseInventory, MessagesQuotingTheInputStayOneLine) {
  // A quoted key with an escaped newline, and a parser message showing a bad escape.
  EXPECT_EQ(test::input_error([] {
              parse_inventory(
                  "nodes:\n  - name: a\n    cpu_milli: 1\n    memory_mib: 1\n    \"gp\\nu\": 1\n",
                  "inv.yaml");
            }),
            "inv.yaml:5: a key in a node template holds a control character (0x0a) at byte 2");
  const std::string bad_escape =
      test::input_error([] { parse_inventory("nodes:\n  - name: \"a\\\n\"\n", "inv.yaml"); });
  EXPECT_THAT(bad_escape, StartsWith("inv.yaml:"));
  EXPECT_EQ(bad_escape.find('\n'), std::string::npos) << bad_escape;
}

TEST(LoadInventory, MissingAndBinaryFiles) {
  EXPECT_EQ(test::input_error([] { load_inventory("/nonexistent/inv.yaml"); }),
            "/nonexistent/inv.yaml: the inventory cannot be opened: No such file or directory");
  const test::TempDir dir;
  const std::string path = dir.file("inv.yaml");
  test::write_text(path, std::string("nodes:\n\0\0\x01", 10));
  EXPECT_EQ(test::input_error([&] { load_inventory(path); }),
            path + ": not a YAML text file (binary content)");
}

// 50 templates x 1,000,000 nodes in under 5 KB of YAML: refused from the counts alone, before a
// node is made (the expansion itself would take gigabytes).
TEST(ParseInventory, RefusesWhatExpandsPastTheNodeLimitBeforeExpanding) {
  std::string text = "nodes:\n";
  for (int i = 0; i < 50; ++i) {
    text += fmt::format(
        "  - name: t{:02d}\n    count: 1000000\n    cpu_milli: 96000\n    memory_mib: 1\n", i);
  }
  ASSERT_LT(text.size(), 5000U);
  // The first template alone passes the default limit of 100000 nodes: the message names it.
  EXPECT_EQ(test::input_error([&] { parse_inventory(text, "big.yaml"); }),
            "big.yaml:2: the inventory expands past 100000 nodes (the limit)");
  // The check is on the sum: the second template crosses a limit the first stays under.
  const std::string two =
      "nodes:\n  - {name: a, count: 60, cpu_milli: 1, memory_mib: 1}\n"
      "  - {name: b, count: 60, cpu_milli: 1, memory_mib: 1}\n";
  EXPECT_EQ(test::input_error([&] { parse_inventory(two, "two.yaml", InventoryLimits{100}); }),
            "two.yaml:3: the inventory expands past 100 nodes (the limit)");
  EXPECT_EQ(parse_inventory(two, "two.yaml", InventoryLimits{120}).size(), 120U);
}

TEST(ParseInventory, RefusesWhatExpandsPastTheGpuAndByteLimits) {
  const std::string gpus =
      "nodes:\n  - {name: a, count: 20000, cpu_milli: 1, memory_mib: 1, gpu: {model: H100, "
      "count: 64}}\n";
  EXPECT_EQ(test::input_error([&] { parse_inventory(gpus, "g.yaml"); }),
            "g.yaml:2: the inventory expands past 1000000 GPUs (the limit)");
  // Many labels on each of many nodes: few nodes and GPUs, but the labels are copied per node.
  std::string labels =
      "nodes:\n  - name: a\n    count: 100000\n    cpu_milli: 1\n"
      "    memory_mib: 1\n    labels:\n";
  for (int i = 0; i < 200; ++i) labels += fmt::format("      label-{:03d}: value-{:03d}\n", i, i);
  EXPECT_EQ(test::input_error([&] { parse_inventory(labels, "l.yaml"); }),
            "l.yaml:2: the inventory expands past 1024 MiB of nodes (the limit)");
}

TEST(ParseInventory, RefusesControlCharactersInEveryField) {
  const std::string head = "nodes:\n  - name: a\n    cpu_milli: 1\n    memory_mib: 1\n";
  // An ESC that YAML's escapes produce (no raw control byte in the file).
  EXPECT_EQ(test::input_error([&] {
              parse_inventory(head + "    gpu: {model: \"T4\\e[2J\", count: 1}\n", "c.yaml");
            }),
            "c.yaml:5: 'model' holds a control character (0x1b) at byte 2");
  EXPECT_EQ(test::input_error([&] {
              parse_inventory("nodes:\n  - name: \"a\\0b\"\n    cpu_milli: 1\n    memory_mib: 1\n",
                              "c.yaml");
            }),
            "c.yaml:2: 'name' holds a control character (0x00) at byte 1");
  EXPECT_EQ(test::input_error(
                [&] { parse_inventory(head + "    labels: {zone: \"a\\tb\"}\n", "c.yaml"); }),
            "c.yaml:5: the value of 'zone' in 'labels' holds a control character (0x09) at byte 1");
  EXPECT_EQ(
      test::input_error([&] { parse_inventory(head + "    labels: {\"z\\x9b\": a}\n", "c.yaml"); }),
      "c.yaml:5: a key in 'labels' holds a control character (0x9b) at byte 1");
  EXPECT_EQ(test::input_error([&] { parse_inventory(head + "    \"x\\ay\": 1\n", "c.yaml"); }),
            "c.yaml:5: a key in a node template holds a control character (0x07) at byte 1");
}

}  // namespace
}  // namespace gpuorch::io
