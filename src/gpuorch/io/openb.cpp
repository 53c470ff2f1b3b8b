#include "gpuorch/io/openb.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

#include "gpuorch/base/csv.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/units.hpp"
#include "gpuorch/cluster/cluster.hpp"

namespace gpuorch::io {
namespace {

void expect_header(const base::CsvTable& table, const std::vector<std::string>& expected,
                   std::size_t columns) {
  const std::string want = fmt::format(
      "{}", fmt::join(expected.begin(), expected.begin() + static_cast<long>(columns), ","));
  bool ok = table.header.size() == columns;
  for (std::size_t i = 0; ok && i < columns; ++i) ok = table.header[i] == expected[i];
  if (!ok) {
    base::fail_input(
        table.path, 1,
        fmt::format("header is '{}', expected '{}'", fmt::join(table.header, ","), want));
  }
}

std::vector<std::string> split_models(const std::string& spec) {
  std::vector<std::string> models;
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t end = spec.find('|', start);
    if (end == std::string::npos) end = spec.size();
    if (end > start) models.push_back(spec.substr(start, end - start));
    start = end + 1;
  }
  return models;
}

}  // namespace

std::vector<cluster::NodeSpec> load_openb_nodes(const std::string& path) {
  return openb_nodes(base::read_csv(path));
}

PodTrace load_openb_pods(const std::string& path) { return openb_pods(base::read_csv(path)); }

std::vector<cluster::NodeSpec> openb_nodes(const base::CsvTable& table) {
  const std::string& path = table.path;
  expect_header(table, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}, 5);
  if (table.rows.empty()) base::fail_input(path, 0, "no nodes (header only)");
  std::vector<cluster::NodeSpec> nodes;
  nodes.reserve(table.rows.size());
  std::set<std::string> names;
  for (const auto& row : table.rows) {
    cluster::NodeSpec n;
    n.name = row.fields[0];
    if (n.name.empty()) base::fail_input(path, row.line, "column 'sn' is empty");
    if (!names.insert(n.name).second) {
      base::fail_input(path, row.line, fmt::format("duplicate node name '{}'", n.name));
    }
    n.cpu_milli = base::parse_nonnegative_int(table, row, 1);
    n.memory_mib = base::parse_nonnegative_int(table, row, 2);
    const std::int64_t gpus = base::parse_nonnegative_int(table, row, 3);
    if (gpus > 64)
      base::fail_input(path, row.line, fmt::format("{} GPUs on one node (at most 64)", gpus));
    n.gpu_count = static_cast<int>(gpus);
    n.gpu_model = row.fields[4];
    if (n.gpu_count > 0 && n.gpu_model.empty()) {
      base::fail_input(path, row.line, "node has GPUs but column 'model' is empty");
    }
    if (n.gpu_count == 0) n.gpu_model.clear();
    if (!n.gpu_model.empty()) n.labels.emplace_back("gpu-model", n.gpu_model);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

PodTrace openb_pods(const base::CsvTable& table) {
  const std::string& path = table.path;
  const std::vector<std::string> columns{
      "name", "cpu_milli", "memory_mib",    "num_gpu",       "gpu_milli",     "gpu_spec",
      "qos",  "pod_phase", "creation_time", "deletion_time", "scheduled_time"};
  if (table.header.size() != 5 && table.header.size() != columns.size()) {
    base::fail_input(
        path, 1,
        fmt::format("header has {} columns, expected 5 ({}) or 11 ({})", table.header.size(),
                    fmt::join(columns.begin(), columns.begin() + 5, ","), fmt::join(columns, ",")));
  }
  expect_header(table, columns, table.header.size());
  if (table.rows.empty()) base::fail_input(path, 0, "no pods (header only)");
  PodTrace trace;
  trace.path = path;
  trace.pods.reserve(table.rows.size());
  std::set<std::string> names;
  for (const auto& row : table.rows) {
    workload::PodSpec p;
    p.name = row.fields[0];
    if (p.name.empty()) base::fail_input(path, row.line, "column 'name' is empty");
    if (!names.insert(p.name).second) {
      base::fail_input(path, row.line, fmt::format("duplicate pod name '{}'", p.name));
    }
    p.cpu_milli = base::parse_nonnegative_int(table, row, 1);
    p.memory_mib = base::parse_nonnegative_int(table, row, 2);
    const std::int64_t gpus = base::parse_nonnegative_int(table, row, 3);
    const std::int64_t milli = base::parse_nonnegative_int(table, row, 4);
    if (gpus > 64) base::fail_input(path, row.line, fmt::format("num_gpu {} is above 64", gpus));
    if (milli > base::kMilliPerGpu) {
      base::fail_input(path, row.line,
                       fmt::format("gpu_milli {} is above 1000 (one whole GPU)", milli));
    }
    if (gpus > 0 && milli == 0) {
      base::fail_input(path, row.line, fmt::format("num_gpu is {} but gpu_milli is 0", gpus));
    }
    if (gpus == 0 && milli > 0) {
      base::fail_input(path, row.line, fmt::format("gpu_milli is {} but num_gpu is 0", milli));
    }
    if (gpus > 1 && milli < base::kMilliPerGpu) {
      base::fail_input(
          path, row.line,
          fmt::format("a pod sharing a GPU ({} milli) must ask for one GPU, not {}", milli, gpus));
    }
    p.gpu_count = static_cast<int>(gpus);
    p.gpu_milli = milli;
    if (table.header.size() > 5 && gpus > 0) p.allowed_models = split_models(row.fields[5]);
    trace.pods.push_back(std::move(p));
    trace.lines.push_back(row.line);
  }
  return trace;
}

std::vector<std::string> unknown_model_warnings(const PodTrace& trace,
                                                const cluster::Cluster& cluster) {
  struct Seen {
    std::size_t first_line = 0;
    std::size_t pods = 0;
  };
  std::map<std::string, Seen> unknown;
  for (std::size_t i = 0; i < trace.pods.size(); ++i) {
    for (const auto& m : trace.pods[i].allowed_models) {
      if (cluster.find_model(m)) continue;
      auto& s = unknown[m];
      if (s.pods++ == 0) s.first_line = trace.lines[i];
    }
  }
  std::vector<std::string> warnings;
  for (const auto& [model, s] : unknown) {
    warnings.push_back(
        fmt::format("{}:{}: warning: GPU model '{}' is not in the cluster ({} {} it)", trace.path,
                    s.first_line, model, s.pods, s.pods == 1 ? "pod names" : "pods name"));
  }
  return warnings;
}

}  // namespace gpuorch::io
