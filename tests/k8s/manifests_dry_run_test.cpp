// Every option of `gpuorch manifests`, in combination, is accepted by a real kube-apiserver
// (support/control_plane.hpp): server-side dry run (?dryRun=All) with strict field validation, so
// a misspelt, misplaced or ill-formed field fails. The option sets are a pairwise-covering set
// over the options below (every value of every option meets every value of every other option in
// at least one run, where the pair is allowed at all), made by a greedy construction, so each
// option is on and off at least once. The namespaces are created for real first (a namespaced
// object cannot be admitted into a namespace that does not exist); the PodGroup CRD is dry-run
// like the rest, since no PodGroup is created here.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/api/quantity.hpp"
#include "k8s/apply_support.hpp"
#include "support/control_plane.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using Args = std::vector<std::string>;

struct Factor {
  std::string name;
  std::vector<Args> levels;  // levels[0] is "off" (the default)
};

std::vector<Factor> factors() {
  return {
      {"vendor", {{}, {"--vendor", "amd"}, {"--vendor", "both"}}},
      {"sharing",
       {{},
        {"--sharing", "time-slicing", "--replicas", "4"},
        {"--sharing", "mps", "--replicas", "2"}}},
      {"mig", {{}, {"--mig-strategy", "single"}, {"--mig-strategy", "mixed"}}},
      {"pull-secret",
       {{}, {"--image-pull-secret", "regcred", "--image-pull-secret", "mirror.cred"}}},
      {"pull-policy",
       {{},
        {"--image-pull-policy", "Always"},
        {"--image-pull-policy", "IfNotPresent"},
        {"--image-pull-policy", "Never"}}},
      {"node-selector",
       {{}, {"--node-selector", "pool=gpu", "--node-selector", "example.com/tier=training"}}},
      {"toleration",
       {{},
        {"--toleration", "dedicated=gpu:NoSchedule", "--toleration",
         "example.com/maintenance:NoExecute", "--toleration", "spot:Exists:PreferNoSchedule"}}},
      {"resources",
       {{},
        {"--requests", "device-plugin:cpu=20m,memory=32Mi", "--limits",
         "device-plugin:cpu=100m,memory=128Mi", "--requests", "exporter:cpu=0.1", "--requests",
         "node-labeller:ephemeral-storage=10Mi", "--requests", "mps-control-daemon:memory=64Mi",
         "--requests", "scheduler:cpu=1", "--limits",
         "scheduler:memory=2Gi,ephemeral-storage=1Gi"}}},
      {"runtime-class", {{}, {"--runtime-class", "nvidia"}}},
      {"namespace", {{}, {"--namespace", "gpu-system"}}},
      {"scheduler", {{}, {"--no-scheduler"}, {"--no-podgroup-crd"}}},
      {"images",
       {{},
        {"--image", "registry.example:5000/team/gpuorch:1.2", "--mps-image",
         "registry.example:5000/cuda:12"}}},
  };
}

// Pairs that make no sense, which `gpuorch manifests` refuses: MPS and MIG are NVIDIA's.
bool allowed(std::size_t f1, std::size_t l1, std::size_t f2, std::size_t l2) {
  if (f1 > f2) return allowed(f2, l2, f1, l1);
  const bool amd = f1 == 0 && l1 == 1;
  return !(amd && ((f2 == 1 && l2 == 2) || (f2 == 2 && l2 != 0)));
}

// Greedy pairwise construction: each row starts from the first pair not yet covered and fills
// the other options with the value that covers the most new pairs (the lowest on a tie).
std::vector<std::vector<std::size_t>> pairwise_rows(const std::vector<Factor>& fs) {
  using Pair = std::array<std::size_t, 4>;
  std::set<Pair> uncovered;
  for (std::size_t i = 0; i < fs.size(); ++i) {
    for (std::size_t j = i + 1; j < fs.size(); ++j) {
      for (std::size_t a = 0; a < fs[i].levels.size(); ++a) {
        for (std::size_t b = 0; b < fs[j].levels.size(); ++b) {
          if (allowed(i, a, j, b)) uncovered.insert({i, a, j, b});
        }
      }
    }
  }
  constexpr std::size_t kUnset = ~std::size_t{0};
  std::vector<std::vector<std::size_t>> rows;
  while (!uncovered.empty()) {
    std::vector<std::size_t> row(fs.size(), kUnset);
    const Pair first = *uncovered.begin();
    row[first[0]] = first[1];
    row[first[2]] = first[3];
    for (std::size_t k = 0; k < fs.size(); ++k) {
      if (row[k] != kUnset) continue;
      std::size_t best = 0;
      long best_gain = -1;
      for (std::size_t l = 0; l < fs[k].levels.size(); ++l) {
        long gain = 0;
        bool ok = true;
        for (std::size_t m = 0; m < fs.size(); ++m) {
          if (m == k || row[m] == kUnset) continue;
          ok = ok && allowed(k, l, m, row[m]);
          const Pair p = k < m ? Pair{k, l, m, row[m]} : Pair{m, row[m], k, l};
          gain += static_cast<long>(uncovered.count(p));
        }
        if (ok && gain > best_gain) {
          best = l;
          best_gain = gain;
        }
      }
      row[k] = best;
    }
    for (std::size_t i = 0; i < fs.size(); ++i) {
      for (std::size_t j = i + 1; j < fs.size(); ++j) uncovered.erase({i, row[i], j, row[j]});
    }
    rows.push_back(row);
  }
  return rows;
}

