#pragma once
// A shared library opened at run time (dlopen). GPU libraries (NVML, CUDA, NCCL) are never linked:
// a host without a GPU must still run gpuorch, and a GPU host brings its own driver's versions.
// This is the one place that calls dlopen/dlsym.
#include <initializer_list>
#include <string>

namespace gpuorch::base {

class SharedLibrary {
 public:
  // Opens `name` (a soname searched as the dynamic linker does, or a path) with RTLD_NOW |
  // RTLD_LOCAL; on failure loaded() is false and error() says why (dlerror's text).
  explicit SharedLibrary(const std::string& name);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  [[nodiscard]] bool loaded() const { return handle_ != nullptr; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] const std::string& name() const { return name_; }

  // The address of the first of `symbols` the library exports, or nullptr. Several names cover
  // versioned entry points (nvmlInit_v2, then nvmlInit).
  [[nodiscard]] void* symbol(std::initializer_list<const char*> symbols) const;

  // Sets `fn` to the first of `symbols` found; false (and `fn` untouched) when none is.
  template <typename F>
  bool bind(F& fn, std::initializer_list<const char*> symbols) const {
    void* p = symbol(symbols);
    if (p == nullptr) return false;
    // POSIX guarantees that dlsym's object pointer converts to a function pointer.
    fn = reinterpret_cast<F>(p);
    return true;
  }

 private:
  std::string name_;
  void* handle_ = nullptr;
  std::string error_;
};

}  // namespace gpuorch::base
