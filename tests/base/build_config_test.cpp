// The sanitizer build is also CI's assertion-on build (CMakePresets.json, asan): invariant checks
// written as assert() must run there, so NDEBUG must not reach it.
#include <gtest/gtest.h>

#include <cassert>

namespace {

TEST(BuildConfig, SanitizerBuildKeepsAssertionsOn) {
#if defined(__SANITIZE_ADDRESS__) && defined(NDEBUG)
  FAIL() << "the ASan build defines NDEBUG: its assert() checks never run (CMAKE_CXX_FLAGS_RELWITHDEBINFO)";
#elif defined(__SANITIZE_ADDRESS__)
  bool evaluated = false;
  assert((evaluated = true));
  EXPECT_TRUE(evaluated) << "assert() did not evaluate its argument";
#else
  GTEST_SKIP() << "not the sanitizer build";
#endif
}

}  // namespace
