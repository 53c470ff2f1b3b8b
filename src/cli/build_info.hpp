#pragma once
// What `gpuorch --version` says about the binary: which source it was built from and how, so a
// report or a bug can name the exact build. build_info() is generated at build time
// (cmake/build_info.cmake); the rest is in version.cpp.
#include <string>

namespace gpuorch::cli {

struct BuildInfo {
  const char* version;      // the project's version (CMake's PROJECT_VERSION)
  const char* commit;       // git commit, 12 hex digits; "unknown" outside a git checkout
  bool dirty;               // tracked files differed from that commit when it was built
  const char* commit_date;  // the commit's date, YYYY-MM-DD (reproducible, unlike a build time)
  const char* build_type;   // CMAKE_BUILD_TYPE: Release, Debug, ...
  const char* compiler;     // e.g. "GCC 12.2.0"
};

const BuildInfo& build_info();

// The compiler that compiled this file, e.g. "GCC 12.2.0" or "Clang 14.0.6".
const char* compiler_name();

// `gpuorch --version`: one line per fact, the first "gpuorch VERSION".
std::string version_text();
// `gpuorch --version --json`: the same facts as one JSON object.
std::string version_json();

}  // namespace gpuorch::cli
