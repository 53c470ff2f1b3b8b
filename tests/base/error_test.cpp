#include "gpuorch/base/error.hpp"

#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace gpuorch::base {
namespace {

TEST(FailInput, FormatsFileLineAndProblem) {
  EXPECT_EQ(test::input_error([] { fail_input("a.csv", 12, "bad value"); }), "a.csv:12: bad value");
}

TEST(FailInput, LineZeroMeansTheWholeFile) {
  EXPECT_EQ(test::input_error([] { fail_input("a.csv", 0, "empty file"); }), "a.csv: empty file");
}

TEST(FailInput, ProblemWithoutLocationIsKeptAsIs) {
  EXPECT_EQ(test::input_error([] { fail_input("--seeds: bad range"); }), "--seeds: bad range");
}

TEST(FailInput, MessageStaysOneLineWhenItQuotesControlCharacters) {
  EXPECT_EQ(test::input_error([] { fail_input("a.yaml", 3, "unknown key 'a\nb'"); }),
            "a.yaml:3: unknown key 'a\\nb'");
  EXPECT_EQ(test::input_error([] { fail_input("a.csv", 0, "bad\r\tvalue\x01"); }),
            "a.csv: bad\\r\\x09value\\x01");
  EXPECT_EQ(test::input_error([] { fail_input("two\nlines"); }), "two\\nlines");
}

TEST(InputError, IsARuntimeError) {
  const InputError e("x");
  const std::runtime_error& base = e;
  EXPECT_STREQ(base.what(), "x");
}

}  // namespace
}  // namespace gpuorch::base
