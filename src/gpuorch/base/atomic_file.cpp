#include "gpuorch/base/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "gpuorch/base/error.hpp"

namespace gpuorch::base {

void write_file_atomically(const std::string& path, std::string_view content) {
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      std::filesystem::remove(temp);
      throw std::runtime_error(fmt::format("{}: write failed", path));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp);
    throw std::runtime_error(fmt::format("{}: cannot rename into place: {}", path, ec.message()));
  }
}

void write_folder_atomically(const std::string& path,
                             const std::function<void(const std::filesystem::path&)>& write_into) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (fs::exists(target) && !fs::is_directory(target)) {
    fail_input(fmt::format("{}: exists and is not a folder", path));
  }
  const fs::path staging(fmt::format("{}.tmp.{}", path, ::getpid()));
  fs::remove_all(staging);
  fs::create_directories(staging);
  try {
    write_into(staging);
    if (fs::exists(target)) {
      const fs::path old(fmt::format("{}.old.{}", path, ::getpid()));
      fs::rename(target, old);
      fs::rename(staging, target);
      fs::remove_all(old);
    } else {
      fs::rename(staging, target);
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
}

void check_output(const std::string& flag, const std::string& path, OutputKind kind) {
  namespace fs = std::filesystem;
  const auto fail = [&](const std::string& why) {
    fail_input(fmt::format("{} {}: {}", flag, path, why));
  };
  if (path.empty()) fail("no path");
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (kind == OutputKind::kFile && fs::is_directory(status)) fail("is a directory");
  if (kind == OutputKind::kFolder && fs::exists(status) && !fs::is_directory(status)) {
    fail("exists and is not a folder");
  }
  const fs::path parent = fs::absolute(fs::path(path), ec).parent_path();
  if (!fs::is_directory(parent, ec)) fail(fmt::format("{} is not a folder", parent.string()));
  // The sibling the write itself will use: created and removed, so the check asks the kernel.
  const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
  if (kind == OutputKind::kFile) {
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail(fmt::format("cannot write there: {}", std::strerror(errno)));
    ::close(fd);
    ::unlink(temp.c_str());
  } else {
    if (::mkdir(temp.c_str(), 0755) != 0) {
      fail(fmt::format("cannot write there: {}", std::strerror(errno)));
    }
    ::rmdir(temp.c_str());
  }
}

}  // namespace gpuorch::base
