// The one strict YAML reader: every refusal is "file:line: what", whatever yaml-cpp would have
// thrown, and it is the only place in src/ that parses YAML.
#include "gpuorch/base/yaml_reader.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::base {
namespace {

using namespace std::string_literals;

const YamlReader kReader("c.yaml");

TEST(YamlReader, SyntaxErrorsAndBinaryContentAreOneLineWithTheirLine) {
  EXPECT_EQ(test::input_error([] { (void)kReader.load("a: [1, 2\nb: 3\n"); }).rfind("c.yaml:", 0),
            0U);
  EXPECT_NE(
      test::input_error([] { (void)kReader.load("a: [1, 2\nb: 3\n"); }).find("not valid YAML"),
      std::string::npos);
  EXPECT_EQ(test::input_error([] { (void)kReader.load("a: 1\n\0b"s); }),
            "c.yaml: not a YAML text file (binary content)");
}

TEST(YamlReader, OnlyKnownKeysThatAreNames) {
  const YAML::Node doc = kReader.load("a: 1\nb: 2\n");
  EXPECT_NO_THROW(kReader.only_keys(doc, "the config", {"a", "b", "c"}));
  EXPECT_EQ(test::input_error([&] { kReader.only_keys(doc, "the config", {"a"}); }),
            "c.yaml:2: unknown key 'b' in the config (known: a)");
  // A key that is a list: yaml-cpp's own conversion says "bad conversion" without a line.
  const YAML::Node listed = kReader.load("x: 1\n[a]: 1\n");
  EXPECT_EQ(test::input_error([&] { kReader.only_keys(listed, "flags", {"x"}); }),
            "c.yaml:2: a key in flags must be a name");
  EXPECT_EQ(test::input_error([&] { kReader.only_keys(kReader.load("- 1\n"), "flags", {}); }),
            "c.yaml:1: flags must be a mapping");
  const YAML::Node escaped = kReader.load("\"a\\eb\": 1\n");
  EXPECT_EQ(test::input_error([&] { kReader.only_keys(escaped, "flags", {"ab"}); }),
            "c.yaml:1: a key in flags holds a control character (0x1b) at byte 1");
}

TEST(YamlReader, ScalarsBooleansAndStrings) {
  const YAML::Node doc = kReader.load("s: hi\nl: [a, b]\nt: True\nf: no\nesc: \"x\\e\"\n");
  EXPECT_EQ(kReader.scalar(doc["s"], "s"), "hi");
  EXPECT_EQ(test::input_error([&] { (void)kReader.scalar(doc["l"], "l"); }),
            "c.yaml:2: l must be a single value");
  EXPECT_TRUE(kReader.boolean(doc["t"], "t"));
  EXPECT_EQ(test::input_error([&] { (void)kReader.boolean(doc["f"], "f"); }),
            "c.yaml:4: f must be true or false, not 'no'");
  EXPECT_EQ(test::input_error([&] { (void)kReader.scalar(doc["esc"], "esc"); }),
            "c.yaml:5: esc holds a control character (0x1b) at byte 1");
  EXPECT_EQ(kReader.strings(doc["l"], "l"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(kReader.strings(doc["s"], "s"), (std::vector<std::string>{"hi"}));
}

TEST(YamlReader, IntegersAreDecimalWholeNumbersInRange) {
  const YAML::Node doc =
      kReader.load("a: 42\nb: -7\nc: +5\nd: 1e400\ne: 0x10\nf: 1.0\ng: 99999999999999999999\n");
  EXPECT_EQ(kReader.integer(doc["a"], "a"), 42);
  EXPECT_EQ(kReader.integer(doc["b"], "b"), -7);
  EXPECT_EQ(kReader.integer(doc["c"], "c"), 5);
  EXPECT_EQ(test::input_error([&] { (void)kReader.integer(doc["a"], "a", 0, 10); }),
            "c.yaml:1: a is 42, outside 0..10");
  EXPECT_EQ(test::input_error([&] { (void)kReader.integer(doc["d"], "d"); }),
            "c.yaml:4: d must be a whole number, not '1e400'");
  EXPECT_EQ(test::input_error([&] { (void)kReader.integer(doc["e"], "e"); }),
            "c.yaml:5: e must be a whole number, not '0x10'");
  EXPECT_EQ(test::input_error([&] { (void)kReader.integer(doc["f"], "f"); }),
            "c.yaml:6: f must be a whole number, not '1.0'");
  EXPECT_NE(test::input_error([&] {
              (void)kReader.integer(doc["g"], "g");
            }).find("c.yaml:7: g is 99999999999999999999, outside"),
            std::string::npos);
}

TEST(YamlReader, StringMapKeepsOrderAndChecksBothSides) {
  const YAML::Node doc = kReader.load("m: {zone: a, rack: r1}\nbad: {zone: [a]}\n");
  const auto m = kReader.string_map(doc["m"], "'labels'");
  ASSERT_EQ(m.size(), 2U);
  EXPECT_EQ(m[0], (std::pair<std::string, std::string>{"zone", "a"}));
  EXPECT_EQ(test::input_error([&] { (void)kReader.string_map(doc["bad"], "'labels'"); }),
            "c.yaml:2: the value of 'zone' in 'labels' must be a single value");
}

// Every YAML file gpuorch reads (inventory, device-plugin config, kubeconfig, kubelet config)
// goes through this reader: no other YAML::Load in src/.
TEST(YamlReader, IsTheOnlyYamlParserInSrc) {
  const std::filesystem::path src = std::filesystem::path(::gpuorch::test::source_dir()) / "src";
  const std::regex parse(R"(YAML::(Load|LoadFile|LoadAll|LoadAllFromFile)\s*\()");
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    if (!e.is_regular_file() || e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    std::stringstream s;
    s << in.rdbuf();
    ++files;
    if (e.path().filename() == "yaml_reader.cpp") continue;
    EXPECT_FALSE(std::regex_search(s.str(), parse)) << e.path();
  }
  EXPECT_GT(files, 100);
}

}  // namespace
}  // namespace gpuorch::base
