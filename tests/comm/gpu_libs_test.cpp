// NCCL or the driver missing: one line that says which library and why (dlerror), exit code 1.
#include "gpuorch/comm/gpu_libs.hpp"

#include <gtest/gtest.h>

namespace gpuorch::comm::gpu {
namespace {

TEST(GpuLibs, MissingNcclSaysWhichAndHowToPointAtOne) {
  try {
    Nccl nccl("libnccl-not-here.so.2");
    FAIL() << "loaded a library that does not exist";
  } catch (const EnvironmentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no NCCL (libnccl-not-here.so.2: cannot open shared object file"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("--nccl-library"), std::string::npos);
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

TEST(GpuLibs, ALibraryWithoutNcclsSymbolsIsNamed) {
  // libz is on every host gpuorch builds on; it is a library, just not NCCL.
  try {
    Nccl nccl("libz.so.1");
    FAIL() << "libz taken for NCCL";
  } catch (const EnvironmentError& e) {
    EXPECT_STREQ(e.what(), "libnccl.so.2 lacks ncclGetVersion");
  }
}

}  // namespace
}  // namespace gpuorch::comm::gpu
