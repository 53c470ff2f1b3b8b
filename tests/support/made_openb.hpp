#pragma once
// A made cluster and trace in the layout of ../shared/openb and scripts/make-openb-family: ten
// 2-GPU nodes of two models, and pods of every kind (shares, whole, 2-GPU pinned to T4, CPU-only),
// mostly 40-milli shares so that the arrivals land on most percentage points of the fill curve.
// Small enough for the scripts that run `gpuorch sim fill` and the ceilings on it to take seconds.
#include <string>

#include "support/test_support.hpp"

namespace gpuorch::test {

inline void write_made_nodes(const TempDir& dir) {
  std::string nodes = "sn,cpu_milli,memory_mib,gpu,model\n";
  for (int i = 0; i < 6; ++i) nodes += "t" + std::to_string(i) + ",16000,8192,2,T4\n";
  for (int i = 0; i < 4; ++i) nodes += "g" + std::to_string(i) + ",32000,16384,2,G2\n";
  write_text(dir.file("openb_node_list_gpu_node.csv"), nodes);
}

// openb_pod_list_TRACE.csv in dir.
inline void write_made_trace(const TempDir& dir, const std::string& trace) {
  std::string pods =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p0,1000,512,1,810,,LS,Running,0,10,0\np1,2000,512,1,470,,LS,Running,0,10,0\n"
      "p2,4000,1024,1,1000,,LS,Running,0,10,0\np3,1000,256,1,160,,LS,Running,0,10,0\n"
      "p4,2000,512,2,1000,T4,LS,Running,0,10,0\np5,500,128,0,0,,LS,Running,0,10,0\n"
      "p6,3000,512,1,320,G2,LS,Running,0,10,0\n";
  for (int i = 7; i <= 30; ++i) {
    pods += "p" + std::to_string(i) + "," + std::to_string(500 + i * 100) +
            ",256,1,40,,LS,Running,0,10,0\n";
  }
  write_text(dir.file("openb_pod_list_" + trace + ".csv"), pods);
}

}  // namespace gpuorch::test
