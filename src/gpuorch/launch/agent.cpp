#include "gpuorch/launch/agent.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "gpuorch/base/process_tree.hpp"
#include "gpuorch/launch/guardian.hpp"
#include "gpuorch/launch/output.hpp"
#include "gpuorch/launch/process.hpp"
#include "gpuorch/launch/run_cgroup.hpp"
#include "gpuorch/launch/shim.hpp"

namespace gpuorch::launch {
namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::atomic<int> g_signal{0};
std::atomic<int> g_signal_count{0};

extern "C" void on_signal(int sig) {
  g_signal.store(sig);
  g_signal_count.fetch_add(1);
}

// Installs the agent's handlers for its lifetime (no SA_RESTART: a blocked wait returns EINTR).
class SignalGuard {
 public:
  SignalGuard() {
    g_signal = 0;
    g_signal_count = 0;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    ::sigaction(SIGPIPE, &ign, &old_pipe_);
  }
  ~SignalGuard() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
  struct sigaction old_pipe_ {};
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return 1;
}

std::string describe_exit(int code) {
  if (code >= 0) return fmt::format("exit code {}", code);
  const char* name = sigabbrev_np(-code);
  return fmt::format("exit code {} (signal {}, SIG{})", code, -code, name ? name : "?");
}

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;      // the worker, and its process group
  pid_t shim = -1;     // its parent, the agent's child (shim.hpp)
  int events_fd = -1;  // the shim's records; -1 once it has exited
  bool running = false;
  int exit_code = 0;
  std::string error_file;
  Clock::time_point exited_at{};
  bool failed_first = false;  // had failed on its own when the agent noticed (not stopped by it)
  int left_found = 0;         // what its shim ended after it (ShimEvent::kEnded)
  int left_killed = 0;
};

class Group {
 public:
  // `cgroup`: where the workers go (may be null); `spare`: descendants that are not the run's
  // (the guardian).
  Group(const AgentConfig& c, const Log& log, RunCgroup* cgroup, std::vector<pid_t> spare)
      : c_(c), log_(log), cgroup_(cgroup), spare_(std::move(spare)) {}

  ~Group() { close_events(); }
  std::string throughput_file;  // every worker's GPUORCH_THROUGHPUT_FILE (empty: none)
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // Reaps every exited child (the shims, orphans reparented here) and reads the shims' records;
  // true if one of ours changed state.
  bool reap() {
    for (;;) {
      int status = 0;
      if (::waitpid(-1, &status, WNOHANG) <= 0) break;
    }
    bool changed = false;
    for (auto& w : workers_) changed = read_events(w) || changed;
    return changed;
  }

  [[nodiscard]] bool any_running() const {
    return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
  }
  [[nodiscard]] bool all_succeeded() const {
    return std::all_of(workers_.begin(), workers_.end(),
                       [](const Worker& w) { return !w.running && w.exit_code == 0; });
  }
  [[nodiscard]] bool any_failed() const {
    return std::any_of(workers_.begin(), workers_.end(),
                       [](const Worker& w) { return !w.running && w.exit_code != 0; });
  }

  void signal_all(int sig) {
    // The whole process group: the worker and whatever it started (data loaders, compilers).
    for (const auto& w : workers_) ::kill(-w.pid, sig);
  }

  // SIGTERM (or `first`), wait up to the grace period, then SIGKILL what is left.
  void stop(int first = SIGTERM) {
    if (workers_.empty()) return;
    signal_all(first);
    const auto deadline = Clock::now() + c_.stop_grace;
    const int signals_before = g_signal_count.load();
    while (any_running() && Clock::now() < deadline) {
      // Another signal while waiting (a second Ctrl-C) means: now.
      if (g_signal_count.load() > signals_before) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      reap();
    }
    signal_all(SIGKILL);
    while (any_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      reap();
    }
    end_leftovers(signals_before);
  }

