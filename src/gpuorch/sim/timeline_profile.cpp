#include "gpuorch/sim/timeline_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "gpuorch/base/csv.hpp"
#include "gpuorch/base/error.hpp"

namespace gpuorch::sim {
namespace {

// The artifact's per-application overrides (applications.py's APPLICATIONS table).
int max_epochs_override(const std::string& app) {
  static const std::map<std::string, int> table = {{"bert", 2},     {"cifar10", 100},
                                                   {"ncf", 10},     {"imagenet", 90},
                                                   {"deepspeech2", 80}, {"yolov3", 50}};
  const auto it = table.find(app);
  return it == table.end() ? 0 : it->second;
}

double number(const base::CsvTable& t, const base::CsvRow& row, std::size_t column) {
  const std::string& text = row.fields[column];
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || v < 0) {
    base::fail_input(
        t.path, row.line,
        fmt::format("column '{}': '{}' is not a non-negative number", t.header[column], text));
  }
  return v;
}

// A step or sync time in seconds: a step of 0 s made every job finish at once or, all zero, never
// run; a step over a day is no training step.
constexpr double kMaxStepSeconds = 86400;
double seconds(const base::CsvTable& t, const base::CsvRow& row, std::size_t column,
               bool positive) {
  const double v = number(t, row, column);
  if ((positive && v <= 0) || v > kMaxStepSeconds) {
    base::fail_input(
        t.path, row.line,
        fmt::format("column '{}': '{}' is not a number of seconds in {}0, {}]", t.header[column],
                    row.fields[column], positive ? "(" : "[", kMaxStepSeconds));
  }
  return v;
}

std::size_t column(const base::CsvTable& t, const std::string& name) {
  const auto it = std::find(t.header.begin(), t.header.end(), name);
  if (it == t.header.end()) base::fail_input(t.path, 1, fmt::format("no column '{}'", name));
  return static_cast<std::size_t>(it - t.header.begin());
}

// is_directory / exists that report an error of the file system (a symlink loop: ELOOP) as the
// input's problem, one line, instead of throwing filesystem_error.
bool is(const std::filesystem::path& path, bool directory) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory) {
    base::fail_input(fmt::format("{}: {}", path.string(), ec.message()));
  }
  return directory ? std::filesystem::is_directory(st) : std::filesystem::exists(st);
}

base::CsvTable read_table(const std::filesystem::path& path, const std::string& app) {
  if (!is(path, false)) {
    base::fail_input(
        fmt::format("{}: missing profile file of application '{}'", path.string(), app));
  }
  auto t = base::read_csv(path.string());
  if (t.rows.empty()) base::fail_input(t.path, 1, "no rows");
  return t;
}

int whole(const base::CsvTable& t, const base::CsvRow& row, std::size_t c) {
  const double v = number(t, row, c);
  if (v != std::floor(v) || v < 1 || v > 1e9) {
    base::fail_input(t.path, row.line, fmt::format("column '{}': '{}' is not a positive integer",
                                                   t.header[c], row.fields[c]));
  }
  return static_cast<int>(v);
}

}  // namespace

long long placement_id(std::span<const int> gpus_per_node) {
  std::vector<int> p;
  for (const int g : gpus_per_node) {
    if (g > 0) p.push_back(g);
  }
  if (p.empty()) return 0;
  std::vector<int> best = p;
  for (std::size_t r = 1; r < p.size(); ++r) {
    std::rotate(p.begin(), p.begin() + 1, p.end());
    if (p < best) best = p;
  }
  long long id = 0;
  for (const int g : best) {
    // Digits as the profile writes them; a node with 10 or more GPUs has no measured row anyway.
    id = id * 10 + std::min(g, 9);
  }
  return id;
}

