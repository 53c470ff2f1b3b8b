#pragma once
// NVIDIA's device-plugin flags and environment variables on `gpuorch device-plugin`
// (k8s::nvidia_flags(): the same names, aliases, variables and defaults). As in NVIDIA's plugin a
// flag beats its variable, which beats the config file, which beats the default.
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gpuorch/k8s/deviceplugin/config.hpp"

namespace gpuorch::cli {

class NvidiaPluginFlags {
 public:
  void add_to(CLI::App& cmd);
  // The value given on the command line, else in the first of its variables that is set.
  [[nodiscard]] std::optional<std::string> value(const std::string& name) const;
  // The config file's path (--config-file / CONFIG_FILE), "" for none.
  [[nodiscard]] std::string config_file() const { return value("config-file").value_or(""); }
  // The file (when there is one) with every flag and variable that was set applied over it.
  // Throws base::InputError on a bad file or value.
  [[nodiscard]] k8s::PluginConfig effective_config() const;

 private:
  std::map<std::string, std::string> text_;
  std::map<std::string, bool> switch_;
  std::map<std::string, CLI::Option*> options_;
};

}  // namespace gpuorch::cli
