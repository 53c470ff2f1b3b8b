#include "gpuorch/base/csv.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/test_support.hpp"

namespace gpuorch::base {
namespace {

using test::input_error;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseCsv, ReadsHeaderAndRowsWithTheirLineNumbers) {
  const CsvTable t = parse_csv("a,b,c\n1,2,3\n\n4,5,6\n", "f.csv");
  EXPECT_EQ(t.path, "f.csv");
  EXPECT_THAT(t.header, ElementsAre("a", "b", "c"));
  ASSERT_EQ(t.rows.size(), 2U);
  EXPECT_EQ(t.rows[0].line, 2U);
  EXPECT_THAT(t.rows[0].fields, ElementsAre("1", "2", "3"));
  EXPECT_EQ(t.rows[1].line, 4U);  // the blank line 3 is skipped but counted
  EXPECT_THAT(t.rows[1].fields, ElementsAre("4", "5", "6"));
}

TEST(ParseCsv, AcceptsCrLfAndNoFinalNewline) {
  const CsvTable t = parse_csv("a,b\r\n1,2\r\n3,4", "f.csv");
  ASSERT_EQ(t.rows.size(), 2U);
  EXPECT_THAT(t.rows[0].fields, ElementsAre("1", "2"));
  EXPECT_THAT(t.rows[1].fields, ElementsAre("3", "4"));
}

TEST(ParseCsv, KeepsEmptyFieldsAndUnquotesQuotedOnes) {
  const CsvTable t = parse_csv("a,b,c\n,\"x,y\",\"say \"\"hi\"\"\"\n", "f.csv");
  ASSERT_EQ(t.rows.size(), 1U);
  EXPECT_THAT(t.rows[0].fields, ElementsAre("", "x,y", "say \"hi\""));
}

TEST(CsvField, QuotesOnlyWhatNeedsItAndReadsBack) {
  EXPECT_EQ(csv_field("openb-pod-0001"), "openb-pod-0001");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  const std::string text =
      "name,models\n" + csv_field("pod, \"x\"") + "," + csv_field("A|B") + "\n";
  const CsvTable t = parse_csv(text, "t.csv");
  ASSERT_EQ(t.rows.size(), 1U);
  EXPECT_EQ(t.rows[0].fields, (std::vector<std::string>{"pod, \"x\"", "A|B"}));
}

TEST(ParseCsv, RowWithWrongFieldCountNamesItsLine) {
  EXPECT_EQ(input_error([] { parse_csv("a,b\n1,2\n1,2,3\n", "f.csv"); }),
            "f.csv:3: expected 2 columns (a,b), found 3");
  EXPECT_EQ(input_error([] { parse_csv("a,b\n\n\n1\n", "f.csv"); }),
            "f.csv:4: expected 2 columns (a,b), found 1");
}

TEST(ParseCsv, RejectsEmptyAndBinaryText) {
  EXPECT_EQ(input_error([] { parse_csv("", "f.csv"); }), "f.csv: empty file (no header line)");
  EXPECT_EQ(input_error([] { parse_csv("\n\r\n\n", "f.csv"); }),
            "f.csv: empty file (no header line)");
  EXPECT_THAT(input_error([] { parse_csv(std::string("a,b\n1,\0\n", 8), "f.csv"); }),
              HasSubstr("f.csv: not a text CSV file"));
  EXPECT_THAT(input_error([] { parse_csv("a,b\n1,\x01\n", "f.csv"); }),
              HasSubstr("binary content"));
}

TEST(ParseCsv, RefusesALineOverTheMaximumAndControlCharactersInAnyField) {
  const std::string long_line(kCsvMaxLineBytes + 1, 'x');
  EXPECT_EQ(input_error([&] { parse_csv("a\n" + long_line + "\n", "f.csv"); }),
            fmt::format("f.csv:2: line longer than {} bytes", kCsvMaxLineBytes));
  // Exactly the maximum, with a CR before the LF, is taken.
  const std::string longest(kCsvMaxLineBytes, 'y');
  EXPECT_EQ(parse_csv("a\r\n" + longest + "\r\n", "f.csv").rows.at(0).fields.at(0), longest);
  std::string text = "a,b\n";
  while (text.size() < 9000) text += "1,2\n";
  EXPECT_EQ(input_error([&] { parse_csv(text + "1,x\x1b[2J\n", "f.csv"); }),
            fmt::format("f.csv:{}: column 'b' holds a control character (0x1b) at byte 1",
                        (text.size() - 4) / 4 + 2));
  EXPECT_EQ(input_error([] { parse_csv("a,b\x7f\n", "f.csv"); }),
            "f.csv:1: field 2 holds a control character (0x7f) at byte 1");
  EXPECT_EQ(input_error([] { parse_csv("a\n\"x\ty\"\n", "f.csv"); }),
            "f.csv:2: column 'a' holds a control character (0x09) at byte 1");
}

// The streamed reader gives the same table and the same errors as the one on text in memory,
// whatever way its 64 KiB reads cut the lines.
TEST(ReadCsv, StreamsLongFilesLikeParseCsv) {
  const test::TempDir dir;
  const std::string path = dir.file("t.csv");
  std::string text = "name,value\r\n";
  for (int i = 0; text.size() < 300'000; ++i) {
    text += fmt::format("row-{},{}\r\n", i, std::string(static_cast<std::size_t>(i % 5000), 'v'));
  }
  test::write_text(path, text);
  const CsvTable streamed = read_csv(path);
  const CsvTable parsed = parse_csv(text, path);
  ASSERT_EQ(streamed.rows.size(), parsed.rows.size());
  for (std::size_t i = 0; i < parsed.rows.size(); ++i) {
    EXPECT_EQ(streamed.rows[i].line, parsed.rows[i].line);
    EXPECT_EQ(streamed.rows[i].fields, parsed.rows[i].fields);
  }
  test::write_text(path, text + std::string(kCsvMaxLineBytes + 2, 'z'));  // no final newline
  EXPECT_EQ(input_error([&] { read_csv(path); }),
            fmt::format("{}:{}: line longer than {} bytes", path, parsed.rows.size() + 2,
                        kCsvMaxLineBytes));
}

TEST(ReadCsv, ReadsAFileAndReportsAMissingOne) {
  const test::TempDir dir;
  const std::string path = dir.file("t.csv");
  test::write_text(path, "x\n7\n");
  const CsvTable t = read_csv(path);
  EXPECT_EQ(t.path, path);
  ASSERT_EQ(t.rows.size(), 1U);
  EXPECT_EQ(t.rows[0].fields[0], "7");
  EXPECT_EQ(input_error([&] { read_csv(dir.file("missing.csv")); }),
            dir.file("missing.csv") + ": the CSV file cannot be opened: No such file or directory");
}

TEST(ParseNonnegativeInt, ParsesAndRejectsWithColumnAndLine) {
  const CsvTable t = parse_csv(
      "n,v\nok,42\nzero,0\nneg,-3\nword,abc\nfrac,1.5\nplus,+1\nempty,\nhuge,"
      "99999999999999999999\nspace, 4\n",
      "f.csv");
  EXPECT_EQ(parse_nonnegative_int(t, t.rows[0], 1), 42);
  EXPECT_EQ(parse_nonnegative_int(t, t.rows[1], 1), 0);
  EXPECT_EQ(input_error([&] { parse_nonnegative_int(t, t.rows[2], 1); }),
            "f.csv:4: column 'v': -3 is negative");
  EXPECT_EQ(input_error([&] { parse_nonnegative_int(t, t.rows[3], 1); }),
            "f.csv:5: column 'v': 'abc' is not an integer");
  EXPECT_EQ(input_error([&] { parse_nonnegative_int(t, t.rows[4], 1); }),
            "f.csv:6: column 'v': '1.5' is not an integer");
  EXPECT_EQ(input_error([&] { parse_nonnegative_int(t, t.rows[5], 1); }),
            "f.csv:7: column 'v': '+1' is not an integer");
  EXPECT_EQ(input_error([&] { parse_nonnegative_int(t, t.rows[6], 1); }),
            "f.csv:8: column 'v' is empty");
  EXPECT_EQ(input_error([&] { parse_nonnegative_int(t, t.rows[7], 1); }),
            "f.csv:9: column 'v': '99999999999999999999' is out of range");
  EXPECT_EQ(input_error([&] { parse_nonnegative_int(t, t.rows[8], 1); }),
            "f.csv:10: column 'v': ' 4' is not an integer");
}

}  // namespace
}  // namespace gpuorch::base
