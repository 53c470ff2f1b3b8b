#pragma once
// `gpuorch doctor nccl-catalogue`: what doctor knows of NCCL, RCCL and PyTorch's messages (the
// catalogue under src/gpuorch/doctor/catalogue/), as a table by category or every entry as JSON.
#include <CLI/CLI.hpp>

#include "cli/verbs.hpp"

namespace gpuorch::cli {

void add_doctor_catalogue(CLI::App& doctor, Action& action);

}  // namespace gpuorch::cli
