// gpuorch bench without a GPU: the nccl-tests sweep, bus-bandwidth factors, table and footer, flag
// validation, and the CLI's exit codes on a host without libcuda / libnccl.
#include "gpuorch/comm/bench.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpuorch/base/error.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::comm {
namespace {

TEST(BenchSizes, ParsesSuffixesAsPowersOf1024) {
  EXPECT_EQ(parse_size("8", "-b"), 8u);
  EXPECT_EQ(parse_size("64K", "-b"), 65536u);
  EXPECT_EQ(parse_size("1M", "-b"), 1u << 20);
  EXPECT_EQ(parse_size("8G", "-e"), 8ull << 30);
  EXPECT_EQ(parse_size("2g", "-e"), 2ull << 30);
  EXPECT_EQ(parse_size("4KB", "-e"), 4096u);
  for (const char* bad : {"", "G", "1X", "-1", "1.5G", "1GG", "99999999999999999999"}) {
    EXPECT_THROW(parse_size(bad, "-b"), base::InputError) << bad;
  }
}

TEST(BenchSizes, FactorSweepFromEightToEightGiB) {
  Options o;
  o.min_bytes = 8;
  o.max_bytes = 8ull << 30;
  o.step_factor = 2;
  const auto s = size_sweep(o, 2);
  ASSERT_EQ(s.size(), 31u);  // 2^3 .. 2^33
  EXPECT_EQ(s.front().bytes, 8u);
  EXPECT_EQ(s.front().count, 2u);
  EXPECT_EQ(s.back().bytes, 8ull << 30);
  EXPECT_EQ(s.back().count, 2ull << 30);
}

TEST(BenchSizes, StepBytesAndWholeArrayCounts) {
  Options o;
  o.min_bytes = 1 << 20;
  o.max_bytes = 3 << 20;
  o.step_bytes = 1 << 20;
  EXPECT_EQ(size_sweep(o, 4).size(), 3u);
  o.collective = Collective::all_gather;  // count is per rank: size = count x 4 B x n
  const auto s = size_sweep(o, 4);
  EXPECT_EQ(s[0].count, (1u << 20) / 16);
  EXPECT_EQ(s[0].bytes, 1u << 20);
  o.min_bytes = o.max_bytes = 20;  // 20 B over 4 ranks of floats: 1 element each, 16 B printed
  EXPECT_EQ(size_sweep(o, 4)[0].bytes, 16u);
}

TEST(BenchBusbw, FactorsAsNcclTestsDocuments) {
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::all_gather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::alltoall, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::reduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Collective::sendrecv, 8), 1.0);
  const Timing t = make_timing(Collective::all_reduce, 4, 1'000'000'000, 0.01, 0);
  EXPECT_DOUBLE_EQ(t.algbw, 100.0);
  EXPECT_DOUBLE_EQ(t.busbw, 150.0);
  EXPECT_DOUBLE_EQ(t.time_us, 10000.0);
}

