#include "gpuorch/sim/timeline_workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "gpuorch/base/csv.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/utc_time.hpp"
#include "gpuorch/base/whole_number.hpp"

namespace gpuorch::sim {
namespace {

std::size_t column(const base::CsvTable& t, const std::string& name) {
  const auto it = std::find(t.header.begin(), t.header.end(), name);
  if (it == t.header.end()) base::fail_input(t.path, 1, fmt::format("no column '{}'", name));
  return static_cast<std::size_t>(it - t.header.begin());
}

// The longest a rigid job may run, and the latest a job may arrive after the trace's first: each
// tick of a running job costs the engine work (a duration of 1e12 s ran for minutes), and a
// number past Seconds' range wrapped (a duration of 1e19 s became a 1-second job).
constexpr long long kMaxDurationSeconds = 365LL * 86400;
constexpr long long kMaxArrivalSeconds = 3650LL * 86400;
constexpr int kMaxReplicas = 1'000'000;

// A number in [0, max] (`unit` names what it counts in the message: "seconds").
double number_in(const base::CsvTable& t, const base::CsvRow& r, std::size_t c, long long max,
                 const char* unit) {
  const std::string& s = r.fields[c];
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0 ||
      v > double(max)) {
    base::fail_input(t.path, r.line,
                     fmt::format("column '{}': '{}' is not a number of {} in 0..{}", t.header[c],
                                 base::printable(s), unit, max));
  }
  return v;
}

int positive_int(const base::CsvTable& t, const base::CsvRow& r, std::size_t c) {
  const auto v = base::whole_number<int>(r.fields[c], 1, kMaxReplicas);
  if (!v) {
    base::fail_input(t.path, r.line,
                     fmt::format("column '{}': '{}' is not a whole number in 1..{}", t.header[c],
                                 base::printable(r.fields[c]), kMaxReplicas));
  }
  return *v;
}

// A job's priority, as Kubernetes' PriorityClass values go (up to one billion for users).
int priority_of(const base::CsvTable& t, const base::CsvRow& r, std::size_t c) {
  constexpr int kMaxPriority = 1'000'000'000;
  const auto v = base::whole_number<int>(r.fields[c], -kMaxPriority, kMaxPriority);
  if (!v) {
    base::fail_input(t.path, r.line,
                     fmt::format("column 'priority': '{}' is not a whole number in {}..{}",
                                 base::printable(r.fields[c]), -kMaxPriority, kMaxPriority));
  }
  return *v;
}

// "YYYY-MM-DD HH:MM:SS" as seconds since the epoch (UTC); -1 when malformed.
long long parse_timestamp(const std::string& s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d %2d:%2d:%2d", &y, &mo, &d, &h, &mi, &se) != 6) return -1;
  return base::utc_seconds(y, mo, d, h, mi, se);
}

}  // namespace

