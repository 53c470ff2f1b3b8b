#pragma once
// A whole input file as text, or the one-line input error that names it.
#include <string>

namespace gpuorch::base {

// Throws InputError "<path>: cannot read the <what>" when the file cannot be opened.
std::string read_input_file(const std::string& path, const std::string& what);

}  // namespace gpuorch::base
