#pragma once
// The queue tree and its fair shares. Each round the capacity is divided top-down, as
// KAI-Scheduler's proportion plugin divides it: at each level every queue first gets its quota
// (what it is guaranteed) up to what its jobs want, then the rest goes to the queues that want
// more, higher `priority` first, in proportion to `overQuotaWeight`, never past a queue's limit
// or its demand (water-filling, per resource; each GPU model a queue names is a resource too). A
// queue's share is then what its jobs may hold without being the first to give back; over-quota
// admissions are reclaimable.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/sched/jobs/resources.hpp"
#include "gpuorch/workload/queue_spec.hpp"

namespace gpuorch::sched::jobs {

using Amounts = std::array<double, kResourceKinds>;

class QueueTree {
 public:
  // `specs` must be checked (io/queue_yaml.hpp): names unique, parents defined, no cycle. Empty:
  // one queue named workload::kDefaultQueue with no quota and no limit.
  explicit QueueTree(std::vector<workload::QueueSpec> specs = {});

  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  [[nodiscard]] const workload::QueueSpec& spec(std::size_t q) const { return nodes_[q].spec; }
  [[nodiscard]] bool leaf(std::size_t q) const { return nodes_[q].children.empty(); }
  [[nodiscard]] std::optional<std::size_t> find(const std::string& name) const;
  // Leaf queues in definition order.
  [[nodiscard]] const std::vector<std::size_t>& leaves() const { return leaves_; }
  [[nodiscard]] int parent(std::size_t q) const { return nodes_[q].parent; }

  // The GPU models the queues name (spec.resources.gpuModels), in the order first named: model i
  // is counted in Resources slot kFirstModelSlot + i. A queue that names no quota for a model
  // others name has quota 0 for it, its `gpu` limit and its `gpu` overQuotaWeight (what KAI
  // gives a resource a queue leaves out: nothing guaranteed, shared by weight).
  [[nodiscard]] const std::vector<std::string>& gpu_models() const { return models_; }
  [[nodiscard]] std::optional<std::size_t> model_slot(std::string_view model) const;
  // The models queue q lists, as slots, in its order (a job accepting several tries them so).
  [[nodiscard]] const std::vector<std::size_t>& listed_slots(std::size_t q) const {
    return nodes_[q].listed;
  }

  // Guaranteed amounts (quota; none = 0) and caps (limit; none = unbounded) per resource.
  [[nodiscard]] const Amounts& quota(std::size_t q) const { return nodes_[q].quota; }
  [[nodiscard]] const Amounts& limit(std::size_t q) const { return nodes_[q].limit; }

  // Each queue's fair share (every queue of the tree, by index) of `capacity`, given what each
  // leaf's jobs want (`demand`, by queue index; entries of inner queues are ignored).
  [[nodiscard]] std::vector<Amounts> fair_shares(const std::vector<Amounts>& demand,
                                                 const Amounts& capacity) const;

 private:
  struct Node {
    workload::QueueSpec spec;
    int parent = -1;
    std::vector<std::size_t> children;
    Amounts quota{};
    Amounts limit{};
    Amounts weight{};
    std::vector<std::size_t> listed;
  };
  void divide(const std::vector<std::size_t>& siblings, const Amounts& capacity,
              const std::vector<Amounts>& demand, std::vector<Amounts>& share) const;

  std::vector<Node> nodes_;
  std::vector<std::size_t> roots_;
  std::vector<std::size_t> leaves_;
  std::vector<std::string> models_;
};

}  // namespace gpuorch::sched::jobs