std::vector<JobSpec> read_pollux_workload(const std::string& path, const std::string& apps_dir,
                                          AppTable& apps) {
  const auto t = base::read_csv(path);
  const std::size_t cn = column(t, "name"), ct = column(t, "time"), ca = column(t, "application"),
                    cr = column(t, "num_replicas"), cb = column(t, "batch_size");
  // Optional tenancy: the job's queue (a leaf of --queues) and priority (higher first).
  const auto optional = [&](const char* name) {
    const auto it = std::find(t.header.begin(), t.header.end(), name);
    return it == t.header.end() ? t.header.size() : std::size_t(it - t.header.begin());
  };
  const std::size_t cq = optional("queue"), cp = optional("priority");
  std::vector<JobSpec> out;
  for (const auto& r : t.rows) {
    JobSpec j;
    j.name = r.fields[cn];
    if (j.name.empty()) base::fail_input(t.path, r.line, "empty job name");
    const double time = number_in(t, r, ct, kMaxArrivalSeconds, "seconds");
    j.submit = static_cast<Seconds>(std::llround(time));
    j.application = r.fields[ca];
    j.replicas = positive_int(t, r, cr);
    j.batch = positive_int(t, r, cb);
    j.file = t.path;
    j.line = r.line;
    j.id = out.size();
    if (cq < t.header.size()) {
      j.queue = r.fields[cq];
      if (j.queue.empty()) base::fail_input(t.path, r.line, "empty queue");
    }
    if (cp < t.header.size()) j.priority = priority_of(t, r, cp);
    if (!apps.contains(j.application)) {
      try {
        apps.emplace(j.application, AppProfile::load(apps_dir, j.application));
      } catch (const base::InputError& e) {
        base::fail_input(t.path, r.line, fmt::format("job {}: {}", j.name, e.what()));
      }
    }
    const AppProfile& app = apps.at(j.application);
    if (j.batch < app.init_batch() || j.batch > app.max_batch()) {
      base::fail_input(t.path, r.line,
                       fmt::format("job {}: batch_size {} outside {}'s profiled {}..{}", j.name,
                                   j.batch, app.name(), app.init_batch(), app.max_batch()));
    }
    // Elastic between one GPU and the most its batch range can use (ncf never scales out, as in
    // the artifact).
    j.min_replicas = 1;
    j.max_replicas = app.name() == "ncf" ? 1 : std::max(1, app.max_batch() / app.min_local());
    out.push_back(std::move(j));
  }
  if (out.empty()) base::fail_input(t.path, 1, "no jobs");
  return out;
}

bool is_philly_trace(const std::string& path) {
  base::LineReader in(path, "CSV file", base::kTraceFileMaxBytes);
  std::string header;
  return in.next(header) && header.rfind("timestamp,duration,num_gpus", 0) == 0;
}

std::vector<JobSpec> read_philly_trace(const std::string& path, std::size_t limit) {
  const auto t = base::read_csv(path);
  const std::size_t cts = column(t, "timestamp"), cd = column(t, "duration"),
                    cg = column(t, "num_gpus");
  // The virtual cluster a job ran in is its tenant: its queue (Philly's 15 VCs).
  const auto cq = std::find(t.header.begin(), t.header.end(), "cluster");
  struct Row {
    long long at;
    std::size_t line;
    Seconds duration;
    int gpus;
    std::string queue;
  };
  std::vector<Row> rows;
  rows.reserve(t.rows.size());
  for (const auto& r : t.rows) {
    const long long at = parse_timestamp(r.fields[cts]);
    if (at < 0) {
      base::fail_input(
          t.path, r.line,
          fmt::format("timestamp '{}' is not YYYY-MM-DD HH:MM:SS", base::printable(r.fields[cts])));
    }
    const double d = number_in(t, r, cd, kMaxDurationSeconds, "seconds");
    std::string queue = workload::kDefaultQueue;
    if (cq != t.header.end()) {
      queue = r.fields[static_cast<std::size_t>(cq - t.header.begin())];
      if (queue.empty()) base::fail_input(t.path, r.line, "empty cluster (the job's queue)");
    }
    rows.push_back({at, r.line, std::max<Seconds>(1, static_cast<Seconds>(std::ceil(d))),
                    positive_int(t, r, cg), std::move(queue)});
  }
  if (rows.empty()) base::fail_input(t.path, 1, "no jobs");
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.at < b.at; });
  for (const Row& r : rows) {
    if (r.at - rows.front().at > kMaxArrivalSeconds) {
      base::fail_input(t.path, r.line,
                       fmt::format("timestamp {} s after the trace's first, past the limit of {} s",
                                   r.at - rows.front().at, kMaxArrivalSeconds));
    }
  }
  if (limit > 0 && rows.size() > limit) rows.resize(limit);
  std::vector<JobSpec> out;
  out.reserve(rows.size());
  const long long start = rows.front().at;
  for (const auto& r : rows) {
    JobSpec j;
    j.name = fmt::format("philly-{}", r.line - 1);
    j.submit = r.at - start;
    j.replicas = r.gpus;
    j.min_replicas = j.max_replicas = r.gpus;
    j.queue = r.queue;
    j.duration = r.duration;
    j.file = t.path;
    j.line = r.line;
    j.id = out.size();
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace gpuorch::sim
