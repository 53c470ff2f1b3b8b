// --rdzv-conf values and the launcher's other durations: a finite number in range, else one
// line and exit 2 (inf and nan reached an undefined cast to milliseconds).
#include "gpuorch/launch/rendezvous_conf.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.hpp"

namespace gpuorch::launch {
namespace {

using std::chrono::milliseconds;

TEST(RendezvousConf, ReadsEveryKey) {
  RendezvousConfig r;
  apply_rdzv_conf("join_timeout=12.5,last_call_timeout=0,timeout=3,lease_ttl=20", r);
  EXPECT_EQ(r.join_timeout, milliseconds(12500));
  EXPECT_EQ(r.last_call_timeout, milliseconds(0));
  EXPECT_EQ(r.connect_timeout, milliseconds(3000));
  EXPECT_EQ(r.lease_ttl_s, 20);
}

TEST(RendezvousConf, RejectsValuesThatAreNotAFiniteBoundedNumber) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"timeout=inf", "--rdzv-conf timeout=inf: not a finite number of seconds"},
      {"timeout=nan", "--rdzv-conf timeout=nan: not a finite number of seconds"},
      {"join_timeout=-1", "--rdzv-conf join_timeout=-1: must be between 0 and 2.592e+06 seconds"},
      {"last_call_timeout=1e300",
       "--rdzv-conf last_call_timeout=1e300: must be between 0 and 2.592e+06 seconds"},
      {"timeout=1e400", "--rdzv-conf timeout=1e400: not a number of seconds"},
      {"lease_ttl=1e10", "--rdzv-conf lease_ttl=1e10: must be between 0 and 3600 seconds"},
      {"timeout=10s", "--rdzv-conf timeout=10s: not a number of seconds"},
      {"timeout=", "--rdzv-conf timeout=: not a number of seconds"},
      {"timeout", "--rdzv-conf timeout: expected KEY=VALUE"},
  };
  for (const auto& [conf, message] : cases) {
    RendezvousConfig r;
    EXPECT_EQ(test::input_error([&] { apply_rdzv_conf(conf, r); }), message) << conf;
  }
}

TEST(RendezvousConf, CheckedSecondsRoundsAndBounds) {
  EXPECT_EQ(checked_seconds("x", 0.0015, 0, 1), milliseconds(2));
  EXPECT_EQ(test::input_error([] { checked_seconds("--stop-grace nan", std::nan(""), 0, 10); }),
            "--stop-grace nan: not a finite number of seconds");
}

// Through the CLI: exit 2 with one line, before any worker starts.
TEST(RendezvousConf, LaunchExitsTwoWithOneLine) {
  const test::TempDir dir;
  const std::vector<std::vector<std::string>> bad{{"--rdzv-conf", "timeout=inf"},
                                                  {"--rdzv-conf", "join_timeout=nan"},
                                                  {"--stop-grace", "nan"},
                                                  {"--monitor-interval", "nan"}};
  for (const auto& flags : bad) {
    std::vector<std::string> args{"launch", "--standalone", "--no-nvml", "--bind", "none"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "/bin/sh", "-c", "echo started"});
    const auto r = test::run_cli(args, dir);
    EXPECT_EQ(r.exit_code, 2) << flags[0] << " " << flags[1] << "\n" << r.err;
    EXPECT_EQ(test::lines_of(r.err).size(), 1u) << r.err;
    EXPECT_EQ(r.out.find("started"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuorch::launch
