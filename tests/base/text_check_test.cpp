// Control characters in field values: found anywhere in the value, reported with file:line.
#include "gpuorch/base/text_check.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/base/json_check.hpp"
#include "support/test_support.hpp"

namespace gpuorch::base {
namespace {

using namespace std::string_literals;

TEST(FindControl, FindsC0DelAndUtf8C1ButNotText) {
  EXPECT_EQ(find_control("Tesla T4"), std::string_view::npos);
  EXPECT_EQ(find_control("gpu-\xc3\xa9t\xc3\xa9"), std::string_view::npos);  // "été": UTF-8 text
  EXPECT_EQ(find_control("\xe2\x82\xac"), std::string_view::npos);              // the euro sign
  EXPECT_EQ(find_control("ab\x1b[2J"), 2U);
  EXPECT_EQ(find_control("a\0b"s), 1U);
  EXPECT_EQ(find_control("abc\x7f"), 3U);
  EXPECT_EQ(find_control("x\xc2\x9b" "2J"), 1U);  // U+009B, the 8-bit CSI
  EXPECT_EQ(find_control("a\tb"), 1U);
  EXPECT_EQ(find_control("a\tb", true), std::string_view::npos);
  EXPECT_EQ(find_control("a\tb\n", true), 3U);
}

TEST(RequireNoControl, NamesFileLineFieldAndByte) {
  EXPECT_NO_THROW(require_no_control("pod-1", "p.csv", 3, "column 'name'"));
  EXPECT_EQ(test::input_error([] { require_no_control("p\x1b", "p.csv", 3, "column 'name'"); }),
            "p.csv:3: column 'name' holds a control character (0x1b) at byte 1");
  EXPECT_EQ(test::input_error([] { require_no_control("\xc2\x85", "f", 0, "x"); }),
            "f: x holds a control character (0x85) at byte 0");
}

TEST(RequireNoControlJson, FindsEscapedControlsInKeysAndValuesAtAnyDepth) {
  EXPECT_NO_THROW(require_no_control_json(nlohmann::json::parse(R"({"a": ["x", {"b": "y"}]})"), "t.json"));
  const auto value = nlohmann::json::parse(R"({"gpus": [{"model": "T4"}, {"model": "T4\u001b[2J"}]})");
  EXPECT_EQ(test::input_error([&] { require_no_control_json(value, "t.json"); }),
            "t.json: /gpus/1/model holds a control character (0x1b) at byte 2");
  const auto key = nlohmann::json::parse(R"({"nics": {"e\u0000th": 1}})");
  EXPECT_EQ(test::input_error([&] { require_no_control_json(key, "t.json"); }),
            "t.json: a key in /nics holds a control character (0x00) at byte 1");
  EXPECT_EQ(test::input_error([] { require_no_control_json("\t", "t.json"); }),
            "t.json: / holds a control character (0x09) at byte 0");
  // Deep nesting is walked without recursion.
  nlohmann::json deep = "bad\x01";
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  EXPECT_THAT(test::input_error([&] { require_no_control_json(deep, "d.json"); }),
              ::testing::HasSubstr("holds a control character (0x01) at byte 3"));
}

}  // namespace
}  // namespace gpuorch::base
