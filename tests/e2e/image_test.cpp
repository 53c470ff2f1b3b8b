// scripts/build-image: the OCI image holding the release gpuorch and exactly its shared
// libraries builds without a Docker engine, and the binary inside it runs (`gpuorch --version`
// through chroot into the image's unpacked layers). Skips, saying why, where that cannot be
// checked: a sanitizer build (the image is made from the release binary), not root (chroot), or
// no builder installed (scripts/setup installs buildah).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

TEST(Image, BuildsAndItsBinaryRuns) {
  if (test::kSanitized) GTEST_SKIP() << "the image is built from the release binary";
  if (::geteuid() != 0) GTEST_SKIP() << "chroot into the unpacked image needs root";
  if (std::system("command -v buildah >/dev/null 2>&1 || command -v umoci >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "neither buildah nor umoci is installed (scripts/setup installs buildah)";
  }
  test::TempDir dir;
  const std::string cmd =
      test::shell_quote(std::string(::gpuorch::test::source_dir()) + "/scripts/build-image") +
      " --binary " + test::shell_quote(::gpuorch::test::binary_path()) + " --out " +
      test::shell_quote(dir.file("image")) + " --check >" + test::shell_quote(dir.file("out")) +
      " 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string out = test::read_text(dir.file("out"));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("gpuorch --version = " GPUORCH_VERSION), std::string::npos) << out;
  EXPECT_NE(out.find("ghcr.io/gpuorch/gpuorch:" GPUORCH_VERSION), std::string::npos) << out;
}

}  // namespace
}  // namespace gpuorch
