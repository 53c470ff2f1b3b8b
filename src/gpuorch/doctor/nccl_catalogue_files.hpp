#pragma once
// The catalogue's YAML files as built into the program: cmake/embed_catalogue.cmake turns
// src/gpuorch/doctor/catalogue/*.yaml into bytes at build time, so the data stays a file in the
// repository while a portable binary needs nothing beside it at run time.
#include <cstddef>
#include <vector>

namespace gpuorch::doctor {

struct CatalogueFile {
  const char* name;  // "env.yaml"
  const unsigned char* data;
  std::size_t size;
};

std::vector<CatalogueFile> builtin_catalogue_files();

}  // namespace gpuorch::doctor