AppProfile AppProfile::load(const std::string& dir, const std::string& name) {
  const std::filesystem::path root = std::filesystem::path(dir) / name;
  if (!is(root, true)) {
    base::fail_input(
        fmt::format("{}: unknown application '{}' (no profile directory)", root.string(), name));
  }
  AppProfile a;
  a.name_ = name;

  // Validation tables: one per total batch size, named validation-<B>.csv.
  std::error_code ec;
  std::filesystem::directory_iterator entries(root, ec);
  if (ec) base::fail_input(fmt::format("{}: {}", root.string(), ec.message()));
  for (const auto& entry : entries) {
    const std::string f = entry.path().filename().string();
    if (f.rfind("validation-", 0) != 0 || entry.path().extension() != ".csv") continue;
    const std::string digits = f.substr(11, f.size() - 15);
    int batch = 0;
    const auto [end, parsed] =
        std::from_chars(digits.data(), digits.data() + digits.size(), batch);
    if (parsed != std::errc() || end != digits.data() + digits.size() || batch <= 0) continue;
    const auto t = read_table(entry.path(), name);
    const std::size_t cp = column(t, "progress"), ci = column(t, "iteration"),
                      cs = column(t, "grad_sqr"), cv = column(t, "grad_var");
    auto& rows = a.validation_[batch];
    for (const auto& r : t.rows) {
      rows.push_back({number(t, r, cp), number(t, r, ci), {number(t, r, cs), number(t, r, cv)}});
    }
  }
  if (a.validation_.empty()) {
    base::fail_input(fmt::format("{}: missing profile file of application '{}' (validation-<B>.csv)",
                                 root.string(), name));
  }
  a.init_batch_ = a.validation_.begin()->first;
  a.max_batch_ = a.validation_.rbegin()->first;
  std::size_t shortest = std::numeric_limits<std::size_t>::max();
  for (const auto& [b, rows] : a.validation_) shortest = std::min(shortest, rows.size());
  a.max_epochs_ = max_epochs_override(name);
  if (a.max_epochs_ == 0 || static_cast<std::size_t>(a.max_epochs_) > shortest) {
    a.max_epochs_ = static_cast<int>(shortest);
  }
  a.thresholds_.assign(static_cast<std::size_t>(a.max_epochs_) + 1, 0.0);
  for (std::size_t e = 1; e < a.thresholds_.size(); ++e) {
    double m = std::numeric_limits<double>::infinity();
    for (const auto& [b, rows] : a.validation_) m = std::min(m, rows[e - 1].progress);
    a.thresholds_[e] = m;
  }

  // Placements: one row per (placement, per-GPU batch).
  const auto pt = read_table(root / "placements.csv", name);
  const std::size_t pp = column(pt, "placement"), pl = column(pt, "local_bsz"),
                    ps = column(pt, "step_time"), py = column(pt, "sync_time");
  std::map<std::array<int, 3>, std::pair<StepTime, int>> means;  // (nodes, replicas, local)
  a.min_local_ = std::numeric_limits<int>::max();
  for (const auto& r : pt.rows) {
    const std::string& id = r.fields[pp];
    std::vector<int> gpus;
    for (const char c : id) {
      if (c < '1' || c > '9') {
        base::fail_input(pt.path, r.line, fmt::format("placement '{}' is not a digit string", id));
      }
      gpus.push_back(c - '0');
    }
    if (gpus.empty()) base::fail_input(pt.path, r.line, "empty placement");
    const int local = whole(pt, r, pl);
    const StepTime st{seconds(pt, r, ps, true), seconds(pt, r, py, false)};
    a.placements_[placement_id(gpus)].push_back({local, st});
    int replicas = 0;
    for (const int g : gpus) replicas += g;
    auto& m = means[{static_cast<int>(gpus.size()), replicas, local}];
    m.first.step += st.step;
    m.first.sync += st.sync;
    ++m.second;
    a.min_local_ = std::min(a.min_local_, local);
    a.max_local_ = std::max(a.max_local_, local);
  }
  if (name == "yolov3") a.max_local_ = 8;  // the artifact's override (its traces reach 16)
  for (auto& [id, samples] : a.placements_) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const Sample& x, const Sample& y) { return x.local < y.local; });
  }

  // Larger jobs: placement means then the scalability rows, in the artifact's point order.
  std::vector<std::array<double, 3>> points;
  std::vector<std::vector<double>> values;
  for (const auto& [key, m] : means) {
    points.push_back({double(key[0]), double(key[1]), double(key[2])});
    values.push_back({m.first.step / m.second, m.first.sync / m.second});
  }
  const std::filesystem::path scal = root / "scalability.csv";
  if (is(scal, false)) {
    const auto st = read_table(scal, name);
    const std::size_t sn = column(st, "num_nodes"), sr = column(st, "num_replicas"),
                      sl = column(st, "local_bsz"), ss = column(st, "step_time"),
                      sy = column(st, "sync_time");
    for (const auto& r : st.rows) {
      points.push_back(
          {double(whole(st, r, sn)), double(whole(st, r, sr)), double(whole(st, r, sl))});
      values.push_back({seconds(st, r, ss, true), seconds(st, r, sy, false)});
    }
  }
  try {
    a.large_ = std::make_shared<const Delaunay3>(std::move(points), std::move(values));
  } catch (const std::runtime_error& e) {  // too few points, or all on one plane
    base::fail_input(fmt::format("{}: {}", root.string(), e.what()));
  }
  return a;
}

