// doctor's NCCL catalogue (src/gpuorch/doctor/catalogue/*.yaml): it loads, every format of every
// entry recognises its own example line and gives it to that entry (or to one of the same advice),
// and a malformed catalogue is refused with the file and line of the mistake.
#include "gpuorch/doctor/nccl_catalogue.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpuorch/doctor/nccl_catalogue_files.hpp"
#include "gpuorch/doctor/nccl_format.hpp"
#include "gpuorch/doctor/nccl_log.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using doctor::Catalogue;
using doctor::CatalogueEntry;
using doctor::LineLevel;

// Entries that give the same advice: a line may go to any of them (e.g. an NCCL source format that
// two hand-written entries read with different requirements, or two generic formats of a category).
bool same_group(const CatalogueEntry& a, const CatalogueEntry& b) {
  if (&a == &b) return true;
  // source.yaml's formats are the generic fallback: one group per line level (some formats differ
  // only in a length modifier between versions, "%zi" and "%zu", and read the same lines).
  if (a.generated && b.generated) return a.level == b.level;
  return !a.finding.empty() && a.finding == b.finding && a.severity == b.severity;
}

std::string where(const CatalogueEntry& e, std::size_t format) {
  return fmt::format("{}:{} ({}, format '{}')", e.file, e.formats[format].line, e.id,
                     e.formats[format].format.format);
}

TEST(NcclCatalogue, LoadsWithEveryWarnOfNcclsSource) {
  const Catalogue& cat = doctor::builtin_catalogue();
  std::size_t generated = 0, warn = 0, hand = 0;
  for (const auto& e : cat.entries()) {
    generated += e.generated;
    hand += !e.generated;
    warn += e.level == LineLevel::kWarn;
  }
  // `gpuorch doctor nccl-catalogue`: 1,509 entries, 938 of them WARN (NCCL 2.4-2.30, RCCL 5.4-6.2);
  // hand-written entries take over the ones they read in full.
  EXPECT_GT(generated, 1300U);
  EXPECT_GT(warn, 900U);
  EXPECT_GT(hand, 70U);
}

// The test per entry: each format's example line, fed back, is read by that entry (or its group).
TEST(NcclCatalogue, EveryFormatRecognisesItsOwnExample) {
  const Catalogue& cat = doctor::builtin_catalogue();
  std::size_t checked = 0;
  std::vector<std::string> wrong;
  for (const auto& e : cat.entries()) {
    for (std::size_t f = 0; f < e.formats.size(); ++f) {
      ++checked;
      const auto m = cat.match(e.level, e.formats[f].example);
      if (!m) {
        wrong.push_back(where(e, f) + ": its example matches no entry");
      } else if (!same_group(*m->entry, e)) {
        wrong.push_back(where(e, f) + ": its example goes to " + m->entry->file + " " +
                        m->entry->id);
      }
    }
  }
  EXPECT_GT(checked, 1400U);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " of " << checked << ":\n"
                             << fmt::format("{}", fmt::join(wrong, "\n"));
}

// The same through the log reader, with NCCL's own line prefix (and PyTorch's lines as they are).
TEST(NcclCatalogue, EveryExampleIsRecognisedInALog) {
  const Catalogue& cat = doctor::builtin_catalogue();
  std::vector<std::string> wrong;
  for (const auto& e : cat.entries()) {
    for (std::size_t f = 0; f < e.formats.size(); ++f) {
      const std::string& ex = e.formats[f].example;
      const std::string line = e.level == LineLevel::kAny ? ex
                               : e.level == LineLevel::kWarn
                                   ? "gpu01:4101:4190 [0] init.cc:748 NCCL WARN " + ex
                                   : "gpu01:4101:4190 [0] NCCL INFO " + ex;
      const auto log = doctor::parse_nccl_log(line + "\n", "example.log", cat);
      const bool found = std::any_of(log.hits.begin(), log.hits.end(), [&](const auto& h) {
        return same_group(*h.entry, e) && h.first_line == 1;
      });
      if (!found) wrong.push_back(where(e, f));
    }
  }
  EXPECT_TRUE(wrong.empty()) << fmt::format("{}", fmt::join(wrong, "\n"));
}

