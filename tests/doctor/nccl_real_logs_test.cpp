// doctor nccl-log on logs from public bug reports (tests/fixtures/doctor/nccl-real/README.md names
// each one's thread): each raises exactly the findings docs/doctor.md's table lists for it.
#include <gtest/gtest.h>

#include "doctor/doctor_test_util.hpp"
#include "gpuorch/doctor/nccl_log.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"

namespace gpuorch {
namespace {

using Ids = std::vector<std::string>;

struct RealLog {
  const char* file;
  Ids problems;  // sorted, as test::problem_ids gives them
};

class NcclRealLog : public ::testing::TestWithParam<RealLog> {};

TEST_P(NcclRealLog, GivesTheCauseTheTableLists) {
  const std::string path = test::doctor_fixture(std::string("nccl-real/") + GetParam().file);
  const auto findings = doctor::check_nccl_log(doctor::read_nccl_log(path));
  EXPECT_EQ(test::problem_ids(findings), GetParam().problems) << GetParam().file;
}

INSTANTIATE_TEST_SUITE_P(
    Threads, NcclRealLog,
    ::testing::Values(
        RealLog{"nccl-952-rdma-plugin-no-device.log", {"nccl.rdma-no-device"}},
        RealLog{"pytorch-111424-ib-no-device.log", {"nccl.rdma-no-device"}},
        RealLog{"llamafactory-6111-one-line.log", {"nccl.socket-fallback"}},
        RealLog{"detectron2-4730-no-libibverbs.log", {"nccl.socket-fallback"}},
        RealLog{"nccl-tests-188-ib-disabled.log", {"nccl.env-ib-disabled"}},
        RealLog{"nv-peer-memory-78-p2p-shm-off.log",
                {"nccl.env-p2p-disabled", "nccl.env-shm-disabled"}},
        RealLog{"horovod-3929-duplicate-gpu.log", {"nccl.duplicate-gpu"}},
        RealLog{"horovod-3949-duplicate-gpu.log", {"nccl.duplicate-gpu"}},
        RealLog{"megatron-661-duplicate-gpu.log", {"nccl.duplicate-gpu", "torch.nccl-error"}},
        RealLog{"d-fine-289-duplicate-gpu.log", {"nccl.duplicate-gpu", "torch.nccl-error"}},
        RealLog{"verl-161-duplicate-gpu.log", {"nccl.duplicate-gpu", "torch.nccl-error"}},
        RealLog{"nccl-1837-socket-ifname-missing.log", {"nccl.no-socket-interface"}},
        RealLog{"nccl-795-remote-crash.log", {"nccl.peer-closed", "nccl.warn"}},
        RealLog{"nccl-1235-peer-closed-oom.log",
                {"nccl.cuda-oom", "nccl.peer-closed", "nccl.warn", "nccl.warn"}},
        RealLog{"nccl-1405-ib-completion-status-12.log", {"nccl.ib-completion-error"}},
        RealLog{"nccl-928-ib-completion-error-4.log", {"nccl.ib-completion-error"}},
        RealLog{"nccl-342-dev-shm-docker.log", {"nccl.shm-too-small"}},
        RealLog{"xgboost-5963-dev-shm.log", {"nccl.shm-not-p2p", "nccl.shm-too-small"}},
        RealLog{"nccl-1029-cuda-initialization-error.log",
                {"nccl.cuda-failure", "torch.nccl-error"}},
        RealLog{"nccl-1516-p2p-off-algo-proto-forced.log",
                {"nccl.env-algo-forced", "nccl.env-proto-forced", "nccl.ib-without-gdr",
                 "nccl.init-incomplete", "nccl.shm-not-p2p"}},
        RealLog{"llamafactory-7396-timeout.log", {"nccl.timeout"}},
        RealLog{"sglang-1693-timeout.log", {"nccl.timeout"}},
        RealLog{"xdit-147-heartbeat.log", {"torch.watchdog-stuck"}},
        RealLog{"rccl-1454-iommu.log", {"rccl.iommu"}},
        RealLog{"rccl-908-iommu-fine-grain.log",
                {"nccl.warn", "rccl.fine-grain-pcie", "rccl.iommu"}}),
    [](const ::testing::TestParamInfo<RealLog>& p) {
      std::string n = p.param.file;
      n = n.substr(0, n.find('.'));
      for (char& c : n) {
        if (c == '-') c = '_';
      }
      return n;
    });

// The duplicate-GPU threads get the binding advice, not "a CUDA error".
TEST(NcclRealLog, DuplicateGpuThreadsGetTheBindingFix) {
  for (const char* file : {"horovod-3949-duplicate-gpu.log", "d-fine-289-duplicate-gpu.log"}) {
    const auto f = test::find_id(doctor::check_nccl_log(doctor::read_nccl_log(
                                     test::doctor_fixture(std::string("nccl-real/") + file))),
                                 "nccl.duplicate-gpu");
    ASSERT_TRUE(f) << file;
    EXPECT_NE(f->fix.find("LOCAL_RANK"), std::string::npos) << file;
    EXPECT_NE(f->fix.find("gpuorch launch"), std::string::npos) << file;
  }
}

}  // namespace
}  // namespace gpuorch
