#include "support/paths.hpp"

namespace gpuorch::test {

const char* source_dir() { return GPUORCH_SOURCE_DIR; }
const char* fixtures_dir() { return GPUORCH_FIXTURES_DIR; }
const char* shared_dir() { return GPUORCH_SHARED_DIR; }
const char* binary_path() { return GPUORCH_BINARY; }

}  // namespace gpuorch::test