TEST(NcclCatalogue, HandWrittenEntriesTakeTheVersionsOfNcclsSource) {
  const Catalogue& cat = doctor::builtin_catalogue();
  const auto it = std::find_if(cat.entries().begin(), cat.entries().end(),
                               [](const auto& e) { return e.id == "init.duplicate-gpu"; });
  ASSERT_NE(it, cat.entries().end());
  EXPECT_EQ(it->formats[0].versions, "2.8-2.29");  // "... CUDA device %lx"
  EXPECT_EQ(it->formats[1].versions, "2.5-2.7");   // "... CUDA device %x"
  EXPECT_EQ(it->source, "src/init.cc");
}

TEST(NcclCatalogue, FieldsFillTheAdvice) {
  const Catalogue& cat = doctor::builtin_catalogue();
  const auto m = cat.match(LineLevel::kWarn,
                           "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->entry->id, "init.duplicate-gpu");
  EXPECT_EQ(m->values, (std::vector<std::string>{"0", "1", "60"}));
  EXPECT_EQ(
      doctor::fill_fields("ranks {rank} and {peer} on {host}, bus {3} {not a field}",
                          m->entry->formats[m->format].fields, m->values, {{"host", "gpu01"}}),
      "ranks 0 and 1 on gpu01, bus 60 {not a field}");
}

TEST(NcclCatalogue, RequirementsPickTheEntry) {
  const Catalogue& cat = doctor::builtin_catalogue();
  EXPECT_EQ(cat.match(LineLevel::kInfo, "NCCL_IB_DISABLE set by environment to 1.")->entry->id,
            "env.ib-disable");
  // Off is not a switch, but says RDMA is wanted.
  EXPECT_EQ(cat.match(LineLevel::kInfo, "NCCL_IB_DISABLE set by environment to 0.")->entry->id,
            "env.ib-enabled");
  EXPECT_TRUE(cat.match(LineLevel::kInfo, "NCCL_BUFFSIZE set by environment to 1048576.")
                  ->entry->generated);
  EXPECT_EQ(cat.match(LineLevel::kInfo, "NCCL_ALGO set by environment to Tree")->entry->id,
            "env.algo-forced");
  EXPECT_EQ(cat.match(LineLevel::kInfo, "NCCL_ALGO set by environment to ^NVLS")->entry->id,
            "env.algo-excluded");
  EXPECT_EQ(cat.match(LineLevel::kWarn, "Cuda failure 'out of memory'")->entry->id,
            "init.cuda-oom");
  EXPECT_EQ(cat.match(LineLevel::kWarn, "Cuda failure 'unknown error'")->entry->id,
            "init.cuda-failure");
}

TEST(NcclFormat, PrintfConversionsBecomePatterns) {
  const auto f = doctor::compile_format("rank %d on %s bus %lx load %.2f%% ptr %p", false);
  EXPECT_EQ(f.key, " load ");  // the first of the longest fixed texts
  EXPECT_EQ(f.head, "rank ");
  EXPECT_EQ(f.conversions, 5U);
  const auto v = doctor::match_format(f, "rank -3 on gpu01 bus 1b000 load 0.50% ptr 0x7f.");
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, (std::vector<std::string>{"-3", "gpu01", "1b000", "0.50", "0x7f"}));
  EXPECT_FALSE(doctor::match_format(f, "rank x on gpu01 bus 1b000 load 0.50% ptr 0x7f"));
  EXPECT_EQ(doctor::example_line("rank %d on %s bus %lx %5.1f%%"), "rank 1 on s2 bus 3 4.5%");
  EXPECT_THROW(doctor::compile_format("%s: %d", false), std::invalid_argument);
  EXPECT_THROW(doctor::compile_format("a long enough text %y", false), std::invalid_argument);
}

