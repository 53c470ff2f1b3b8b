#pragma once
// Read access to a sysfs/procfs tree: the live one ("/") or a recording (`--sysfs-root DIR`).
// Paths are relative to the root ("sys/bus/pci/devices/..."). A missing optional file is silent;
// an unreadable, oversized or malformed one is reported to Diagnostics once and read as absent.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/discover/diagnostics.hpp"

namespace gpuorch::discover {

class Tree {
 public:
  // diag may be null: then problems are only returned as absent values (used while sampling).
  Tree(std::filesystem::path root, Diagnostics* diag);

  [[nodiscard]] bool live() const { return live_; }
  [[nodiscard]] const std::filesystem::path& root() const { return root_; }
  // How a path is shown to people: "/sys/..." live, "<root>/sys/..." for a recording.
  [[nodiscard]] std::string display(const std::string& rel) const;
  [[nodiscard]] std::filesystem::path absolute(const std::string& rel) const;

  [[nodiscard]] bool exists(const std::string& rel) const;
  // The file's text; nullopt when missing (reported only if `expected`) or unreadable.
  [[nodiscard]] std::optional<std::string> text(const std::string& rel,
                                                bool expected = false) const;
  // The first line, trimmed.
  [[nodiscard]] std::optional<std::string> line(const std::string& rel,
                                                bool expected = false) const;
  // A decimal (or 0x-prefixed hex) integer.
  [[nodiscard]] std::optional<std::int64_t> integer(const std::string& rel,
                                                    bool expected = false) const;
  // Sorted names in a directory; empty when it is missing.
  [[nodiscard]] std::vector<std::string> list(const std::string& rel) const;
  // Where a path really is, following symlinks, relative to the root ("sys/devices/pci...");
  // nullopt (reported) when it escapes the root, loops or dangles.
  [[nodiscard]] std::optional<std::string> resolve(const std::string& rel) const;

  void problem(const std::string& rel, const std::string& what) const;

 private:
  std::filesystem::path root_;
  std::filesystem::path canonical_root_;
  bool live_ = false;
  Diagnostics* diag_ = nullptr;
};

// Shortens and escapes garbled file content for a one-line message.
std::string quote_content(const std::string& text);

}  // namespace gpuorch::discover
