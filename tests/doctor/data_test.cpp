// doctor data on temporary files: a small file or directory read by several threads, O_DIRECT
// or its fallback, against a tiny need (met) and an absurd one (1 PB/s, not met).
#include "gpuorch/doctor/data.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "doctor/doctor_test_util.hpp"

namespace gpuorch {
namespace {

using test::find_id;
using test::problem_ids;
using Ids = std::vector<std::string>;

doctor::DataReadOptions options(const std::string& path) {
  doctor::DataReadOptions o;
  o.path = path;
  o.threads = 4;
  o.seconds = 0.5;
  return o;
}

TEST(Data, ReadsEveryFileOfADirectory) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "shard/sub");
  test::write_text(dir.file("shard/a.bin"), std::string(3 << 20, 'a'));
  test::write_text(dir.file("shard/sub/b.bin"), std::string(12345, 'b'));
  test::write_text(dir.file("shard/sub/empty"), "");
  const auto r = doctor::measure_read(options(dir.file("shard")));
  EXPECT_EQ(r.files, 3u);
  EXPECT_EQ(r.files_read, 2u);
  EXPECT_EQ(r.bytes, (3u << 20) + 12345u);
  EXPECT_EQ(r.dataset_bytes, r.bytes);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_GT(r.mb_per_second(), 0);
}

TEST(Data, OneLargeFileIsCutIntoPiecesAndCapped) {
  test::TempDir dir;
  test::write_text(dir.file("big.bin"), std::string(20 << 20, 'x'));
  auto o = options(dir.file("big.bin"));
  o.max_bytes = 9 << 20;  // two 8 MiB pieces are planned; reading stops at the cap
  const auto r = doctor::measure_read(o);
  EXPECT_GE(r.bytes, 9u << 20);
  EXPECT_LE(r.bytes, 16u << 20);
  EXPECT_EQ(r.files_read, 1u);
}

TEST(Data, ANeedMetIsOkAndAnAbsurdOneIsTooSlow) {
  test::TempDir dir;
  test::write_text(dir.file("d.bin"), std::string(4 << 20, 'd'));
  const auto r = doctor::measure_read(options(dir.file("d.bin")));
  const auto ok = doctor::check_data(r, doctor::DataNeed{1, 1, 1});
  EXPECT_EQ(problem_ids(ok), Ids{});
  ASSERT_TRUE(find_id(ok, "data.ok"));
  // 1 PB/s: 10^6 samples/s x 10^9 bytes.
  const auto slow = doctor::check_data(r, doctor::DataNeed{1e6, 1000000000, 1});
  EXPECT_EQ(problem_ids(slow), Ids{"data.too-slow"});
  const auto f = find_id(slow, "data.too-slow");
  EXPECT_EQ(f->severity, doctor::Severity::kError);
  EXPECT_NE(f->evidence.find("needed 1000000000.0 MB/s = 1000000 samples/s x 1000000000 "
                             "bytes x 1 GPU(s)"),
            std::string::npos)
      << f->evidence;
  EXPECT_NE(f->evidence.find("with 4 thread(s)"), std::string::npos) << f->evidence;
  EXPECT_NE(f->evidence.find("1 of 1 file(s) read"), std::string::npos) << f->evidence;
  // Without a need, only the measurement.
  EXPECT_TRUE(find_id(doctor::check_data(r, std::nullopt), "data.read"));
}

// A measured rate between half the need and the need is a warning, not an error.
TEST(Data, SeverityFollowsTheShortfall) {
  doctor::DataReadResult r;
  r.bytes = 300'000'000;
  r.seconds = 1;
  r.threads = 8;
  r.files = r.files_read = 1;
  r.direct_asked = true;
  const auto f =
      find_id(doctor::check_data(r, doctor::DataNeed{400, 1'000'000, 1}), "data.too-slow");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->severity, doctor::Severity::kWarning);
  EXPECT_NE(f->what.find("reads at 300 MB/s, 75% of the 400.0 MB/s"), std::string::npos) << f->what;
}

TEST(Data, BadPathsAreOneLine) {
  test::TempDir dir;
  EXPECT_EQ(test::input_error([] { doctor::measure_read(options("/nonexistent/data")); }),
            "/nonexistent/data: no such file or directory");
  std::filesystem::create_directories(dir.path() / "empty");
  const std::string empty = dir.file("empty");
  EXPECT_EQ(test::input_error([&] { doctor::measure_read(options(empty)); }),
            empty + ": no regular file to read");
  test::write_text(dir.file("empty/zero"), "");
  EXPECT_EQ(test::input_error([&] { doctor::measure_read(options(empty)); }),
            empty + ": its files hold no data");
}

}  // namespace
}  // namespace gpuorch