// A malformed catalogue is refused at load with "file:line: what is wrong".
const char* kCategories = "categories:\n  init:\n    meaning: m\n    cause: c\n    fix: f\n";

std::string load_error(const std::string& entries) {
  return test::input_error([&] {
    Catalogue::load({{"categories.yaml", kCategories}, {"mine.yaml", entries}});
  });
}

const char* kGood =
    "entries:\n"
    "  - id: a\n"
    "    library: nccl\n"
    "    level: WARN\n"
    "    category: init\n"
    "    formats:\n"
    "      - {format: \"Something failed on rank %d\", example: \"Something failed on rank 1\"}\n"
    "    fields: [rank]\n"
    "    severity: error\n"
    "    finding: nccl.something\n"
    "    meaning: m\n"
    "    cause: c\n"
    "    fix: f\n";

std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(NcclCatalogue, AMalformedCatalogueIsRefusedWithItsLine) {
  EXPECT_EQ(
      Catalogue::load({{"categories.yaml", kCategories}, {"mine.yaml", kGood}}).entries().size(),
      1U);
  EXPECT_EQ(load_error(with("    fix: f\n", "    fix: f\n    colour: red\n")),
            "mine.yaml:14: unknown key 'colour'");
  EXPECT_EQ(load_error(with("level: WARN", "level: ERROR")),
            "mine.yaml:4: level 'ERROR' is not INFO, WARN or ANY");
  EXPECT_EQ(load_error(with("rank %d\", ex", "rank %y\", ex")),
            "mine.yaml:7: unknown conversion '%y' at offset 25 of the format");
  EXPECT_EQ(load_error(with("Something failed on rank %d\", ex", "%s: %d\", ex")),
            "mine.yaml:7: the format has less than 6 characters of fixed text, so it would match "
            "nearly any line");
  EXPECT_EQ(load_error(with("category: init", "category: nowhere")),
            "mine.yaml:5: category 'nowhere' is not in categories.yaml");
  EXPECT_EQ(load_error(with("severity: error", "severity: fatal")),
            "mine.yaml:9: severity 'fatal' is not note, info, warning or error");
  EXPECT_EQ(load_error(with("    finding: nccl.something\n", "")),
            "mine.yaml:2: 'finding' is missing");
  EXPECT_EQ(load_error(with("fields: [rank]", "fields: [rank, peer]")),
            "mine.yaml:8: 2 field names for a format with 1 conversions");
  EXPECT_EQ(load_error(with("fields: [rank]", "fields: [rank]\n    require: {peer: \"1\"}")),
            "mine.yaml:9: 'peer' is not a field");
  EXPECT_NE(load_error(with("fields: [rank]", "fields: [rank]\n    require: {rank: \"[1\"}"))
                .find("mine.yaml:9: bad pattern for 'rank'"),
            std::string::npos);
  EXPECT_EQ(load_error(std::string(kGood) + std::string(kGood).substr(9)),
            "mine.yaml:14: id 'a' is used twice");
  EXPECT_EQ(load_error(with("    formats:\n", "    formats: [\n")).substr(0, 10), "mine.yaml:");
  EXPECT_EQ(test::input_error([] {
              Catalogue::load({{"mine.yaml", kGood}});
            }),
            "the catalogue has no categories.yaml");
}

// The catalogue as shipped is what the program embeds: the same files, byte for byte.
TEST(NcclCatalogue, TheProgramCarriesTheRepositorysFiles) {
  const auto files = doctor::builtin_catalogue_files();
  EXPECT_GE(files.size(), 7U);
  for (const auto& f : files) {
    const std::string path =
        std::string(test::source_dir()) + "/src/gpuorch/doctor/catalogue/" + f.name;
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A rebuild embeds the files again; a difference means the build is older than the data.
    EXPECT_TRUE(text == std::string(reinterpret_cast<const char*>(f.data), f.size))
        << f.name << ": " << text.size() << " bytes in the repository, " << f.size << " embedded";
  }
}

}  // namespace
}  // namespace gpuorch
