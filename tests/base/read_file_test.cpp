// The one bounded reader (base/read_file.hpp): regular files only, refused at once otherwise, a
// size cap, a line cap, and each refusal naming the file and the limit.
#include "gpuorch/base/read_file.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gpuorch/base/whole_number.hpp"
#include "support/test_support.hpp"

namespace gpuorch::base {
namespace {

using test::input_error;

TEST(ReadInputFile, ReadsARegularFileWhole) {
  const test::TempDir dir;
  test::write_text(dir.file("a.yaml"), "a: 1\n");
  EXPECT_EQ(read_input_file(dir.file("a.yaml"), "config file", kConfigFileMaxBytes), "a: 1\n");
  test::write_text(dir.file("empty"), "");
  EXPECT_EQ(read_input_file(dir.file("empty"), "config file", kConfigFileMaxBytes), "");
}

TEST(ReadInputFile, RefusesWhatIsNotARegularFileWithoutBlocking) {
  const test::TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // no writer: a plain open would wait for one
  EXPECT_EQ(input_error([&] { read_input_file(fifo, "log", kLogFileMaxBytes); }),
            fifo + ": the log is a FIFO, not a regular file");
  const std::string folder = dir.path().string();
  EXPECT_EQ(input_error([&] { read_input_file(folder, "config file", 100); }),
            folder + ": the config file is a directory, not a regular file");
  EXPECT_EQ(input_error([] { read_input_file("/dev/zero", "config file", 100); }),
            "/dev/zero: the config file is a character device, not a regular file");
  const std::string socket_path = dir.file("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof addr.sun_path);
  socket_path.copy(addr.sun_path, socket_path.size());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(input_error([&] { read_input_file(socket_path, "config file", 100); }),
            socket_path + ": the config file is a socket, not a regular file");
  ::close(fd);
  EXPECT_EQ(input_error([&] { read_input_file(dir.file("none"), "config file", 100); }),
            dir.file("none") + ": the config file cannot be opened: No such file or directory");
}

TEST(ReadInputFile, RefusesAFileLargerThanItsCap) {
  const test::TempDir dir;
  test::write_text(dir.file("a"), std::string(1001, 'x'));
  EXPECT_EQ(read_input_file(dir.file("a"), "trace", 1001).size(), 1001U);
  EXPECT_EQ(input_error([&] { read_input_file(dir.file("a"), "trace", 1000); }),
            dir.file("a") + ": the trace is larger than 1000 bytes (the limit)");
  std::string problem;
  EXPECT_FALSE(read_bounded(dir.file("a"), 512, problem));
  EXPECT_EQ(problem, "is larger than 512 bytes (the limit)");
}

TEST(SizeText, WritesWholeMebibytesAndGibibytes) {
  EXPECT_EQ(size_text(kConfigFileMaxBytes), "16 MiB");
  EXPECT_EQ(size_text(kTraceFileMaxBytes), "256 MiB");
  EXPECT_EQ(size_text(kLogFileMaxBytes), "1 GiB");
  EXPECT_EQ(size_text(kLineMaxBytes), "65536 bytes");
}

std::vector<std::string> all_lines(LineReader& in) {
  std::vector<std::string> out;
  for (std::string line; in.next(line);) out.push_back(line);
  return out;
}

TEST(LineReader, GivesEachLineWithoutItsBreak) {
  const test::TempDir dir;
  const std::string path = dir.file("t.csv");
  test::write_text(path, "a,b\r\n\n1,2\nlast");
  LineReader in(path, "CSV file", 1000);
  EXPECT_EQ(all_lines(in), (std::vector<std::string>{"a,b", "", "1,2", "last"}));
  EXPECT_EQ(in.line_number(), 4U);
  // Lines across the reader's 64 KiB pieces come back whole.
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i) + "\n";
  test::write_text(path, text);
  LineReader many(path, "CSV file", kTraceFileMaxBytes);
  const auto lines = all_lines(many);
  ASSERT_EQ(lines.size(), 20000U);
  EXPECT_EQ(lines[12345], "12345");
}

TEST(LineReader, RefusesOrSkipsALongLine) {
  const test::TempDir dir;
  const std::string path = dir.file("job.log");
  test::write_text(path, "ok\n" + std::string(200000, 'x') + "\n0123456789\r\nend\n");
  LineReader refuse(path, "log", kLogFileMaxBytes, 10);
  std::string line;
  ASSERT_TRUE(refuse.next(line));
  EXPECT_EQ(input_error([&] { refuse.next(line); }), path + ":2: line longer than 10 bytes");
  LineReader skip(path, "log", kLogFileMaxBytes, 10, LineReader::LongLines::kSkip);
  EXPECT_EQ(all_lines(skip), (std::vector<std::string>{"ok", "0123456789", "end"}));
  EXPECT_EQ(skip.skipped(), 1U);
  EXPECT_EQ(skip.line_number(), 4U);
}

TEST(LineReader, RefusesAFileLargerThanItsCapAndWhatIsNotAFile) {
  const test::TempDir dir;
  const std::string path = dir.file("t.csv");
  // Built in place: g++ 12 at -O3 warns (array-bounds, a false positive) on string(100) + "\n".
  std::string line(100, 'x');
  line += '\n';
  test::write_text(path, line);
  EXPECT_EQ(input_error([&] { LineReader in(path, "CSV file", 50); }),
            path + ": the CSV file is larger than 50 bytes (the limit)");
  EXPECT_EQ(input_error([] { LineReader in("/dev/zero", "NCCL log", kLogFileMaxBytes); }),
            "/dev/zero: the NCCL log is a character device, not a regular file");
}

TEST(WholeNumber, ParsesInRangeOrNothing) {
  EXPECT_EQ(whole_number<int>("42"), 42);
  EXPECT_EQ(whole_number<int>("-3"), -3);
  EXPECT_EQ(whole_number<int>("99999999999999999999"), std::nullopt);
  EXPECT_EQ(whole_number<long long>("9223372036854775807"), 9223372036854775807LL);
  EXPECT_EQ(whole_number<int>("7", 1, 5), std::nullopt);
  EXPECT_EQ(whole_number<int>("0", 1), std::nullopt);
  for (const char* bad : {"", "+1", " 1", "1 ", "1.5", "0x10", "1e3", "abc"}) {
    EXPECT_EQ(whole_number<int>(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace gpuorch::base
