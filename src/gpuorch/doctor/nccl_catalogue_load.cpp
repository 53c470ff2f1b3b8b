// Reading the catalogue's YAML. Every key is checked (an unknown one is a typo, not an extension),
// every format compiled and every requirement's pattern too, so a malformed catalogue fails the
// build's tests with "file:line: what is wrong" instead of silently never matching.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/yaml_reader.hpp"
#include "gpuorch/doctor/nccl_catalogue.hpp"
#include "gpuorch/doctor/nccl_catalogue_files.hpp"

namespace gpuorch::doctor {

const char* to_string(EntrySeverity s) {
  switch (s) {
    case EntrySeverity::kNote:
      return "note";
    case EntrySeverity::kInfo:
      return "info";
    case EntrySeverity::kWarning:
      return "warning";
    case EntrySeverity::kError:
      return "error";
  }
  return "note";
}

namespace {

// The two files that are not hand-written entries: the advice per category, and the formats read
// from the libraries' source.
constexpr const char* kCategories = "categories.yaml";
constexpr const char* kSource = "source.yaml";

struct CategoryText {
  std::string meaning, cause, fix;
};

std::size_t line_of(const YAML::Node& n) { return static_cast<std::size_t>(n.Mark().line) + 1; }

[[noreturn]] void fail(const std::string& file, const YAML::Node& n, const std::string& what) {
  base::fail_input(file, line_of(n), what);
}

void only_keys(const std::string& file, const YAML::Node& n,
               std::initializer_list<const char*> keys) {
  if (!n.IsMap()) fail(file, n, "expected a mapping");
  for (const auto& kv : n) {
    const auto key = kv.first.as<std::string>();
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
      fail(file, kv.first, fmt::format("unknown key '{}'", key));
    }
  }
}

std::string text(const std::string& file, const YAML::Node& n, const char* key, bool required) {
  const YAML::Node v = n[key];
  if (!v) {
    if (required) fail(file, n, fmt::format("'{}' is missing", key));
    return {};
  }
  if (!v.IsScalar()) fail(file, v, fmt::format("'{}' must be a string", key));
  return v.as<std::string>();
}

std::vector<std::string> list(const std::string& file, const YAML::Node& n, const char* key) {
  std::vector<std::string> out;
  const YAML::Node v = n[key];
  if (!v) return out;
  if (!v.IsSequence()) fail(file, v, fmt::format("'{}' must be a list", key));
  for (const auto& e : v) {
    if (!e.IsScalar()) fail(file, e, fmt::format("'{}' must list strings", key));
    out.push_back(e.as<std::string>());
  }
  return out;
}

LineLevel level_of(const std::string& file, const YAML::Node& n) {
  const std::string v = text(file, n, "level", true);
  if (v == "INFO") return LineLevel::kInfo;
  if (v == "WARN") return LineLevel::kWarn;
  if (v == "ANY") return LineLevel::kAny;
  fail(file, n["level"], fmt::format("level '{}' is not INFO, WARN or ANY", v));
}

EntrySeverity severity_of(const std::string& file, const YAML::Node& n, const char* key) {
  const std::string v = text(file, n, key, true);
  for (const auto s : {EntrySeverity::kNote, EntrySeverity::kInfo, EntrySeverity::kWarning,
                       EntrySeverity::kError}) {
    if (v == to_string(s)) return s;
  }
  fail(file, n[key], fmt::format("{} '{}' is not note, info, warning or error", key, v));
}

std::string library_of(const std::string& file, const YAML::Node& n) {
  const std::string v = text(file, n, "library", true);
  if (v != "nccl" && v != "rccl" && v != "torch" && v != "net-plugin") {
    fail(file, n["library"], fmt::format("library '{}' is not nccl, rccl, torch or net-plugin", v));
  }
  return v;
}

CatalogueFormat format_of(const std::string& file, const YAML::Node& n, LineLevel level) {
  CatalogueFormat f;
  f.line = line_of(n);
  try {
    f.format = compile_format(text(file, n, "format", true), level == LineLevel::kAny);
  } catch (const std::invalid_argument& e) {
    fail(file, n["format"], e.what());
  } catch (const std::regex_error& e) {
    fail(file, n["format"], fmt::format("the format makes no valid pattern ({})", e.what()));
  }
  f.versions = text(file, n, "versions", false);
  f.example = text(file, n, "example", true);
  return f;
}

std::map<std::string, CategoryText> read_categories(const std::string& file,
                                                    const YAML::Node& doc) {
  std::map<std::string, CategoryText> out;
  if (!doc.IsMap() || !doc["categories"] || !doc["categories"].IsMap()) {
    fail(file, doc, "expected 'categories:' with one mapping per category");
  }
  for (const auto& kv : doc["categories"]) {
    only_keys(file, kv.second, {"meaning", "cause", "fix"});
    out[kv.first.as<std::string>()] = {text(file, kv.second, "meaning", true),
                                       text(file, kv.second, "cause", true),
                                       text(file, kv.second, "fix", true)};
  }
  return out;
}

YAML::Node entries_of(const std::string& file, const YAML::Node& doc) {
  if (!doc.IsMap() || !doc["entries"] || !doc["entries"].IsSequence()) {
    fail(file, doc, "expected 'entries:' with a list of entries");
  }
  return doc["entries"];
}

void check_category(const std::string& file, const YAML::Node& n, const std::string& category,
                    const std::map<std::string, CategoryText>& categories) {
  if (!categories.count(category)) {
    fail(file, n["category"], fmt::format("category '{}' is not in {}", category, kCategories));
  }
}

CatalogueEntry hand_written(const std::string& file, const YAML::Node& n,
                            const std::map<std::string, CategoryText>& categories) {
  only_keys(
      file, n,
      {"id", "library", "level", "category", "source", "formats", "fields", "require", "severity",
       "one_host_severity", "finding", "meaning", "cause", "cost", "fix", "facts"});
  CatalogueEntry e;
  e.file = file;
  e.line = line_of(n);
  e.id = text(file, n, "id", true);
  e.library = library_of(file, n);
  e.level = level_of(file, n);
  e.category = text(file, n, "category", true);
  check_category(file, n, e.category, categories);
  e.source = text(file, n, "source", false);
  const YAML::Node formats = n["formats"];
  if (!formats || !formats.IsSequence() || formats.size() == 0) {
    fail(file, n, "'formats' must list at least one format");
  }
  e.fields = list(file, n, "fields");
  for (const auto& f : formats) {
    only_keys(file, f, {"format", "versions", "example", "fields"});
    CatalogueFormat cf = format_of(file, f, e.level);
    cf.fields = f["fields"] ? list(file, f, "fields") : e.fields;
    if (cf.fields.size() > cf.format.conversions) {
      fail(file, f["fields"] ? f["fields"] : n["fields"],
           fmt::format("{} field names for a format with {} conversions", cf.fields.size(),
                       cf.format.conversions));
    }
    e.formats.push_back(std::move(cf));
  }
  if (const YAML::Node req = n["require"]) {
    if (!req.IsMap()) fail(file, req, "'require' must map field names to patterns");
    for (const auto& kv : req) {
      const auto name = kv.first.as<std::string>();
      for (const auto& f : e.formats) {
        if (std::find(f.fields.begin(), f.fields.end(), name) == f.fields.end()) {
          fail(file, kv.first, fmt::format("'{}' is not a field", name));
        }
      }
      try {
        e.require.emplace_back(name, std::regex(kv.second.as<std::string>()));
      } catch (const std::regex_error& err) {
        fail(file, kv.second, fmt::format("bad pattern for '{}' ({})", name, err.what()));
      }
    }
  }
  e.severity = severity_of(file, n, "severity");
  if (n["one_host_severity"]) e.one_host_severity = severity_of(file, n, "one_host_severity");
  e.finding = text(file, n, "finding", e.severity != EntrySeverity::kNote);
  e.meaning = text(file, n, "meaning", true);
  e.cause = text(file, n, "cause", e.severity >= EntrySeverity::kWarning);
  e.cost = text(file, n, "cost", false);
  e.fix = text(file, n, "fix", e.severity >= EntrySeverity::kWarning);
  e.facts = list(file, n, "facts");
  return e;
}

CatalogueEntry generated(const std::string& file, const YAML::Node& n,
                         const std::map<std::string, CategoryText>& categories) {
  only_keys(file, n, {"library", "level", "category", "source", "format", "versions", "example"});
  CatalogueEntry e;
  e.file = file;
  e.line = line_of(n);
  e.id = fmt::format("source:{}", e.line);
  e.generated = true;
  e.library = library_of(file, n);
  e.level = level_of(file, n);
  e.category = text(file, n, "category", true);
  check_category(file, n, e.category, categories);
  e.source = text(file, n, "source", false);
  e.formats.push_back(format_of(file, n, e.level));
  const CategoryText& c = categories.at(e.category);
  e.meaning = c.meaning;
  // A WARN is NCCL saying something failed; an INFO line alone diagnoses nothing.
  if (e.level == LineLevel::kWarn) {
    e.severity = EntrySeverity::kError;
    e.finding = "nccl.warn";
    e.cause = c.cause;
    e.fix = c.fix;
  }
  return e;
}

// The one YAML reader of src/ (base/yaml_reader.hpp): syntax errors and binary content refused
// as "file:line: what".
YAML::Node parse(const std::string& name, const std::string& content) {
  return base::YamlReader(name).load(content);
}

}  // namespace

