// `topo --record DIR` checks every file it writes: a write that fails (here: a file-size limit,
// as a full disk would) ends with exit 2, one line, and no recording, not a truncated one.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::discover {
namespace {

namespace fs = std::filesystem;

TEST(RecordWrite, AFailedWriteLeavesNoRecording) {
  if (!fs::exists("/sys/devices/system/cpu/online")) GTEST_SKIP() << "no sysfs to record here";
  const test::TempDir dir;
  const std::string out = dir.file("rec");
  // SIGXFSZ ignored: the write fails with EFBIG instead of killing the process.
  const std::string command = "trap '' XFSZ; ulimit -f 1; exec " +
                              test::shell_quote(::gpuorch::test::binary_path()) +
                              " topo --no-nvml --record " + test::shell_quote(out) +
                              " >/dev/null 2>" + test::shell_quote(dir.file("err"));
  const int status = std::system(("/bin/sh -c " + test::shell_quote(command)).c_str());
  ASSERT_TRUE(WIFEXITED(status));
  const std::string err = test::read_text(dir.file("err"));
  EXPECT_EQ(WEXITSTATUS(status), 2) << err;
  EXPECT_EQ(test::lines_of(err).size(), 1u) << err;
  EXPECT_NE(err.find("cannot be written"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out));
  int left = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++left;
  EXPECT_EQ(left, 1) << "only the stderr file may be there";
}

TEST(RecordWrite, WithoutALimitTheRecordingIsComplete) {
  if (!fs::exists("/sys/devices/system/cpu/online")) GTEST_SKIP() << "no sysfs to record here";
  const test::TempDir dir;
  const auto r = test::run_cli({"topo", "--no-nvml", "--record", dir.file("rec")}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_text(dir.file("rec/sys/devices/system/cpu/online")),
            test::read_text("/sys/devices/system/cpu/online"));
}

}  // namespace
}  // namespace gpuorch::discover
