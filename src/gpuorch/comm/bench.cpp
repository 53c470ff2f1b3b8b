#include "gpuorch/comm/bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include "gpuorch/base/error.hpp"

namespace gpuorch::comm {
namespace {

struct CollectiveInfo {
  Collective c;
  std::string_view name;
};
constexpr std::array<CollectiveInfo, 7> kCollectives{{
    {Collective::all_reduce, "all_reduce"},
    {Collective::all_gather, "all_gather"},
    {Collective::reduce_scatter, "reduce_scatter"},
    {Collective::broadcast, "broadcast"},
    {Collective::reduce, "reduce"},
    {Collective::alltoall, "alltoall"},
    {Collective::sendrecv, "sendrecv"},
}};

// ncclDataType_t values (nccl.h): int8 0, uint8 1, int32 2, uint32 3, int64 4, uint64 5, float16 6,
// float32 7, float64 8, bfloat16 9. Half types are not offered: the host check needs conversions.
constexpr std::array<DataType, 8> kTypes{{
    {"int8", 0, 1, false},
    {"uint8", 1, 1, false},
    {"int32", 2, 4, false},
    {"uint32", 3, 4, false},
    {"int64", 4, 8, false},
    {"uint64", 5, 8, false},
    {"float", 7, 4, true},
    {"double", 8, 8, true},
}};
// ncclRedOp_t: sum 0, prod 1, max 2, min 3, avg 4.
constexpr std::array<RedOp, 5> kOps{{{"sum", 0}, {"prod", 1}, {"max", 2}, {"min", 3}, {"avg", 4}}};

}  // namespace

std::optional<Collective> parse_collective(std::string_view name) {
  constexpr std::string_view kBinarySuffix = "_perf";
  if (name.size() > kBinarySuffix.size() && name.ends_with(kBinarySuffix)) {
    name.remove_suffix(kBinarySuffix.size());
  }
  for (const auto& c : kCollectives) {
    if (c.name == name) return c.c;
  }
  return std::nullopt;
}

std::string_view collective_name(Collective c) {
  for (const auto& i : kCollectives) {
    if (i.c == c) return i.name;
  }
  return "?";
}

std::string test_name(Collective c) { return fmt::format("{}_perf", collective_name(c)); }

const std::vector<std::string_view>& collective_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& c : kCollectives) v.push_back(c.name);
    return v;
  }();
  return names;
}

bool has_redop(Collective c) {
  return c == Collective::all_reduce || c == Collective::reduce_scatter || c == Collective::reduce;
}
bool has_root(Collective c) { return c == Collective::broadcast || c == Collective::reduce; }
bool size_is_whole_array(Collective c) {
  return c == Collective::all_gather || c == Collective::reduce_scatter ||
         c == Collective::alltoall;
}
bool checks_in_place(Collective c) {
  return c != Collective::alltoall && c != Collective::sendrecv;
}
std::string_view redop_column(Collective c, const RedOp& op) {
  return has_redop(c) || c == Collective::sendrecv ? op.name : std::string_view("none");
}

double busbw_factor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::all_reduce:
      return 2.0 * (n - 1) / n;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
      return (n - 1) / n;
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::sendrecv:
      return 1.0;
  }
  return 1.0;
}

std::size_t parse_size(std::string_view text, std::string_view flag) {
  auto bad = [&] {
    base::fail_input(fmt::format("{} {}: not a size (a number with an optional K, M or G)", flag,
                                 text.empty() ? "''" : text));
  };
  if (text.empty()) bad();
  std::size_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    const auto digit = static_cast<std::size_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) bad();
    value = value * 10 + digit;
  }
  if (i == 0) bad();
  unsigned shift = 0;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        bad();
    }
    ++i;
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;
  }
  if (i != text.size()) bad();
  if (shift > 0 && value > (std::numeric_limits<std::size_t>::max() >> shift)) bad();
  return value << shift;
}

std::optional<DataType> parse_type(std::string_view name) {
  if (name == "float32") name = "float";
  if (name == "float64") name = "double";
  for (const auto& t : kTypes) {
    if (t.name == name) return t;
  }
  return std::nullopt;
}

std::optional<RedOp> parse_op(std::string_view name) {
  for (const auto& o : kOps) {
    if (o.name == name) return o;
  }
  return std::nullopt;
}

