// Reading a dataset the way training reads it: many files (or one large one) at once. The files
// are cut into 8 MiB pieces that T threads take in turn, so one large file is read in parallel
// too; O_DIRECT bypasses the page cache (a second run of a cached dataset would otherwise
// measure memory, not storage). Where the filesystem refuses O_DIRECT (tmpfs, some FUSE and
// network filesystems answer EINVAL), that file is read through the cache and counted.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "gpuorch/base/error.hpp"
#include "gpuorch/doctor/data.hpp"

namespace gpuorch::doctor {
namespace {

namespace fs = std::filesystem;
constexpr std::uint64_t kPiece = std::uint64_t{8} << 20;  // what one thread takes at a time
constexpr std::size_t kBlock = std::size_t{1} << 20;      // one read
constexpr std::size_t kAlign = 4096;                      // O_DIRECT buffer, offset and length
constexpr std::size_t kMaxFiles = 1000000;
constexpr std::size_t kMaxErrors = 3;

struct File {
  std::string path;
  std::uint64_t size = 0;
};
struct Piece {
  std::size_t file = 0;
  std::uint64_t offset = 0, length = 0;
};

std::vector<File> list_files(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) base::fail_input(path, 0, "no such file or directory");
  std::vector<File> files;
  if (fs::is_regular_file(status)) {
    files.push_back({path, fs::file_size(path, ec)});
  } else if (fs::is_directory(status)) {
    for (fs::recursive_directory_iterator
             it(path, fs::directory_options::skip_permission_denied, ec),
         end;
         !ec && it != end && files.size() < kMaxFiles; it.increment(ec)) {
      std::error_code e;
      if (it->is_regular_file(e)) files.push_back({it->path().string(), it->file_size(e)});
    }
    std::sort(files.begin(), files.end(),
              [](const File& a, const File& b) { return a.path < b.path; });
  } else {
    base::fail_input(path, 0, "not a file or a directory");
  }
  if (files.empty()) base::fail_input(path, 0, "no regular file to read");
  return files;
}

struct Shared {
  Shared(const std::vector<File>& f, const std::vector<Piece>& p) : files(f), pieces(p) {}
  const std::vector<File>& files;
  const std::vector<Piece>& pieces;
  bool direct = false;
  std::chrono::steady_clock::time_point deadline;
  std::uint64_t max_bytes = 0;
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> bytes{0};
  std::mutex mutex;
  std::set<std::size_t> read, refused;
  std::vector<std::string> errors;

  [[nodiscard]] bool done() const {
    return std::chrono::steady_clock::now() >= deadline || bytes.load() >= max_bytes;
  }
  void error(const std::string& path, int err) {
    const std::lock_guard lock(mutex);
    if (errors.size() < kMaxErrors) errors.push_back(path + ": " + std::strerror(err));
  }
};

// Reads one piece; false when the file cannot be read at all.
bool read_piece(Shared& s, const Piece& p, char* buf) {
  const File& f = s.files[p.file];
  bool direct = s.direct;
  int fd = direct ? ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
  if (fd < 0 && direct && errno != EINVAL) {
    s.error(f.path, errno);
    return false;
  }
  auto refuse = [&] {
    direct = false;
    const std::lock_guard lock(s.mutex);
    s.refused.insert(p.file);
  };
  if (fd < 0) {
    if (direct) refuse();
    fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      s.error(f.path, errno);
      return false;
    }
  }
  std::uint64_t done = 0;
  while (done < p.length && !s.done()) {
    const std::uint64_t want = std::min<std::uint64_t>(kBlock, p.length - done);
    // O_DIRECT lengths are whole blocks; at the end of the file the read just comes back short.
    const std::size_t ask = direct ? (want + kAlign - 1) / kAlign * kAlign : want;
    const ssize_t n = ::pread(fd, buf, ask, static_cast<off_t>(p.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && direct && errno == EINVAL) {  // opened, but direct reads refused
      ::close(fd);
      refuse();
      fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) continue;
    }
    if (n < 0) {
      s.error(f.path, errno);
      break;
    }
    if (n == 0) break;  // the file shrank
    const auto got = std::min<std::uint64_t>(static_cast<std::uint64_t>(n), want);
    done += got;
    s.bytes += got;
  }
  if (fd >= 0) ::close(fd);
  if (done > 0) {
    const std::lock_guard lock(s.mutex);
    s.read.insert(p.file);
  }
  return true;
}

void reader(Shared& s) {
  const std::unique_ptr<char, decltype(&std::free)> buf(
      static_cast<char*>(std::aligned_alloc(kAlign, kBlock)), &std::free);
  if (!buf) return;
  while (!s.done()) {
    const std::size_t i = s.next++;
    if (i >= s.pieces.size()) return;
    read_piece(s, s.pieces[i], buf.get());
  }
}

}  // namespace

DataReadResult measure_read(const DataReadOptions& o) {
  const auto files = list_files(o.path);
  DataReadResult r;
  r.files = files.size();
  r.threads = o.threads;
  r.direct_asked = o.direct;
  std::vector<Piece> pieces;
  std::uint64_t planned = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    r.dataset_bytes += files[i].size;
    for (std::uint64_t off = 0; off < files[i].size && planned < o.max_bytes; off += kPiece) {
      const std::uint64_t len = std::min(kPiece, files[i].size - off);
      pieces.push_back({i, off, len});
      planned += len;
    }
  }
  if (r.dataset_bytes == 0) base::fail_input(o.path, 0, "its files hold no data");
  Shared s(files, pieces);
  s.direct = o.direct;
  s.max_bytes = o.max_bytes;
  const auto start = std::chrono::steady_clock::now();
  s.deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) threads.emplace_back(reader, std::ref(s));
  for (auto& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.bytes = s.bytes.load();
  r.files_read = s.read.size();
  r.direct_refused = s.refused.size();
  r.errors = s.errors;
  return r;
}

}  // namespace gpuorch::doctor
