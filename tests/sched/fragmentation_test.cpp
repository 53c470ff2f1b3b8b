#include "gpuorch/sched/fragmentation.hpp"

#include <gtest/gtest.h>

TEST(Smoke, Builds) { SUCCEED(); }