void validate(const Options& o) {
  if (o.min_bytes > o.max_bytes) {
    base::fail_input(
        fmt::format("-b {} is larger than -e {}: sizes out of order", o.min_bytes, o.max_bytes));
  }
  if (o.step_factor < 1.0 || !std::isfinite(o.step_factor)) {
    base::fail_input("-f must be at least 1");
  }
  if (o.step_factor <= 1.0 && o.step_bytes == 0 && o.min_bytes != o.max_bytes) {
    base::fail_input("-i 0 with -f 1 never reaches -e");
  }
  if (o.threads < 1 || o.gpus < o.threads || o.gpus % o.threads != 0) {
    base::fail_input("-t must be at least 1");
  }
  if (o.gpus < 1 || o.gpus > 1024) base::fail_input("-g x -t must be between 1 and 1024");
  if (o.iters < 1) base::fail_input("-n must be at least 1");
  if (o.agg_iters < 1) base::fail_input("-m must be at least 1");
  if (o.average < 0 || o.average > 3) base::fail_input("-a must be 0, 1, 2 or 3");
  if (o.warmup < 0) base::fail_input("-w must be 0 or more");
  if (o.check < 0) base::fail_input("-c must be 0 or more");
  if (o.blocking < 0 || o.blocking > 3) base::fail_input("-z must be 0, 1, 2 or 3");
  const int nranks = o.ranks > 0 ? o.ranks : o.gpus;
  if (has_root(o.collective) && (o.root < 0 || o.root >= nranks)) {
    base::fail_input(fmt::format("-r {} is not a rank (0..{})", o.root, nranks - 1));
  }
  if (o.op.name == "avg" && !o.type.floating) {
    base::fail_input("-o avg needs a floating type (-d float or double) for an exact check");
  }
}

std::vector<SizePoint> size_sweep(const Options& o, int nranks) {
  std::vector<SizePoint> out;
  const std::size_t per =
      o.type.bytes *
      (size_is_whole_array(o.collective) ? static_cast<std::size_t>(nranks) : std::size_t{1});
  std::size_t size = o.min_bytes;
  while (size <= o.max_bytes) {
    const std::size_t count = size / per;
    out.push_back({count * per, count});
    std::size_t next = o.step_factor > 1.0
                           ? static_cast<std::size_t>(static_cast<double>(size) * o.step_factor)
                           : size + o.step_bytes;
    if (next <= size) next = size + 1;  // -b 0 -f 2: 0, 1, 2, 4, ...
    if (next < size) break;
    size = next;
    if (out.size() > 100000) break;
  }
  return out;
}

Timing make_timing(Collective c, int nranks, std::size_t bytes, double seconds, long long wrong) {
  Timing t;
  t.time_us = seconds * 1e6;
  t.algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  t.busbw = t.algbw * busbw_factor(c, nranks);
  t.wrong = wrong;
  return t;
}

std::string header(const Options& o, const RunInfo& info) {
  // nccl-tests prints its own version and NCCL's header and library codes; gpuorch has no NCCL
  // headers (it declares the entry points it loads), so it says 0 there.
  std::string s = fmt::format("# nccl-tests version gpuorch-{} nccl-headers=0 nccl-library={}\n",
                              GPUORCH_VERSION, info.nccl_version);
  s += fmt::format("# Collective test starting: {}\n", test_name(o.collective));
  const bool factor = o.step_factor > 1.0;
  s += fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} "
      "agg iters: {} validation: {} graph: 0 unalign: 0\n",
      o.threads, o.gpus / o.threads, o.min_bytes, o.max_bytes,
      factor ? fmt::format("{:g}", o.step_factor) : fmt::format("{}", o.step_bytes),
      factor ? "factor" : "bytes", o.warmup, o.iters, o.agg_iters, o.check);
  if (o.blocking == 1) {
    s += "# Blocking Enabled: wait for completion and barrier after each collective \n";
  }
  if (o.blocking > 1) {
    s += "# Blocking Enabled: wait for completion after each collective (no barrier) \n";
  }
  s += "#\n";
  if (!info.library.empty())
    s += fmt::format("# gpuorch {} backend: {}\n", o.backend, info.library);
  s += "# Using devices\n";
  for (std::size_t r = 0; r < info.devices.size(); ++r) {
    s += fmt::format("#  Rank {:2} Group {:2} {}\n", r, 0, info.devices[r]);
  }
  return s;
}

std::string table_header() {
  const char* const blank = "";
  return fmt::format(
      "#\n"
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       "
      "in-place          \n"
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  "
      "{:>6} \n"
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  "
      "{:>6} \n",
      blank, blank, blank, blank, blank,  //
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
      "busbw", "#wrong",  //
      "(B)", "(elements)", blank, blank, blank, "(us)", "(GB/s)", "(GB/s)", blank, "(us)", "(GB/s)",
      "(GB/s)", blank);
}

std::string number_cell(double value, int width) {
  int digits = 0;  // digits of the integer part (0 below 1)
  for (double v = 1; value >= v && digits < 400; v *= 10) ++digits;
  if (digits < width - 2) return fmt::format("{:{}.2f}", value, width);
  if (digits < width - 1) return fmt::format("{:{}.1f}", value, width);
  if (digits < width + 1) return fmt::format("{:{}.0f}", value, width);
  if (width >= 7) return fmt::format("{:{}.1e}", value, width);
  return fmt::format("{:{}.0e}", value, width);
}

