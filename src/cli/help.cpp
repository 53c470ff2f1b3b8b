#include "cli/help.hpp"

#include <fmt/format.h>

#include <map>
#include <sstream>

namespace gpuorch::cli {
namespace {

// Command lines to copy, per verb. Each is real: the flags exist and the files named are the
// project's own where it has one (tests/fixtures, ../shared), placeholders in capitals otherwise.
const std::map<std::string, std::vector<std::string>>& examples() {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"sim",
       {"gpuorch sim fill --policy all --seeds 42-51",
        "gpuorch sim timeline --workload tests/fixtures/timeline/philly_small.csv --policy all"}},
      {"sim fill",
       {"gpuorch sim fill                     # embedded synthetic openb-like cluster",
        "gpuorch sim fill --nodes ../shared/openb/openb_node_list_gpu_node.csv \\\n"
        "      --pods ../shared/openb/openb_pod_list_default.csv --policy all --seeds 42-51 "
        "--report out/default"}},
      {"sim arrivals", {"gpuorch sim arrivals --seeds 42 > arrivals.csv"}},
      {"sim scale", {"gpuorch sim scale --nodes 10000 --pods 100000 --policy fgd --json"}},
      {"sim timeline",
       {"gpuorch sim timeline --workload ../shared/traces/pollux_philly/workload-6.csv \\\n"
        "      --policy tiresias,optimus,pollux,default --json",
        "gpuorch sim timeline --workload ../shared/traces/pollux_philly/workload-6.csv \\\n"
        "      --policy pollux,default --gpus 32:128:32     # makespan, JCT, GPU-hours per size",
        "gpuorch sim timeline --workload ../shared/traces/pollux_philly/workload-6.csv \\\n"
        "      --policy tiresias,pollux,default --report out/w6   # HTML: JCT CDF, utilisation, "
        "queue",
        "gpuorch sim timeline --workload ../shared/traces/pollux_philly/workload-6.csv \\\n"
        "      --policy pollux,lasgo --speedup-model oracle   # speedups read, not learnt",
        "gpuorch sim timeline --workload tests/fixtures/timeline/philly_tenants.csv \\\n"
        "      --queues tests/fixtures/timeline/tenant_queues.yaml --policy fifo,tiresias \\\n"
        "      --nodes 2 --gpus-per-node 4                    # tenants on KAI queues"}},
      {"topo",
       {"gpuorch topo                         # the nvidia-smi topo -m matrix",
        "gpuorch topo --json > host.json"}},
      {"dmon", {"gpuorch dmon --interval 1 --count 10", "gpuorch dmon --json --count 1"}},
      {"exporter",
       {"gpuorch exporter --listen 127.0.0.1:9400   # /metrics, /health (and /healthz)",
        "curl -s localhost:9400/metrics | grep DCGM_FI_DEV_GPU_UTIL"}},
      {"scheduler",
       {"gpuorch scheduler --kubeconfig ~/.kube/config --policy efd --seed 42",
        "gpuorch scheduler --queues   # pods held to their KAI Queues (limits, reclaim, priority; "
        "label "
        "kai.scheduler/queue)"}},
      {"admission-check",
       {"gpuorch admission-check --kubeconfig ~/.kube/config --policy efd",
        "gpuorch admission-check --retry-after 30   # Kueue waits 30 s (then 60, 120, 240) after "
        "Retry",
        "gpuorch admission-check --leader-elect --listen 0.0.0.0:10263   # one of two replicas "
        "(gpuorch manifests --kueue)"}},
      {"extender",
       {"gpuorch extender --kubeconfig ~/.kube/config --policy efd --listen 127.0.0.1:10262",
        "gpuorch extender --print-config      # the KubeSchedulerConfiguration extenders[] entry"}},
      {"bench",
       {"gpuorch bench all_reduce -b 8 -e 8G -f 2 -g 2          # NCCL on this host's GPUs",
        "gpuorch bench all_gather --backend host --np 4 -b 1K -e 16M -f 4   # processes over TCP"}},
      {"tune", {"gpuorch tune nccl -b 64K -e 1G -f 4 -g 2 --output nccl.env"}},
      {"tune nccl",
       {"gpuorch tune nccl -b 64K -e 1G -f 4 -g 2 --output nccl.env --calibration calib.json"}},
      {"device-plugin",
       {"gpuorch device-plugin --config-file config.yaml",
        "gpuorch device-plugin --dry-run      # what would be advertised, then exit"}},
      {"manifests",
       {"gpuorch manifests --vendor nvidia --image registry.example/gpuorch:0.1.0 | kubectl apply "
        "-f -",
        "gpuorch manifests --vendor both --sharing time-slicing --replicas 4 -o deploy/",
        "gpuorch manifests --vendor nvidia --dra -o deploy/     # GPUs as DRA devices",
        "gpuorch manifests --vendor nvidia --kueue -o deploy/   # and Kueue's admission check",
        "gpuorch manifests --vendor nvidia --image registry.example/gpuorch:0.1.0 "
        "--image-pull-secret regcred --node-selector pool=gpu --toleration "
        "dedicated=gpu:NoSchedule --runtime-class nvidia --mig-strategy mixed --requests "
        "exporter:cpu=100m -o deploy/"}},
      {"node-labeller",
       {"gpuorch node-labeller --config-file config.yaml --interval 60",
        "gpuorch node-labeller --dry-run      # print the labels, change nothing"}},
      {"dra-driver",
       {"gpuorch dra-driver --kubeconfig ~/.kube/config --node-name gpu-node-1",
        "gpuorch dra-driver --topology topo.json --node-name n1 --dry-run   # the ResourceSlice",
        "gpuorch dra-driver --node-name n1 --plugin-dir /tmp/p --cdi-dir /tmp/cdi --prepare-file "
        "claim.json   # Prepare one claim here, as the kubelet would"}},
      {"launch",
       {"gpuorch launch --standalone --nproc-per-node gpu -- python3 train.py --epochs 3",
        "gpuorch launch --standalone --nproc_per_node 2 train.py --epochs 3   # as torchrun",
        "gpuorch launch --nproc-per-node gpu --dry-run   # the binding plan, nothing started"}},
      {"doctor", {"gpuorch doctor nccl-log job.log", "gpuorch doctor pod default/train-0"}},
      {"doctor nccl-log",
       {"NCCL_DEBUG=INFO torchrun ... 2>&1 | tee job.log; gpuorch doctor nccl-log job.log",
        "gpuorch doctor nccl-log job.log --calibration calib.json"}},
      {"doctor nccl-catalogue",
       {"gpuorch doctor nccl-catalogue",
        "gpuorch doctor nccl-catalogue --json | jq '.[] | select(.finding == "
        "\"nccl.duplicate-gpu\")'"}},
      {"doctor network", {"gpuorch doctor network --env-file nccl.env"}},
      {"doctor numa", {"sudo gpuorch doctor numa --kubelet-config /var/lib/kubelet/config.yaml"}},
      {"doctor pod",
       {"gpuorch doctor pod default/train-0 --kubeconfig ~/.kube/config",
        "gpuorch doctor pod                   # every unbound pod"}},
      {"doctor queue",
       {"gpuorch doctor queue team-a --kubeconfig ~/.kube/config",
        "gpuorch doctor queue --json          # every queue and every waiting job"}},
      {"doctor utilisation",
       {"gpuorch doctor utilisation --seconds 10 --record util.json",
        "gpuorch doctor utilisation --replay util.json"}},
      {"doctor data",
       {"gpuorch doctor data /data/imagenet/train --samples-per-second 3000 --sample-bytes 110K "
        "--gpus 8"}},
  };
  return table;
}