// Every quantity sent is kept, as the same amount (the server writes "0.1" back as "100m").
void expect_same_quantities(const json& sent, const json& kept) {
  for (const char* kind : {"requests", "limits"}) {
    const json asked = sent.value(kind, json::object());  // kept alive while iterated
    for (const auto& [name, q] : asked.items()) {
      ASSERT_TRUE(kept.contains(kind) && kept[kind].contains(name)) << kind << " " << name;
      EXPECT_EQ(quantity_milli(q.get<std::string>()),
                quantity_milli(kept[kind][name].get<std::string>()))
          << kind << " " << name;
    }
  }
}

TEST(ManifestsDryRun, EveryOptionCombinationAcceptedByTheApiServer) {
  const auto started = std::chrono::steady_clock::now();
  const std::vector<Factor> fs = factors();
  const auto rows = pairwise_rows(fs);
  // Every option on and off at least once (what pairwise coverage implies, checked anyway).
  for (std::size_t f = 0; f < fs.size(); ++f) {
    for (std::size_t l = 0; l < fs[f].levels.size(); ++l) {
      EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r[f] == l; }))
          << fs[f].name << " value " << l << " never used";
    }
  }

  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_kubeconfig(plane.kubeconfig()));
  test::TempDir dir;
  std::map<std::string, test_apply::Resource> collections;  // by apiVersion, kind, namespace
  std::set<std::string> namespaces;
  std::size_t objects = 0;
  for (std::size_t n = 0; n < rows.size(); ++n) {
    Args args = {"manifests", "--json"};
    for (std::size_t f = 0; f < fs.size(); ++f) {
      const Args& a = fs[f].levels[rows[n][f]];
      args.insert(args.end(), a.begin(), a.end());
    }
    std::string line;
    for (const auto& a : args) line += " " + a;
    SCOPED_TRACE("gpuorch" + line);
    const auto r = test::run_cli(args, dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json all = json::parse(r.out);
    ASSERT_TRUE(all.is_array());
    for (const json& obj : all) {
      const std::string kind = obj["kind"];
      const std::string name = obj["metadata"]["name"];
      SCOPED_TRACE(kind + " " + name);
      const std::string key = obj["apiVersion"].get<std::string>() + " " + kind + " " +
                              obj["metadata"].value("namespace", "");
      if (!collections.contains(key)) collections[key] = test_apply::resource_of(api, obj);
      const test_apply::Resource& res = collections[key];
      try {
        if (kind == "Namespace") {
          // For real, once: the namespaced objects are admitted into it.
          if (namespaces.insert(name).second) test_apply::create_or_replace(api, res, obj);
          continue;
        }
        const json got = api.create(res.collection + "?fieldValidation=Strict", obj, true);
        ++objects;
        EXPECT_EQ(got["kind"], kind);
        EXPECT_EQ(got["metadata"]["name"], name);
        if (kind == "DaemonSet" || kind == "Deployment") {
          // Nothing the options wrote was dropped or rewritten by the server's conversion.
          const json& sent = obj["spec"]["template"]["spec"];
          const json& kept = got["spec"]["template"]["spec"];
          for (const char* field :
               {"imagePullSecrets", "nodeSelector", "tolerations", "runtimeClassName"}) {
            if (sent.contains(field)) {
              EXPECT_EQ(kept[field], sent[field]) << field;
            }
          }
          for (std::size_t c = 0; c < sent["containers"].size(); ++c) {
            expect_same_quantities(sent["containers"][c]["resources"],
                                   kept["containers"][c]["resources"]);
            EXPECT_EQ(kept["containers"][c]["securityContext"],
                      sent["containers"][c]["securityContext"]);
          }
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "the API server refused it: " << e.what();
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << rows.size() << " option sets (pairwise over " << fs.size() << " options), "
            << objects << " objects dry-run, " << seconds << " s\n";
  EXPECT_GE(objects, rows.size() * 10);
}

}  // namespace
}  // namespace gpuorch::k8s
