#pragma once
// gpuorch bench: the nccl-tests protocol (sizes, bus-bandwidth factors, table, footer) without any
// GPU code, so it is unit-tested on any machine. The GPU backend (nccl_backend.cpp) measures; this
// formats.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::comm {

enum class Collective {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  alltoall,
  sendrecv
};

struct DataType {
  std::string_view name;  // nccl-tests spelling: float, double, int32, ...
  int nccl = 0;           // ncclDataType_t value
  std::size_t bytes = 0;  // element size
  bool floating = false;
};

struct RedOp {
  std::string_view name;  // sum, prod, max, min, avg
  int nccl = 0;           // ncclRedOp_t value
};

// "all_reduce" or nccl-tests' binary name "all_reduce_perf".
std::optional<Collective> parse_collective(std::string_view name);
std::string_view collective_name(Collective c);
// nccl-tests' binary for the collective ("all_reduce_perf"): the name its output carries.
std::string test_name(Collective c);
const std::vector<std::string_view>& collective_names();
bool has_redop(Collective c);
bool has_root(Collective c);
// busbw = algbw x factor (nccl-tests doc/PERFORMANCE.md).
double busbw_factor(Collective c, int nranks);
// Whether size = count x element size x nranks (the whole gathered / scattered array).
bool size_is_whole_array(Collective c);
// Whether the in-place variant is checked: nccl-tests times in-place alltoall and sendrecv (send
// and receive buffer the same) but never checks them, so their in-place #wrong is N/A.
bool checks_in_place(Collective c);
// The redop column: the op for reductions and for sendrecv (nccl-tests' sendrecv loops over -o),
// "none" otherwise.
std::string_view redop_column(Collective c, const RedOp& op);

// "8", "64K", "1M", "8G" (powers of 1024, as nccl-tests). Throws base::InputError.
std::size_t parse_size(std::string_view text, std::string_view flag);
std::optional<DataType> parse_type(std::string_view name);
std::optional<RedOp> parse_op(std::string_view name);

struct Options {
  Collective collective = Collective::all_reduce;
  std::string backend = "gpu";
  std::size_t min_bytes = 32ull << 20;
  std::size_t max_bytes = 32ull << 20;
  std::size_t step_bytes = 1ull << 20;
  double step_factor = 1.0;  // > 1: multiplicative steps (-f)
  int threads = 1;           // -t: nccl-tests' threads per process, here GPUs of this process
  int gpus = 1;              // -g x -t: GPUs driven by this process
  int ranks = 0;             // host backend: processes in the run (0: the -g GPUs)
  int iters = 20;            // -n
  int agg_iters = 1;         // -m: ops per timed iteration (one NCCL group)
  int average = 1;           // -a: time across processes: 0 rank 0, 1 mean, 2 min, 3 max
  int warmup = 1;            // -w
  int check = 1;             // -c
  int root = 0;              // -r
  int blocking = 0;          // -z
  double timeout_s = 0;      // -T: 0 = the backend's own bound (host 60 s, GPU peers 300 s)
  DataType type{"float", 7, 4, true};
  RedOp op{"sum", 0};
  bool json = false;
  std::string nccl_library = "libnccl.so.2";  // dlopen name or path
};

// Checks ranges and ordering; throws base::InputError with one line.
void validate(const Options& o);

struct SizePoint {
  std::size_t bytes = 0;  // printed size: max(send, recv) bytes
  std::size_t count = 0;  // per-rank element count (nccl-tests "count")
};
// The nccl-tests sweep: from -b to -e, times -f (if > 1) or plus -i.
std::vector<SizePoint> size_sweep(const Options& o, int nranks);

struct Timing {
  double time_us = 0;
  double algbw = 0;  // GB/s, 1e9 bytes
  double busbw = 0;
  long long wrong = -1;  // -1: not checked (N/A)
};

struct Row {
  SizePoint size;
  Timing out_of_place;
  std::optional<Timing> in_place;
};

Timing make_timing(Collective c, int nranks, std::size_t bytes, double seconds, long long wrong);

struct RunInfo {
  int nranks = 0;
  // nccl-tests' device line after "#  Rank  0 Group  0 ":
  // "Pid  12345 on   hostname device  0 [0000:18:00] NVIDIA H200"
  std::vector<std::string> devices;
  std::string library;   // "NCCL 2.28.3", "Gloo 0.5.0, transport tcp"
  int nccl_version = 0;  // ncclGetVersion (22803); 0 without NCCL
};

// nccl-tests' output (src/util.cu writeDeviceReport, writeResultHeader, writeBenchmarkLine*,
// writeResultFooter): version, "starting" and parameter lines, devices, the three column-title
// lines, one row per size, the footer.
std::string header(const Options& o, const RunInfo& info);
std::string table_header();
std::string format_row(const Options& o, const Row& r);
// nccl-tests' number cell: 2, 1 or 0 decimals as the integer part grows, then exponent notation.
std::string number_cell(double value, int width);
// "# Out of bounds values", "# Avg bus bandwidth" (mean over every printed busbw), closing lines.
// min_bw > 0 (NCCL_TESTS_MIN_BW): the average must reach 0.9 x min_bw, else FAILED.
double average_busbw(const std::vector<Row>& rows);
long long failed_sizes(const std::vector<Row>& rows);
bool bandwidth_ok(const std::vector<Row>& rows, double min_bw);
std::string footer(const Options& o, const std::vector<Row>& rows, double min_bw = -1);
nlohmann::ordered_json to_json(const Options& o, const RunInfo& info, const std::vector<Row>& rows);

// The element a rank contributes at index i (small integers: every reduction is exact) and what the
// collective must leave there; the backend fills and checks with these.
double input_value(const Options& o, int rank, std::size_t i);
double reduced_value(const Options& o, int nranks, std::size_t i);

}  // namespace gpuorch::comm
