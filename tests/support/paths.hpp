#pragma once
// Where the checkout, its fixtures, ../shared and the built CLI are. Defined in paths.cpp, the one
// test object compiled with these absolute paths, so every other test object is the same in every
// checkout and a compiler cache shares it between worktrees.

namespace gpuorch::test {

const char* source_dir();    // the checkout the tests were built from
const char* fixtures_dir();  // tests/fixtures of that checkout
const char* shared_dir();    // ../shared (the study's data; may be absent)
const char* binary_path();   // the gpuorch binary built with the tests

}  // namespace gpuorch::test