TEST(BenchOutput, RowsHeaderAndFooterLikeNcclTests) {
  Options o;
  Row r;
  r.size = {8, 2};
  r.out_of_place = make_timing(Collective::all_reduce, 2, 8, 11.03e-6, 0);
  r.in_place = make_timing(Collective::all_reduce, 2, 8, 10.47e-6, 0);
  EXPECT_EQ(format_row(o, r),
            "           8             2     float     sum      -1    11.03    0.00    0.00       0"
            "    10.47    0.00    0.00       0\n");
  o.collective = Collective::broadcast;
  o.check = 0;
  r.out_of_place.wrong = -1;
  r.in_place->wrong = -1;
  const std::string row = format_row(o, r);
  EXPECT_NE(row.find("  none       0"), std::string::npos) << row;
  EXPECT_NE(row.find("0.00     N/A"), std::string::npos) << row;
  // sendrecv carries the -o op in redop, as nccl-tests' sendrecv (it loops over ops).
  o.collective = Collective::sendrecv;
  EXPECT_NE(format_row(o, r).find("  float     sum      -1"), std::string::npos);
  const std::string h = table_header();
  EXPECT_EQ(h, std::string("#\n") +
                   "#                                                           "
                   "   out-of-place                       in-place          \n" +
                   "#       size         count      type   redop    root     tim"
                   "e   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n" +
                   "#        (B)    (elements)                               (us"
                   ")  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         \n");
  std::vector<Row> rows(2);
  rows[0].out_of_place.busbw = 100;
  rows[0].in_place = Timing{1, 1, 200, 0};
  rows[1].out_of_place.busbw = 300;  // no in-place: 3 printed values
  EXPECT_DOUBLE_EQ(average_busbw(rows), 200.0);
  o.collective = Collective::all_reduce;
  EXPECT_EQ(footer(o, rows),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 200 \n#\n"
            "# Collective test concluded: all_reduce_perf\n#\n\n");
  EXPECT_NE(footer(o, rows, 300).find(": 200 FAILED\n"), std::string::npos);  // NCCL_TESTS_MIN_BW
  EXPECT_NE(footer(o, rows, 220).find(": 200 OK\n"), std::string::npos);
  rows[1].out_of_place.wrong = 3;
  EXPECT_NE(footer(o, rows).find(": 1 FAILED"), std::string::npos);
  RunInfo info;
  info.nranks = 2;
  const auto j = to_json(o, info, rows);
  EXPECT_EQ(j["collective"], "all_reduce");
  EXPECT_EQ(j["results"].size(), 2u);
  EXPECT_TRUE(j["results"][1]["in_place"].is_null());
  EXPECT_EQ(j["out_of_bounds"], 1);
  EXPECT_DOUBLE_EQ(j["avg_busbw_gbps"].get<double>(), 200.0);
}

