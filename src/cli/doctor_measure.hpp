#pragma once
// The doctor checks that measure over time (utilisation, data), registered beside the others by
// add_doctor (doctor.cpp); they print through the same print_findings.
#include <CLI/CLI.hpp>
#include <vector>

#include "cli/verbs.hpp"
#include "gpuorch/doctor/finding.hpp"

namespace gpuorch::cli {

// Text (or --json) to stdout; returns the exit code (0 all well, 1 a problem found).
int print_findings(const std::vector<doctor::Report>& reports, bool json);

// `gpuorch doctor utilisation` and `gpuorch doctor data` on the `doctor` subcommand.
void add_doctor_measure(CLI::App& doctor, Action& action);

}  // namespace gpuorch::cli
