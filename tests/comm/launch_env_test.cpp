// Which rank a process is under torchrun, a plain shell loop, Open MPI, PMI and Slurm.
#include "gpuorch/comm/launch_env.hpp"

#include <gtest/gtest.h>

#include <map>

#include "gpuorch/base/error.hpp"

namespace gpuorch::comm {
namespace {

std::optional<LaunchEnv> detect(const std::map<std::string, std::string>& vars) {
  return detect_launch([&](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

TEST(LaunchEnv, NoLauncherIsOneProcess) { EXPECT_FALSE(detect({{"PATH", "/bin"}}).has_value()); }

TEST(LaunchEnv, TorchrunContract) {
  const auto e = detect({{"RANK", "3"},
                         {"WORLD_SIZE", "8"},
                         {"LOCAL_RANK", "1"},
                         {"MASTER_ADDR", "10.0.0.1"},
                         {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "10.0.0.1");
  EXPECT_EQ(e->port, 29400);
  EXPECT_EQ(e->source, "RANK/WORLD_SIZE");
}

TEST(LaunchEnv, TorchrunAgentStoreTakesMasterPortSoNextPort) {
  const auto e = detect({{"RANK", "0"},
                         {"WORLD_SIZE", "2"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_PORT", "29500"},
                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->port, 29501);
  EXPECT_EQ(e->master_addr, "127.0.0.1");  // one node: LOCAL_WORLD_SIZE == WORLD_SIZE
  const auto o = detect({{"RANK", "0"},
                         {"WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "h"},
                         {"MASTER_PORT", "29500"},
                         {"GPUORCH_BOOTSTRAP_PORT", "31000"},
                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(o->port, 31000);
}

TEST(LaunchEnv, MpiAndSlurmVariables) {
  const auto ompi = detect({{"OMPI_COMM_WORLD_RANK", "5"},
                            {"OMPI_COMM_WORLD_SIZE", "16"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "5"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"},
                            {"MASTER_ADDR", "node0"}});
  ASSERT_TRUE(ompi.has_value());
  EXPECT_EQ(ompi->rank, 5);
  EXPECT_EQ(ompi->world, 16);
  EXPECT_EQ(ompi->port, 29500);
  EXPECT_EQ(ompi->source, "OMPI_COMM_WORLD_*");
  const auto pmi = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "2"}});
  ASSERT_TRUE(pmi.has_value());
  EXPECT_EQ(pmi->local_rank, 1);  // no MPI_LOCALRANKID: the global rank
  EXPECT_EQ(pmi->master_addr, "127.0.0.1");
  const auto slurm = detect({{"SLURM_PROCID", "2"},
                             {"SLURM_NTASKS", "4"},
                             {"SLURM_LOCALID", "0"},
                             {"SLURM_JOB_NUM_NODES", "1"}});
  ASSERT_TRUE(slurm.has_value());
  EXPECT_EQ(slurm->rank, 2);
  EXPECT_EQ(slurm->local_rank, 0);
  EXPECT_EQ(slurm->source, "SLURM_*");
}

TEST(LaunchEnv, BadValuesAreOneLine) {
  auto message = [](const std::map<std::string, std::string>& vars) {
    try {
      detect(vars);
    } catch (const base::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}),
            "RANK=2: not an integer in 0..1");
  EXPECT_EQ(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}),
            "RANK=x: not an integer in 0..1");
  EXPECT_EQ(message({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
            "WORLD_SIZE=0: not an integer in 1..1048576");
  EXPECT_EQ(
      message({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}}),
      "MASTER_PORT=70000: not an integer in 1..65534");
  EXPECT_NE(message({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}})
                .find("MASTER_ADDR is not set"),
            std::string::npos);
}

}  // namespace
}  // namespace gpuorch::comm
