#pragma once
// Doctor's knowledge of NCCL, RCCL and PyTorch ProcessGroupNCCL messages, kept as data
// (src/gpuorch/doctor/catalogue/*.yaml, docs/doctor.md "The catalogue"): for each message the
// formats it has had, the library versions that print each, its meaning, severity, cause and fix.
// source.yaml lists every WARN and the configuration-revealing INFO formats of NCCL and RCCL
// releases (scripts/nccl-catalogue); the hand-written files give the messages that need their own
// advice and take precedence over it.
#include <cstddef>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuorch/doctor/nccl_format.hpp"

namespace gpuorch::doctor {

// Which lines an entry reads: the text after "NCCL INFO " or "NCCL WARN ", or (PyTorch) anywhere in
// any line.
enum class LineLevel { kInfo, kWarn, kAny };
// kNote: recognised, counted, not reported (progress and configuration of no consequence alone).
enum class EntrySeverity { kNote, kInfo, kWarning, kError };
const char* to_string(EntrySeverity s);

struct CatalogueFormat {
  MessageFormat format;
  std::string versions;  // "2.12-2.30" (library releases that print it), may be empty
  std::string example;   // a line in this format; the tests feed it back
  std::size_t line = 0;  // in its file
  // Names of the conversions, in order: the entry's, or the format's own where a version prints
  // the values in another order ("Cuda failure '%s'" and "Cuda failure %d '%s'").
  std::vector<std::string> fields;
};

struct CatalogueEntry {
  std::string id;        // "env.ib-disable"; source.yaml's are "source:<line>"
  std::string file;      // "env.yaml"
  std::size_t line = 0;  // of the entry in its file
  std::string library;   // nccl, rccl, torch, net-plugin
  std::string category;  // env, net-ib, topology, watchdog...
  std::string source;    // the library file that prints it ("src/init.cc"), may be empty
  LineLevel level = LineLevel::kInfo;
  std::vector<CatalogueFormat> formats;
  std::vector<std::string> fields;  // names of the conversions, in order (may be fewer)
  // field name -> the pattern its value must match (whole value) for the entry to apply.
  std::vector<std::pair<std::string, std::regex>> require;
  EntrySeverity severity = EntrySeverity::kNote;
  // The severity when the whole log comes from one host (a network switch costs nothing there).
  std::optional<EntrySeverity> one_host_severity;
  std::string finding;  // the finding id it raises ("nccl.duplicate-gpu")
  std::string meaning, cause, fix;
  std::string cost;  // what a setting that switches a fast path off costs (empty when none)
  std::vector<std::string> facts;  // what the line establishes, for diagnoses over several lines
  bool generated = false;          // from source.yaml
};

struct CatalogueMatch {
  const CatalogueEntry* entry = nullptr;
  std::size_t format = 0;
  std::vector<std::string> values;
};

class Catalogue {
 public:
  // Files as (name, text). Throws base::InputError "name:line: what is wrong".
  static Catalogue load(const std::vector<std::pair<std::string, std::string>>& files);

  [[nodiscard]] const std::vector<CatalogueEntry>& entries() const { return entries_; }
  // The first entry (hand-written before generated, then in file order) whose format and
  // requirements fit `text` at `level`.
  [[nodiscard]] std::optional<CatalogueMatch> match(LineLevel level, std::string_view text) const;

 private:
  void index();
  std::vector<CatalogueEntry> entries_;
  // Entries by the first 4 bytes of the fixed text their format starts with, and those whose format
  // starts with a conversion (tried on every line); each list in entry order.
  struct Slot {
    std::size_t entry, format;
  };
  std::map<std::pair<LineLevel, std::string>, std::vector<Slot>> by_head_;
  std::map<LineLevel, std::vector<Slot>> unanchored_;
};

// The catalogue built into the program, loaded once.
const Catalogue& builtin_catalogue();

// `text` with {name} replaced by the value of the field of that name (`fields`: the matched
// format's), {1}.. by position, and the extra names given (host, rank, line).
std::string fill_fields(const std::string& text, const std::vector<std::string>& fields,
                        const std::vector<std::string>& values,
                        const std::map<std::string, std::string>& extra);

}  // namespace gpuorch::doctor
