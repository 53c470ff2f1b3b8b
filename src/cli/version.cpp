#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/build_info.hpp"

namespace gpuorch::cli {
namespace {

#define GPUORCH_STR2(x) #x
#define GPUORCH_STR(x) GPUORCH_STR2(x)

std::string commit_of(const BuildInfo& b) {
  return b.dirty ? fmt::format("{}-dirty", b.commit) : std::string(b.commit);
}

}  // namespace

const char* compiler_name() {
#if defined(__clang__)
  return "Clang " GPUORCH_STR(__clang_major__) "." GPUORCH_STR(__clang_minor__) "." GPUORCH_STR(
      __clang_patchlevel__);
#elif defined(__GNUC__)
  return "GCC " GPUORCH_STR(__GNUC__) "." GPUORCH_STR(__GNUC_MINOR__) "." GPUORCH_STR(
      __GNUC_PATCHLEVEL__);
#else
  return "unknown compiler";
#endif
}

std::string version_text() {
  const BuildInfo& b = build_info();
  return fmt::format("gpuorch {}\ncommit:     {} ({})\nbuild type: {}\ncompiler:   {}\n", b.version,
                     commit_of(b), b.commit_date, *b.build_type ? b.build_type : "unknown",
                     b.compiler);
}

std::string version_json() {
  const BuildInfo& b = build_info();
  nlohmann::ordered_json j;
  j["version"] = b.version;
  j["commit"] = b.commit;
  j["dirty"] = b.dirty;
  j["commit_date"] = b.commit_date;
  j["build_type"] = b.build_type;
  j["compiler"] = b.compiler;
  return j.dump() + "\n";
}

}  // namespace gpuorch::cli