namespace {
std::string format_timing(const Timing& t) {
  const std::string wrong =
      t.wrong < 0 ? std::string("   N/A") : fmt::format("{:6g}", static_cast<double>(t.wrong));
  return fmt::format("  {}  {}  {}  {}", number_cell(t.time_us, 7), number_cell(t.algbw, 6),
                     number_cell(t.busbw, 6), wrong);
}
}  // namespace

std::string format_row(const Options& o, const Row& r) {
  std::string s =
      fmt::format("{:12}  {:12}  {:>8}  {:>6}  {:6}", r.size.bytes, r.size.count, o.type.name,
                  redop_column(o.collective, o.op), has_root(o.collective) ? o.root : -1);
  s += format_timing(r.out_of_place);
  if (r.in_place) s += format_timing(*r.in_place);
  s += '\n';
  return s;
}

double average_busbw(const std::vector<Row>& rows) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    sum += r.out_of_place.busbw;
    ++n;
    if (r.in_place) {
      sum += r.in_place->busbw;
      ++n;
    }
  }
  return n > 0 ? sum / n : 0.0;
}

long long failed_sizes(const std::vector<Row>& rows) {
  long long failed = 0;
  for (const auto& r : rows) {
    if (r.out_of_place.wrong > 0 || (r.in_place && r.in_place->wrong > 0)) ++failed;
  }
  return failed;
}

bool bandwidth_ok(const std::vector<Row>& rows, double min_bw) {
  return min_bw <= 0 || average_busbw(rows) >= 0.9 * min_bw;
}

std::string footer(const Options& o, const std::vector<Row>& rows, double min_bw) {
  const long long failed = failed_sizes(rows);
  const char* verdict = min_bw <= 0 ? "" : (bandwidth_ok(rows, min_bw) ? "OK" : "FAILED");
  return fmt::format(
      "# {:<20} : {} {}\n# {:<20} : {:g} {}\n#\n# Collective test concluded: {}\n#\n\n",
      "Out of bounds values", failed, failed == 0 ? "OK" : "FAILED", "Avg bus bandwidth",
      average_busbw(rows), verdict, test_name(o.collective));
}

nlohmann::ordered_json to_json(const Options& o, const RunInfo& info,
                               const std::vector<Row>& rows) {
  auto timing = [](const Timing& t) {
    nlohmann::ordered_json j{
        {"time_us", t.time_us}, {"algbw_gbps", t.algbw}, {"busbw_gbps", t.busbw}};
    j["wrong"] = t.wrong < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(t.wrong);
    return j;
  };
  nlohmann::ordered_json j;
  j["collective"] = collective_name(o.collective);
  j["backend"] = o.backend;
  j["library"] = info.library;
  j["ranks"] = info.nranks;
  j["devices"] = info.devices;
  j["type"] = o.type.name;
  j["redop"] = redop_column(o.collective, o.op);
  j["root"] = has_root(o.collective) ? o.root : -1;
  j["iters"] = o.iters;
  j["agg_iters"] = o.agg_iters;
  j["warmup_iters"] = o.warmup;
  j["check_iters"] = o.check;
  j["busbw_factor"] = busbw_factor(o.collective, info.nranks);
  auto& arr = j["results"] = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json e{{"size_bytes", r.size.bytes}, {"count", r.size.count}};
    e["out_of_place"] = timing(r.out_of_place);
    e["in_place"] = r.in_place ? timing(*r.in_place) : nlohmann::ordered_json(nullptr);
    arr.push_back(std::move(e));
  }
  j["out_of_bounds"] = failed_sizes(rows);
  j["avg_busbw_gbps"] = average_busbw(rows);
  return j;
}

double input_value(const Options& o, int rank, std::size_t i) {
  const auto r = static_cast<std::size_t>(rank);
  if (o.op.name == "prod") return ((i + r) % 3 == 0) ? 2.0 : 1.0;
  return static_cast<double>((i * 7 + r * 3 + 1) % 11);  // 0..10: int8 sums of 11 ranks fit
}

double reduced_value(const Options& o, int nranks, std::size_t i) {
  double acc = input_value(o, 0, i);
  for (int r = 1; r < nranks; ++r) {
    const double v = input_value(o, r, i);
    if (o.op.name == "sum" || o.op.name == "avg") acc += v;
    if (o.op.name == "prod") acc *= v;
    if (o.op.name == "max") acc = std::max(acc, v);
    if (o.op.name == "min") acc = std::min(acc, v);
  }
  if (o.op.name == "avg") acc /= nranks;
  return acc;
}

}  // namespace gpuorch::comm
