#include "gpuorch/base/atomic_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_support.hpp"

namespace gpuorch::base {
namespace {

TEST(WriteFileAtomically, WritesTheContentAndLeavesNoTemporary) {
  const test::TempDir dir;
  const std::string path = dir.file("out.csv");
  write_file_atomically(path, "a,b\n1,2\n");
  EXPECT_EQ(test::read_text(path), "a,b\n1,2\n");
  write_file_atomically(path, "replaced");
  EXPECT_EQ(test::read_text(path), "replaced");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(WriteFileAtomically, FailsWithoutCreatingTheFileInAMissingFolder) {
  const test::TempDir dir;
  const std::string path = dir.file("no/such/folder/out.csv");
  EXPECT_THROW(write_file_atomically(path, "x"), std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace gpuorch::base
