// A recorded host (`gpuorch topo --record`, read back by `--sysfs-root DIR`) with one of its
// files replaced by the input: the t4x2 fixture is copied once into a temporary folder (without
// hwloc.xml, so CPUs and PCI paths come from the sysfs files too), the input's first byte picks
// the file (in sorted order: nvml.json, proc/..., sys/...), the rest is its new content.
// Discovery reports bad files as problems; it may refuse the tree only with base::InputError.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "fuzz_support.hpp"
#include "gpuorch/discover/discover.hpp"

namespace {

namespace fs = std::filesystem;

struct Recording {
  fs::path root;
  std::vector<fs::path> files;       // relative, sorted
  std::vector<std::string> content;  // the fixture's, to put back
};

Recording& recording() {
  static Recording r = [] {
    Recording rec;
    char pattern[] = "/tmp/gpuorch-fuzz-recording.XXXXXX";
    if (!mkdtemp(pattern)) std::abort();
    rec.root = pattern;
    // The checkout it was built from, or another copy of it (GPUORCH_SOURCE_DIR).
    const char* source = std::getenv("GPUORCH_SOURCE_DIR");
    const fs::path fixture = fs::path(source ? source : GPUORCH_SOURCE_DIR) / "tests/fixtures/topo/t4x2";
    fs::copy(fixture, rec.root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::remove(rec.root / "hwloc.xml");
    fs::remove_all(rec.root / "expected");
    for (const auto& e : fs::recursive_directory_iterator(rec.root)) {
      if (e.is_regular_file() && !e.is_symlink()) {
        rec.files.push_back(fs::relative(e.path(), rec.root));
      }
    }
    // As text, byte by byte: the seed corpus names its files by this order.
    std::sort(rec.files.begin(), rec.files.end(),
              [](const fs::path& a, const fs::path& b) { return a.string() < b.string(); });
    for (const auto& f : rec.files) {
      std::ifstream in(rec.root / f, std::ios::binary);
      std::stringstream s;
      s << in.rdbuf();
      rec.content.push_back(s.str());
    }
    std::atexit([] { fs::remove_all(recording().root); });
    return rec;
  }();
  return r;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuorch;
  Recording& rec = recording();
  if (size == 0) return 0;
  const std::size_t pick = data[0] % rec.files.size();
  write(rec.root / rec.files[pick], fuzz::text_of(data + 1, size - 1));
  discover::Options options;
  options.root = rec.root.string();
  fuzz::input_errors_only([&] { discover::discover_host(options); });
  write(rec.root / rec.files[pick], rec.content[pick]);
  return 0;
}