Catalogue Catalogue::load(const std::vector<std::pair<std::string, std::string>>& files) {
  std::map<std::string, CategoryText> categories;
  bool have_categories = false;
  for (const auto& [name, content] : files) {
    if (name == kCategories) {
      categories = read_categories(name, parse(name, content));
      have_categories = true;
    }
  }
  if (!have_categories) base::fail_input(fmt::format("the catalogue has no {}", kCategories));
  Catalogue cat;
  std::vector<CatalogueEntry> from_source;
  std::set<std::string> ids;
  for (const auto& [name, content] : files) {
    if (name == kCategories) continue;
    const YAML::Node doc = parse(name, content);
    for (const auto& n : entries_of(name, doc)) {
      if (name == kSource) {
        from_source.push_back(generated(name, n, categories));
        continue;
      }
      CatalogueEntry e = hand_written(name, n, categories);
      if (!ids.insert(e.id).second) fail(name, n["id"], fmt::format("id '{}' is used twice", e.id));
      cat.entries_.push_back(std::move(e));
    }
  }
  // The most specific source format first: "NCCL_TOPO_FILE set by environment to %s" before
  // "%s set by environment to %s", so a line goes to the format written for it.
  std::stable_sort(from_source.begin(), from_source.end(), [](const auto& a, const auto& b) {
    return a.formats[0].format.fixed > b.formats[0].format.fixed;
  });
  // A source format a hand-written entry reads in full (no requirement on its values) is that
  // entry's: the generated one is dropped and lends its versions.
  for (auto& g : from_source) {
    bool covered = false;
    for (auto& e : cat.entries_) {
      for (auto& f : e.formats) {
        if (f.format.format != g.formats[0].format.format || e.level != g.level) continue;
        if (f.versions.empty()) f.versions = g.formats[0].versions;
        if (e.source.empty()) e.source = g.source;
        covered = covered || e.require.empty();
      }
    }
    if (!covered) cat.entries_.push_back(std::move(g));
  }
  cat.index();
  return cat;
}

const Catalogue& builtin_catalogue() {
  static const Catalogue cat = [] {
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto& f : builtin_catalogue_files()) {
      files.emplace_back(f.name, std::string(reinterpret_cast<const char*>(f.data), f.size));
    }
    return Catalogue::load(files);
  }();
  return cat;
}

}  // namespace gpuorch::doctor
