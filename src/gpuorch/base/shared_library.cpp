#include "gpuorch/base/shared_library.hpp"

#include <dlfcn.h>

namespace gpuorch::base {

SharedLibrary::SharedLibrary(const std::string& name)
    : name_(name), handle_(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ == nullptr) {
    const char* e = dlerror();
    // dlerror's text already starts with the library's name.
    error_ = e != nullptr ? e : name + ": cannot be loaded";
  }
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* SharedLibrary::symbol(std::initializer_list<const char*> symbols) const {
  if (handle_ == nullptr) return nullptr;
  for (const char* s : symbols) {
    if (void* p = dlsym(handle_, s)) return p;
  }
  return nullptr;
}

}  // namespace gpuorch::base
