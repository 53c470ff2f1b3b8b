// The catalogue's size by category is the figure docs/doctor.md quotes; this command prints it
// from the catalogue the program carries, after hand-written entries took over source formats.
#include "cli/doctor_catalogue.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "gpuorch/doctor/nccl_catalogue.hpp"

namespace gpuorch::cli {
namespace {

const char* level_name(doctor::LineLevel l) {
  return l == doctor::LineLevel::kWarn ? "WARN" : l == doctor::LineLevel::kInfo ? "INFO" : "ANY";
}

struct Counts {
  int hand = 0, source = 0, warn = 0, info = 0, any = 0, formats = 0;
};

int print_catalogue(bool json) {
  const auto& cat = doctor::builtin_catalogue();
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& e : cat.entries()) {
      nlohmann::ordered_json formats = nlohmann::ordered_json::array();
      for (const auto& f : e.formats) {
        formats.push_back(
            {{"format", f.format.format}, {"versions", f.versions}, {"example", f.example}});
      }
      out.push_back({{"id", e.id},
                     {"file", fmt::format("{}:{}", e.file, e.line)},
                     {"library", e.library},
                     {"level", level_name(e.level)},
                     {"category", e.category},
                     {"source", e.source},
                     {"severity", doctor::to_string(e.severity)},
                     {"finding", e.finding},
                     {"formats", std::move(formats)}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  std::map<std::string, Counts> by;
  Counts all;
  for (const auto& e : cat.entries()) {
    for (Counts* c : {&by[e.library + " " + e.category], &all}) {
      (e.generated ? c->source : c->hand) += 1;
      (e.level == doctor::LineLevel::kWarn   ? c->warn
       : e.level == doctor::LineLevel::kInfo ? c->info
                                             : c->any) += 1;
      c->formats += static_cast<int>(e.formats.size());
    }
  }
  fmt::print("{:<28} {:>7} {:>12} {:>11} {:>5} {:>5} {:>5} {:>8}\n", "library category", "entries",
             "hand-written", "from source", "WARN", "INFO", "ANY", "formats");
  auto row = [](const std::string& name, const Counts& c) {
    fmt::print("{:<28} {:>7} {:>12} {:>11} {:>5} {:>5} {:>5} {:>8}\n", name, c.hand + c.source,
               c.hand, c.source, c.warn, c.info, c.any, c.formats);
  };
  for (const auto& [name, c] : by) row(name, c);
  row("all", all);
  return 0;
}

}  // namespace

void add_doctor_catalogue(CLI::App& doctor, Action& action) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = doctor.add_subcommand(
      "nccl-catalogue",
      "What doctor nccl-log knows: the catalogue of NCCL, RCCL and PyTorch messages by library "
      "and category (entries, hand-written or read from NCCL's source, WARN/INFO/PyTorch lines, "
      "formats), or every entry with its formats, versions and example line (--json).");
  cmd->add_flag("--json", *json, "Every entry as JSON");
  cmd->callback([json, &action] { action = [json] { return print_catalogue(*json); }; });
}

}  // namespace gpuorch::cli