StepTime AppProfile::throughput(std::span<const int> gpus_per_node, int local) const {
  const long long id = placement_id(gpus_per_node);
  const auto it = placements_.find(id);
  if (it != placements_.end()) {
    const auto& s = it->second;
    if (local <= s.front().local) return s.front().time;
    if (local >= s.back().local) return s.back().time;
    const auto hi = std::lower_bound(s.begin(), s.end(), local,
                                     [](const Sample& x, int l) { return x.local < l; });
    if (hi->local == local) return hi->time;
    const auto lo = hi - 1;
    const double f = double(local - lo->local) / double(hi->local - lo->local);
    return {lo->time.step + f * (hi->time.step - lo->time.step),
            lo->time.sync + f * (hi->time.sync - lo->time.sync)};
  }
  int nodes = 0, replicas = 0;
  for (const int g : gpus_per_node) {
    if (g > 0) {
      ++nodes;
      replicas += g;
    }
  }
  const std::array<int, 3> key{std::min(nodes, 16), replicas, local};
  const auto cached = large_cache_.find(key);
  if (cached != large_cache_.end()) return cached->second;
  auto v = large_->interpolate({double(key[0]), double(key[1]), double(key[2])});
  // Outside the measured hull (the artifact aborts): the nearest measured batch, then the
  // nearest measured replica count, so a policy exploring there sees a plausible, finite time.
  for (int l = local; !v && l > 1; l = l * 3 / 4) {
    v = large_->interpolate({double(key[0]), double(key[1]), double(std::max(l, min_local_))});
    if (l <= min_local_) break;
  }
  for (int r = replicas; !v && r > key[0]; --r) {
    v = large_->interpolate({double(key[0]), double(r), double(std::clamp(local, min_local_, 128))});
  }
  StepTime out{1e9, 0};
  if (v) out = {(*v)[0], (*v)[1]};
  large_cache_.emplace(key, out);
  return out;
}

template <typename F>
double AppProfile::interpolate_batch(double batch, int epoch, F field) const {
  const auto e = static_cast<std::size_t>(std::max(epoch, 0));
  auto row = [&](const std::vector<ValidationRow>& rows) {
    return field(rows[std::min(e, rows.size() - 1)]);
  };
  auto hi = validation_.lower_bound(static_cast<int>(std::ceil(batch)));
  if (hi == validation_.end()) return row(validation_.rbegin()->second);
  if (hi == validation_.begin() || double(hi->first) == batch) return row(hi->second);
  const auto lo = std::prev(hi);
  const double f = (batch - lo->first) / double(hi->first - lo->first);
  const double a = row(lo->second), b = row(hi->second);
  return a + f * (b - a);
}

GradStats AppProfile::grad_stats(double batch, int epoch) const {
  return {interpolate_batch(batch, epoch, [](const ValidationRow& r) { return r.grad.sqr; }),
          interpolate_batch(batch, epoch, [](const ValidationRow& r) { return r.grad.var; })};
}

double AppProfile::iteration(double batch, int epoch) const {
  return interpolate_batch(batch, epoch, [](const ValidationRow& r) { return r.iteration; });
}

double AppProfile::progress_threshold(int epoch) const {
  const auto e = static_cast<std::size_t>(std::clamp(epoch, 0, max_epochs_));
  return thresholds_[e];
}

}  // namespace gpuorch::sim