void add_examples_below(CLI::App& app, const std::string& path, std::map<std::string, bool>& used) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string name = path.empty() ? sub->get_name() : path + " " + sub->get_name();
    const auto it = examples().find(name);
    if (it != examples().end()) {
      used[name] = true;
      std::string text = "Examples:\n";
      for (const auto& line : it->second) text += "  " + line + "\n";
      // After what the verb's own footer says (sim timeline's policies and workloads).
      const std::string own = sub->get_footer();
      sub->footer(own.empty() ? text : own + "\n\n" + text);
    }
    add_examples_below(*sub, name, used);
  }
}

}  // namespace

std::string shown_default(const CLI::Option& opt) {
  if (opt.get_type_size() == 0) return "";  // a flag: off unless given
  const std::string& d = opt.get_default_str();
  if (d.empty() || d == "[]" || d == "{}") return "";
  return d;
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  // CLI11's, less the default (make_option_desc says it).
  std::ostringstream out;
  if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
  if (opt->get_type_size() != 0) {
    if (!opt->get_type_name().empty()) out << " " << get_label(opt->get_type_name());
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) {
      out << " ...";
    } else if (opt->get_expected_min() > 1) {
      out << " x " << opt->get_expected();
    }
    if (opt->get_required()) out << " " << get_label("REQUIRED");
  }
  if (!opt->get_envname().empty())
    out << " (" << get_label("Env") << ":" << opt->get_envname() << ")";
  return out.str();
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  const std::string d = shown_default(*opt);
  if (d.empty()) return opt->get_description();
  return fmt::format("{} (default: {})", opt->get_description(), d);
}

std::vector<std::string> add_examples(CLI::App& app) {
  std::map<std::string, bool> used;
  add_examples_below(app, "", used);
  std::vector<std::string> unused;
  for (const auto& [path, lines] : examples()) {
    if (!used.count(path)) unused.push_back(path);
  }
  return unused;
}

}  // namespace gpuorch::cli