  // What the workers left behind outside their process groups: a double-forked `setsid`
  // daemon is reparented to the worker's shim, which ends it when asked; what escaped a shim
  // (one killed from outside) is reparented to the agent (their subreaper) and ended here.
  void end_leftovers(int signals_before) {
    const auto hurry = [signals_before] { return g_signal_count.load() > signals_before; };
    const auto by_shims = end_through_shims(hurry);
    const auto ended = base::end_descendants(c_.stop_grace, spare_, hurry);
    if (cgroup_ && !cgroup_->kill_all()) {
      log_(fmt::format("warning: cgroup {} still has {} processes", cgroup_->path(),
                       cgroup_->members()));
    }
    const auto reaped = base::end_descendants(std::chrono::milliseconds(0), spare_);
    const int found = by_shims.found + ended.found;
    if (found > 0) {
      log_(fmt::format("ended {} process{} the workers left behind ({} after SIGKILL)", found,
                       found == 1 ? "" : "es", by_shims.killed + ended.killed));
    }
    if (!by_shims.all_gone || !ended.all_gone || !reaped.all_gone) {
      log_("warning: some descendants of the workers did not end");
    }
  }

  // SIGTERM to every shim still there (a second one when `hurry` turns true): each ends its
  // subtree (SIGTERM, SIGKILL after the grace period), reports, and exits. A shim that does not
  // is killed after the grace period and 5 s more (what it held is then the agent's).
  base::EndedDescendants end_through_shims(const std::function<bool()>& hurry) {
    base::EndedDescendants r;
    for (const auto& w : workers_) {
      if (w.events_fd >= 0) ::kill(w.shim, SIGTERM);
    }
    const auto deadline = Clock::now() + c_.stop_grace + std::chrono::seconds(5);
    bool hurried = false;
    for (;;) {
      reap();
      const bool open = std::any_of(workers_.begin(), workers_.end(),
                                    [](const Worker& w) { return w.events_fd >= 0; });
      if (!open) break;
      const bool late = Clock::now() > deadline;
      if ((!hurried && hurry()) || late) {
        for (const auto& w : workers_) {
          if (w.events_fd >= 0) ::kill(w.shim, late ? SIGKILL : SIGTERM);
        }
        hurried = true;
        r.all_gone = r.all_gone && !late;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& w : workers_) {
      r.found += w.left_found;
      r.killed += w.left_killed;
      w.left_found = w.left_killed = 0;
    }
    return r;
  }

  void start(const Round& round, int attempt, int restart_count, const std::string& attempt_dir,
             std::vector<std::string>& warnings, std::set<std::string>& warned) {
    close_events();
    workers_.clear();
    relay_ = std::make_unique<OutputRelay>();
    const int nproc = static_cast<int>(c_.plan.ranks.size());
    for (int lr = 0; lr < nproc; ++lr) {
      Worker w;
      w.local_rank = lr;
      w.rank = round.group_rank * nproc + lr;
      const std::string dir = fmt::format("{}/{}", attempt_dir, lr);
      fs::create_directories(dir);
      w.error_file = dir + "/error.json";
      fs::remove(w.error_file);
      WorkerIdentity who;
      who.local_rank = lr;
      who.rank = w.rank;
      who.world_size = round.group_world_size * nproc;
      who.local_world_size = nproc;
      who.group_rank = round.group_rank;
      who.group_world_size = round.group_world_size;
      who.role_rank = w.rank;
      who.role_world_size = who.world_size;
      who.role = c_.role;
      who.master_addr = round.master_addr;
      who.master_port = round.master_port;
      who.agent_store = round.agent_store;
      who.restart_count = restart_count;
      who.max_restarts = c_.max_restarts;
      who.run_id = c_.run_id;
      who.error_file = w.error_file;
      who.throughput_file = throughput_file;
      const auto pipes =
          relay_->add_worker(c_.log_dir.empty() ? std::string() : dir, route(w, 1), route(w, 2));
      SpawnSpec spec;
      spec.path = c_.program;
      spec.argv = c_.argv;
      spec.env = to_envp(worker_env(c_.base_env, c_.user_env, c_.plan, who));
      const auto& b = c_.plan.ranks[static_cast<std::size_t>(lr)];
      spec.cpus = b.cpus;
      spec.memory_node = b.bind_memory ? b.numa_node : -1;
      spec.stdout_fd = pipes.stdout_write;
      spec.stderr_fd = pipes.stderr_write;
      spec.cgroup_procs_fd = cgroup_ ? cgroup_->procs_fd() : -1;
      spec.lifeline_fd = lifeline_.read_fd();
      spec.stop_grace_ms = static_cast<int>(
          std::min<std::chrono::milliseconds::rep>(c_.stop_grace.count(), 1 << 30));
      Spawned s;
      try {
        s = spawn_worker(spec);
      } catch (...) {
        relay_->close_write_ends();
        stop(SIGKILL);
        throw;
      }
      w.pid = s.pid;
      w.shim = s.shim;
      w.events_fd = s.events_fd;
      w.running = true;
      workers_.push_back(w);
      for (const auto& warning : s.warnings) {
        const std::string text = fmt::format("local rank {}: {}", lr, warning);
        if (warned.insert(warning).second) {
          warnings.push_back(text);
          log_(fmt::format("warning: {}", text));
        }
      }
    }
    relay_->close_write_ends();
    relay_->start();
    (void)attempt;
  }

  void finish_output() {
    if (relay_) relay_->finish(std::chrono::milliseconds(2000));
    relay_.reset();
  }

  // The workers that failed before the agent stopped the group: only they are root-cause
  // candidates (the others die of the stop, or of their peers' absence).
  void mark_failures() {
    for (auto& w : workers_) w.failed_first = !w.running && w.exit_code != 0;
  }

  [[nodiscard]] const std::vector<Worker>& workers() const { return workers_; }

 private:
  // Stream `bit` (1 stdout, 2 stderr) of worker `w`: redirected (file only) unless tee'd.
  [[nodiscard]] StreamRoute route(const Worker& w, int bit) const {
    StreamRoute r;
    const bool tee = (c_.tee.at(w.local_rank) & bit) != 0;
    const bool redirected = (c_.redirects.at(w.local_rank) & bit) != 0;
    const bool shown = c_.console_ranks.empty() ||
                       std::find(c_.console_ranks.begin(), c_.console_ranks.end(), w.local_rank) !=
                           c_.console_ranks.end();
    r.console = c_.console && shown && (tee || !redirected);
    r.prefix = tee ? torchrun_line_prefix(c_.line_prefix_template, c_.role, w.rank, w.local_rank)
                   : "[rank" + std::to_string(w.rank) + "]:";
    return r;
  }

  // The shim's records since the last look; true if the worker ended. A shim gone without a
  // word was killed, and its worker with it (PR_SET_PDEATHSIG: SIGKILL).
  static bool read_events(Worker& w) {
    bool changed = false;
    bool closed = false;
    while (w.events_fd >= 0) {
      const auto e = read_shim_event(w.events_fd, closed);
      if (e && e->kind == ShimEvent::kExited && w.running) {
        w.running = false;
        w.exit_code = exit_code_of(e->a);
        w.exited_at = Clock::now();
        changed = true;
      } else if (e && e->kind == ShimEvent::kEnded) {
        w.left_found += e->a;
        w.left_killed += e->b;
      }
      if (closed) {
        ::close(w.events_fd);
        w.events_fd = -1;
        if (w.running) {
          w.running = false;
          w.exit_code = -SIGKILL;
          w.exited_at = Clock::now();
          changed = true;
        }
      }
      if (!e) break;
    }
    return changed;
  }

  void close_events() {
    for (auto& w : workers_) {
      if (w.events_fd >= 0) ::close(w.events_fd);
      w.events_fd = -1;
    }
  }

  const AgentConfig& c_;
  const Log& log_;
  RunCgroup* cgroup_;
  std::vector<pid_t> spare_;
  Lifeline lifeline_;
  std::vector<Worker> workers_;
  std::unique_ptr<OutputRelay> relay_;
};

// The root cause among the failed workers: the error file with the smallest timestamp, else the
// worker that exited first.
FailureReport first_failure(const std::vector<Worker>& workers, int attempt) {
  const Worker* pick = nullptr;
  std::optional<WorkerError> pick_error;
  for (const auto& w : workers) {
    if (!w.failed_first) continue;
    auto e = read_error_file(w.error_file);
    bool better = false;
    if (!pick) {
      better = true;
    } else if (e && (!pick_error || e->timestamp < pick_error->timestamp)) {
      better = true;
    } else if (!e && !pick_error && w.exited_at < pick->exited_at) {
      better = true;
    }
    if (better) {
      pick = &w;
      pick_error = std::move(e);
    }
  }
  FailureReport f;
  if (!pick) return f;
  f.rank = pick->rank;
  f.local_rank = pick->local_rank;
  f.exit_code = pick->exit_code;
  f.attempt = attempt;
  f.error_file = pick->error_file;
  f.error = pick_error;
  return f;
}

class TempFolder {
 public:
  explicit TempFolder(const std::string& wanted) {
    if (!wanted.empty()) {
      path_ = wanted;
      return;
    }
    std::string pattern = (fs::temp_directory_path() / "gpuorch-launch-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
    owned_ = true;
  }
  ~TempFolder() {
    std::error_code ec;
    if (owned_) fs::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

}  // namespace

AgentResult run_agent(const AgentConfig& c, Rendezvous& rdzv, const Log& log) {
  const auto started = Clock::now();
  SignalGuard signals;
  become_subreaper();
  std::string no_cgroup;
  const auto cgroup = RunCgroup::create(fmt::format("gpuorch-launch-{}", ::getpid()), no_cgroup);
  if (cgroup) {
    log(fmt::format("workers in cgroup {}", cgroup->path()));
  } else {
    log(fmt::format("no cgroup for the workers ({}): their descendants are found through /proc",
                    no_cgroup));
  }
  // Declared after the cgroup: it ends first, and its sweep can still use cgroup.kill.
  const Guardian guardian(cgroup ? cgroup->kill_fd() : -1, cgroup ? cgroup->path() : "");
  TempFolder logs(c.log_dir);
  AgentResult result;
  std::set<std::string> warned;
  Group group(c, log, cgroup.get(), {guardian.pid()});
  std::optional<ThroughputReporter> throughput;
  if (c.publish_throughput) {
    // Outside the attempts' folders: the file outlives a restart, and a new round skips what
    // the old one wrote.
    fs::create_directories(fmt::format("{}/{}", logs.path(), c.run_id));
    throughput.emplace(fmt::format("{}/{}/throughput.jsonl", logs.path(), c.run_id),
                       c.publish_throughput, log, c.throughput_interval);
    group.throughput_file = throughput->path();
  }
  const auto cancelled = [] { return g_signal.load() != 0; };
  const auto membership_every = std::max(c.monitor_interval, std::chrono::milliseconds(500));
  auto done = [&](int code) {
    result.exit_code = code;
    result.wall_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    result.exits.clear();
    for (const auto& w : group.workers())
      result.exits.push_back({w.rank, w.local_rank, w.exit_code});
    return result;
  };

  for (;;) {
    Round round;
    try {
      round = rdzv.next_round(cancelled);
    } catch (const RendezvousCancelled&) {
      result.signal = g_signal.load();
      rdzv.leave();
      return done(128 + result.signal);
    }
    result.round = round;
    const int nproc = static_cast<int>(c.plan.ranks.size());
    result.world_size = round.group_world_size * nproc;
    const int attempt = result.attempts++;
    log(fmt::format("round {}: node {} of {}, {} workers in all, store {}:{}, attempt {}",
                    round.round, round.group_rank, round.group_world_size, result.world_size,
                    round.master_addr, round.master_port, attempt));
    const std::string attempt_dir = fmt::format("{}/{}/attempt_{}", logs.path(), c.run_id, attempt);
    if (throughput) {
      throughput->new_round(result.world_size, round.group_world_size, round.group_rank == 0);
    }
    group.start(round, attempt, result.restarts, attempt_dir, result.warnings, warned);

    enum class Outcome { kSucceeded, kFailed, kMembership, kSignal } outcome;
    auto last_membership_check = Clock::now();
    for (;;) {
      std::this_thread::sleep_for(c.monitor_interval);
      group.reap();
      if (throughput) throughput->tick(Clock::now());
      if (g_signal.load() != 0) {
        outcome = Outcome::kSignal;
        break;
      }
      if (group.any_failed()) {
        outcome = Outcome::kFailed;
        break;
      }
      if (group.all_succeeded()) {
        outcome = Outcome::kSucceeded;
        break;
      }
      if (Clock::now() - last_membership_check >= membership_every) {
        last_membership_check = Clock::now();
        if (rdzv.membership_changed()) {
          outcome = Outcome::kMembership;
          break;
        }
      }
    }

    // What the workers reported last, before they are gone.
    if (throughput) throughput->tick(Clock::now(), true);
    switch (outcome) {
      case Outcome::kSucceeded:
        group.end_leftovers(g_signal_count.load());
        group.finish_output();
        rdzv.finish(true);
        return done(0);
      case Outcome::kSignal: {
        result.signal = g_signal.load();
        log(fmt::format("signal {} (SIG{}): forwarding to the workers, SIGKILL after {:.0f} s",
                        result.signal, sigabbrev_np(result.signal),
                        std::chrono::duration<double>(c.stop_grace).count()));
        group.stop(result.signal);
        group.finish_output();
        rdzv.leave();
        return done(128 + result.signal);
      }
      case Outcome::kMembership:
        log("membership changed: stopping the workers for a new round (not counted as a restart)");
        group.stop();
        group.finish_output();
        ++result.membership_changes;
        continue;
      case Outcome::kFailed:
        break;
    }

    // A worker failed: the others may still be running. Stop them, then decide.
    group.mark_failures();
    group.stop();
    group.finish_output();
    auto failure = first_failure(group.workers(), attempt);
    log(fmt::format("rank {} (local rank {}) failed: {}{}", failure.rank, failure.local_rank,
                    describe_exit(failure.exit_code),
                    failure.error ? ": " + failure.error->message : std::string()));
    if (!result.first_failure) result.first_failure = failure;
    // Another node opened a new round first: its failure (or arrival) took our workers down.
    if (round.group_world_size > 1 && rdzv.membership_changed()) {
      log("another node opened a new round: restarting without using a restart");
      ++result.membership_changes;
      continue;
    }
    if (result.restarts < c.max_restarts) {
      ++result.restarts;
      log(fmt::format("restarting the local workers (restart {} of {})", result.restarts,
                      c.max_restarts));
      continue;
    }
    result.first_failure = failure;
    rdzv.finish(false);
    return done(1);
  }
}

std::string render_summary(const AgentConfig& c, const AgentResult& r) {
  std::string exits;
  for (const auto& e : r.exits) {
    exits += fmt::format("{}rank {}: {}", exits.empty() ? "" : ", ", e.rank, e.exit_code);
  }
  std::string out = "gpuorch launch summary\n";
  out += fmt::format("  run id         {}\n", c.run_id);
  out += fmt::format("  result         {}\n", r.exit_code == 0 ? "succeeded"
                                              : r.signal != 0
                                                  ? fmt::format("stopped by signal {}", r.signal)
                                                  : "failed");
  out += fmt::format("  node           {} of {} (round {})\n", r.round.group_rank,
                     r.round.group_world_size, r.round.round);
  out += fmt::format("  ranks          {} in all, {} on this node, backend {}, bind {}\n",
                     r.world_size, c.plan.ranks.size(), to_string(c.plan.backend),
                     to_string(c.plan.bind));
  out += fmt::format("  restarts       {} of {} (+{} for membership changes), {} attempts\n",
                     r.restarts, c.max_restarts, r.membership_changes, r.attempts);
  out += fmt::format("  exit codes     {}\n", exits.empty() ? "-" : exits);
  if (r.first_failure) {
    const auto& f = *r.first_failure;
    out += fmt::format("  first failure  rank {} (local rank {}), {}, attempt {}\n", f.rank,
                       f.local_rank, describe_exit(f.exit_code), f.attempt);
    if (f.error) out += fmt::format("  error          {}\n", f.error->message);
  }
  out += fmt::format("  wall time      {:.2f} s\n", r.wall_seconds);
  return out;
}

std::string summary_json(const AgentConfig& c, const AgentResult& r) {
  nlohmann::ordered_json j;
  j["schema"] = "gpuorch.launch-summary/v1";
  j["run_id"] = c.run_id;
  j["exit_code"] = r.exit_code;
  j["signal"] = r.signal;
  j["round"] = r.round.round;
  j["group_rank"] = r.round.group_rank;
  j["group_world_size"] = r.round.group_world_size;
  j["world_size"] = r.world_size;
  j["local_world_size"] = c.plan.ranks.size();
  j["backend"] = to_string(c.plan.backend);
  j["bind"] = to_string(c.plan.bind);
  j["restarts"] = r.restarts;
  j["max_restarts"] = c.max_restarts;
  j["membership_changes"] = r.membership_changes;
  j["attempts"] = r.attempts;
  j["exits"] = nlohmann::ordered_json::array();
  for (const auto& e : r.exits) {
    j["exits"].push_back(
        {{"rank", e.rank}, {"local_rank", e.local_rank}, {"exit_code", e.exit_code}});
  }
  if (r.first_failure) {
    const auto& f = *r.first_failure;
    j["first_failure"] = {{"rank", f.rank},
                          {"local_rank", f.local_rank},
                          {"exit_code", f.exit_code},
                          {"attempt", f.attempt},
                          {"message", f.error ? f.error->message : std::string()},
                          {"timestamp", f.error ? f.error->timestamp : 0}};
  } else {
    j["first_failure"] = nullptr;
  }
  j["warnings"] = r.warnings;
  j["wall_seconds"] = r.wall_seconds;
  return j.dump(2);
}

}  // namespace gpuorch::launch