TEST(BenchOutput, NumberCellsAsNcclTests) {
  // 2, 1, 0 decimals as the integer part grows, then exponent notation (nccl-tests getFloatStr).
  EXPECT_EQ(number_cell(11.034, 7), "  11.03");
  EXPECT_EQ(number_cell(9999.5, 7), "9999.50");
  EXPECT_EQ(number_cell(12345.67, 7), "12345.7");
  EXPECT_EQ(number_cell(1234567.0, 7), "1234567");
  EXPECT_EQ(number_cell(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(number_cell(0.004, 6), "  0.00");
  EXPECT_EQ(number_cell(999.99, 6), "999.99");
  EXPECT_EQ(number_cell(1234.5, 6), "1234.5");
  EXPECT_EQ(number_cell(123456.0, 6), "123456");
  EXPECT_EQ(number_cell(1234567.0, 6), " 1e+06");
}

TEST(BenchOutput, HeaderLinesAsNcclTests) {
  Options o;
  o.min_bytes = 8;
  o.max_bytes = 128;
  o.step_factor = 2;
  o.threads = 2;
  o.gpus = 4;
  o.blocking = 1;
  RunInfo info;
  info.nranks = 1;
  info.nccl_version = 22803;
  info.library = "NCCL 2.28.3";
  info.devices = {"Pid   4242 on      node1 device  0 [0000:18:00] NVIDIA H200"};
  const auto lines = test::lines_of(header(o, info));
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[0], std::string("# nccl-tests version gpuorch-") + GPUORCH_VERSION +
                          " nccl-headers=0 nccl-library=22803");
  EXPECT_EQ(lines[1], "# Collective test starting: all_reduce_perf");
  EXPECT_EQ(lines[2],
            "# nThread 2 nGpus 2 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 1 iters: 20 "
            "agg iters: 1 validation: 1 graph: 0 unalign: 0");
  EXPECT_EQ(lines[3], "# Blocking Enabled: wait for completion and barrier after each collective ");
  EXPECT_EQ(lines[4], "#");
  EXPECT_EQ(lines[5], "# gpuorch gpu backend: NCCL 2.28.3");
  EXPECT_EQ(lines[6], "# Using devices");
  EXPECT_EQ(lines[7],
            "#  Rank  0 Group  0 Pid   4242 on      node1 device  0 [0000:18:00] NVIDIA H200");
}

TEST(BenchFlags, NamesAndValidation) {
  EXPECT_EQ(parse_collective("alltoall"), Collective::alltoall);
  EXPECT_EQ(parse_collective("all_reduce_perf"), Collective::all_reduce);  // nccl-tests' binary
  EXPECT_EQ(parse_collective("sendrecv_perf"), Collective::sendrecv);
  EXPECT_FALSE(parse_collective("_perf"));
  EXPECT_EQ(test_name(Collective::reduce_scatter), "reduce_scatter_perf");
  EXPECT_FALSE(parse_collective("allreduce"));
  EXPECT_EQ(collective_names().size(), 7u);
  EXPECT_EQ(parse_type("float")->nccl, 7);
  EXPECT_EQ(parse_type("double")->bytes, 8u);
  EXPECT_EQ(parse_type("int8")->nccl, 0);
  EXPECT_FALSE(parse_type("half"));
  EXPECT_EQ(parse_op("max")->nccl, 2);
  EXPECT_EQ(parse_op("min")->nccl, 3);
  EXPECT_FALSE(parse_op("all"));
  Options o;
  EXPECT_NO_THROW(validate(o));
  o.min_bytes = 2;
  o.max_bytes = 1;
  EXPECT_THROW(validate(o), base::InputError);
  o = Options{};
  o.gpus = 0;
  EXPECT_THROW(validate(o), base::InputError);
  o = Options{};
  o.collective = Collective::broadcast;
  o.root = 1;  // one GPU: rank 1 does not exist
  EXPECT_THROW(validate(o), base::InputError);
  o = Options{};
  o.type = *parse_type("int32");
  o.op = *parse_op("avg");
  EXPECT_THROW(validate(o), base::InputError);
  o = Options{};
  o.blocking = 4;
  EXPECT_THROW(validate(o), base::InputError);
}

TEST(BenchCheck, ReferenceValuesAreExact) {
  Options o;
  EXPECT_DOUBLE_EQ(reduced_value(o, 2, 0), input_value(o, 0, 0) + input_value(o, 1, 0));
  o.op = *parse_op("max");
  for (std::size_t i = 0; i < 20; ++i) {
    EXPECT_GE(reduced_value(o, 4, i), input_value(o, 3, i));
  }
  o.op = *parse_op("prod");
  for (std::size_t i = 0; i < 20; ++i) {
    const double v = input_value(o, 0, i);
    EXPECT_TRUE(v == 1.0 || v == 2.0);
  }
}

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun cli(const std::string& args) {
  const std::string err_file = "/tmp/gpuorch-bench-test-" + std::to_string(::getpid());
  const std::string cmd =
      std::string(::gpuorch::test::binary_path()) + " " + args + " 2>" + err_file;
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (FILE* e = std::fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    std::fclose(e);
  }
  std::remove(err_file.c_str());
  return r;
}

TEST(BenchCli, BadInputExitsTwoWithOneLine) {
  for (const char* args :
       {"bench all_reduce -b 8G -e 8", "bench all_reduce -b 1X", "bench nope",
        "bench all_reduce -d half", "bench all_reduce -o all", "bench all_reduce --backend tpu"}) {
    const auto r = cli(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}

TEST(BenchCli, NoGpuLibrariesIsOneLineExitOne) {
  const std::string probe = "ldconfig -p 2>/dev/null | grep -q libcuda.so.1";
  if (std::system(probe.c_str()) == 0) GTEST_SKIP() << "this host has a CUDA driver";
  const auto r = cli("bench all_reduce -b 8 -e 8G -f 2 -g 2");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("libcuda.so.1"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace gpuorch::comm
