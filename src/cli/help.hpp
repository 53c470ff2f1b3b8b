#pragma once
// How every verb's --help reads: each option with a default says it ("(default: 1)"), and each
// verb ends with examples to copy.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gpuorch::cli {

// CLI11's formatter, with an option's default at the end of its description instead of glued to
// its type ("TEXT=fgd" read as part of the name).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
};

// What `(default: X)` says for `opt`, or empty when it has none worth showing (flags, empty
// values).
std::string shown_default(const CLI::Option& opt);

// Sets the "Examples:" footer of every verb from the table in help.cpp (keyed by the verb's path,
// such as "sim fill"). Returns the table's paths that name no verb (the tests require none, and
// require every visible verb to have examples).
std::vector<std::string> add_examples(CLI::App& app);

}  // namespace gpuorch::cli
