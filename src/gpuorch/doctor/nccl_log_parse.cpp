// Reading NCCL_DEBUG=INFO lines. NCCL prefixes each line with "host:pid:tid [cudaDev]" (WARN lines
// add "file.cc:line"); launchers and loggers prepend their own text, so the NCCL part is found by
// its "NCCL INFO"/"NCCL WARN" marker rather than at the start of the line. The message formats are
// those of NCCL 2.x: "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read" (older: "Ring 00 : 0 -> 1 via
// ..."), ring orders "Channel 00/02 :    0   1", "Trees [0] ...", "comm 0x.. rank R nranks N ...
// Init COMPLETE"; PyTorch's watchdog lines are matched by their fixed wording. Every line is also
// looked up in the catalogue (nccl_catalogue.hpp), which knows what each message means. Prefixes
// of launchers and log collectors come before the marker and are skipped: torchrun's "[rank0]:" and
// "[default0]:" (which give the rank), mpirun's "[1,0]<stdout>:", kubectl logs --prefix's
// "[pod/NAME/CONTAINER] ", the container runtime's "2026-01-01T00:00:00.000000000Z stdout F ",
// and timestamps.
#include <fmt/format.h>

#include <regex>
#include <sstream>
#include <utility>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/whole_number.hpp"
#include "gpuorch/doctor/nccl_log.hpp"

namespace gpuorch::doctor {

const char* to_string(Transport t) {
  switch (t) {
    case Transport::kP2p:
      return "P2P";
    case Transport::kShm:
      return "SHM";
    case Transport::kNetIb:
      return "NET/IB";
    case Transport::kNetSocket:
      return "NET/Socket";
    case Transport::kNetOther:
      return "NET/plugin";
    case Transport::kCollNet:
      return "CollNet";
    case Transport::kOther:
      return "other";
  }
  return "other";
}

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

Transport classify(const std::string& via) {
  if (starts_with(via, "P2P")) return Transport::kP2p;
  if (starts_with(via, "SHM") || via.find("shared memory") != std::string::npos) {
    return Transport::kShm;
  }
  if (starts_with(via, "NET/IB")) return Transport::kNetIb;
  if (starts_with(via, "NET/Socket")) return Transport::kNetSocket;
  if (starts_with(via, "NET/")) return Transport::kNetOther;
  if (starts_with(via, "CollNet") || starts_with(via, "COLLNET")) return Transport::kCollNet;
  // "direct pointer" (NCCL 2.4-2.6 spelled P2P this way in old "Ring" lines)
  if (via.find("direct pointer") != std::string::npos) return Transport::kP2p;
  return Transport::kOther;
}

struct Prefix {
  std::string host, pid, source;
  std::string rank;  // torchrun's "[rank3]:" / "[default3]:" (a local rank for the latter)
};

// The rank torchrun's --tee/--log-dir prefixes name: "[rank3]:" or "[default3]:".
std::string torchrun_rank(std::string_view before) {
  for (const std::string_view tag : {"[rank", "[default"}) {
    const std::size_t at = before.find(tag);
    if (at == std::string_view::npos) continue;
    std::size_t i = at + tag.size();
    const std::size_t digits = i;
    while (i < before.size() && before[i] >= '0' && before[i] <= '9') ++i;
    if (i > digits && i < before.size() && before[i] == ']') {
      return std::string(before.substr(digits, i - digits));
    }
  }
  return {};
}

// PyTorch's own prefix names the global rank: "[Rank 3]", "[PG 0 Rank 3]", "[PG ID 0 PG GUID 0 Rank
// 3]".
std::string torch_rank(std::string_view line) {
  const std::size_t at = line.find("Rank ");
  if (at == std::string_view::npos) return {};
  std::size_t i = at + 5;
  const std::size_t digits = i;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  if (i == digits || i >= line.size() || line[i] != ']') return {};
  return std::string(line.substr(digits, i - digits));
}

// "...junk... host:pid:tid [dev] [file.cc:12] " before the marker.
Prefix parse_prefix(const std::string& before) {
  const std::string rank = torchrun_rank(before);
  std::istringstream in(before);
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  Prefix p;
  p.rank = rank;
  std::size_t i = tokens.size();
  if (i > 0 && tokens[i - 1].front() != '[') p.source = tokens[--i];
  if (i > 0 && tokens[i - 1].front() == '[') --i;  // [cudaDev]
  if (i == 0) return p;
  std::string id = tokens[i - 1];
  const std::size_t tid = id.rfind(':');
  if (tid == std::string::npos || tid == 0) return p;
  const std::size_t pid = id.rfind(':', tid - 1);
  if (pid == std::string::npos) return p;
  p.pid = id.substr(pid + 1, tid - pid - 1);
  std::string host = id.substr(0, pid);
  // "[1,0]<stdout>:host" (mpirun --tag-output) and "INFO - host" keep only the host.
  const std::size_t junk = host.find_last_of(">]:");
  if (junk != std::string::npos) host = host.substr(junk + 1);
  p.host = host;
  return p;
}

const std::regex& connection_re() {
  static const std::regex re(
      R"(^(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)(?:\[[0-9a-fA-F]+\])? -> (\d+)(?:\[[0-9a-fA-F]+\])?(?: \[(?:send|receive)\])? via (.+?)\s*$)");
  return re;
}
const std::regex& ring_re() {
  static const std::regex re(R"(^(?:Channel|Ring) (\d+)(?:/\d+)? :((?:\s+-?\d+)+)\s*$)");
  return re;
}
const std::regex& init_re() {
  static const std::regex re(
      R"(comm 0x[0-9a-fA-F]+ rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev \d+)?(?: busId ([0-9a-fA-F]+))?(?: commId (0x[0-9a-fA-F]+))?.*Init COMPLETE)");
  return re;
}
const std::regex& env_re() {
  static const std::regex re(R"(^(NCCL_\w+) set by environment to (.*?)\.?\s*$)");
  return re;
}
const std::regex& socket_if_re() {
  static const std::regex re(R"(^(?:NET/Socket|Bootstrap) : Using (?:\[\d+\])?([^:\s]+):)");
  return re;
}
const std::regex& timeout_re() {
  static const std::regex re(
      R"(Rank (\d+)\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+).*?Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds)");
  return re;
}
const std::regex& progress_re() {
  static const std::regex re(
      R"(Rank (\d+)\] .*?at (?:NCCL )?work: (\d+), last enqueued NCCL work: (-?\d+), last completed NCCL work: (-?\d+))");
  return re;
}

// A number NCCL wrote (a rank, a channel, a sequence number); nullopt when it does not fit, and the
// line is then NCCL text this reader cannot read.
std::optional<int> small(const std::ssub_match& m) { return base::whole_number<int>(m.str()); }
std::optional<long long> large(const std::ssub_match& m) {
  return base::whole_number<long long>(m.str());
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  for (const auto& e : v) {
    if (e == s) return;
  }
  v.push_back(s);
}

void read_info(NcclLog& log, const Prefix& p, const std::string& msg, std::size_t line_no) {
  std::smatch m;
  if ((starts_with(msg, "Channel ") || starts_with(msg, "Ring ")) &&
      msg.find(" via ") != std::string::npos) {
    if (!std::regex_match(msg, m, connection_re())) return;
    const auto channel = small(m[1]), from = small(m[2]), to = small(m[3]);
    if (!channel || !from || !to) return;
    NcclConnection c;
    c.line = line_no;
    c.channel = *channel;
    c.from_rank = *from;
    c.to_rank = *to;
    c.via = m[4].str();
    c.transport = classify(c.via);
    c.gdr = c.via.find("GDRDMA") != std::string::npos;
    log.connections.push_back(std::move(c));
    return;
  }
  if (starts_with(msg, "Channel ") || starts_with(msg, "Ring ")) {
    if (!std::regex_match(msg, m, ring_re())) return;
    const auto channel = small(m[1]);
    if (!channel) return;
    std::vector<int> order;
    std::istringstream in(m[2].str());
    for (std::string r; in >> r;) {
      const auto rank = base::whole_number<int>(r);
      if (!rank) return;
      order.push_back(*rank);
    }
    log.rings[*channel] = std::move(order);
    return;
  }
  if (starts_with(msg, "Trees ")) {
    static const std::regex tree(R"(\[(\d+)\])");
    for (auto it = std::sregex_iterator(msg.begin(), msg.end(), tree); it != std::sregex_iterator();
         ++it) {
      if (const auto channel = small((*it)[1])) log.tree_channels.insert(*channel);
    }
    return;
  }
  if (starts_with(msg, "Pattern ")) {
    static const std::regex type(R"(, type ([A-Za-z0-9]+/[A-Za-z0-9]+))");
    if (std::regex_search(msg, m, type)) add_unique(log.graph_types, m[1].str());
    return;
  }
  if (starts_with(msg, "Using network ")) {
    add_unique(log.networks, msg.substr(14));
    return;
  }
  if (starts_with(msg, "NET/IB : No device found")) {
    add_unique(log.no_ib_device_hosts, p.host);
    return;
  }
  if (std::regex_search(msg, m, socket_if_re())) {
    // NET/Socket names the interface data goes over; Bootstrap only the rendezvous one.
    if (starts_with(msg, "NET/Socket") || !log.socket_ifs.count(p.host)) {
      log.socket_ifs[p.host] = m[1].str();
    }
    return;
  }
  if (msg.find(" set by environment to ") != std::string::npos) {
    if (std::regex_match(msg, m, env_re())) log.env[m[1].str()] = m[2].str();
    return;
  }
  if (const std::size_t at = msg.find(" nNodes "); at != std::string::npos) {
    // The widest communicator's host count says whether the job spans hosts, even in a log of one.
    std::size_t end = at + 8;
    while (end < msg.size() && msg[end] >= '0' && msg[end] <= '9') ++end;
    if (const auto n = base::whole_number<int>(msg.substr(at + 8, end - at - 8))) {
      log.nnodes = std::max(log.nnodes.value_or(0), *n);
    }
  }
  if (msg.find("Init COMPLETE") != std::string::npos && std::regex_search(msg, m, init_re())) {
    const auto rank = small(m[1]), nranks = small(m[2]), cuda_dev = small(m[3]);
    if (!rank || !nranks || !cuda_dev) return;
    NcclRank r;
    r.rank = *rank;
    r.nranks = *nranks;
    r.cuda_dev = *cuda_dev;
    r.bus_id = m[4].str();
    r.comm_id = m[5].str();
    r.host = p.host;
    r.pid = p.pid;
    // The widest communicator is the job's world; sub-communicators reuse rank numbers.
    if (!log.nranks || r.nranks > *log.nranks) {
      log.nranks = r.nranks;
      log.init_complete.clear();
    }
    if (r.nranks == *log.nranks) log.init_complete[r.rank] = std::move(r);
  }
}

void read_watchdog(NcclLog& log, const std::string& line, std::size_t line_no) {
  std::smatch m;
  if (line.find("Watchdog caught collective operation timeout") != std::string::npos &&
      std::regex_search(line, m, timeout_re())) {
    const auto rank = small(m[1]);
    const auto seq = large(m[2]), timeout_ms = large(m[4]), ran_ms = large(m[5]);
    if (!rank || !seq || !timeout_ms || !ran_ms) return;
    CollectiveTimeout t;
    t.line = line_no;
    t.rank = *rank;
    t.seq = *seq;
    t.op = m[3].str();
    t.timeout_ms = *timeout_ms;
    t.ran_ms = *ran_ms;
    log.timeouts.push_back(std::move(t));
    return;
  }
  if (line.find("last enqueued NCCL work") != std::string::npos &&
      std::regex_search(line, m, progress_re())) {
    const auto rank = small(m[1]);
    const auto at = large(m[2]), enqueued = large(m[3]), completed = large(m[4]);
    if (!rank || !at || !enqueued || !completed) return;
    WatchdogProgress w;
    w.rank = *rank;
    w.at_work = *at;
    w.last_enqueued = *enqueued;
    w.last_completed = *completed;
    log.progress[w.rank] = w;
  }
}

void record(NcclLog& log, CatalogueMatch m, std::string_view text, const std::string& host,
            const std::string& rank, std::size_t line_no) {
  ++log.recognised;
  const auto [it, fresh] = log.hit_index.try_emplace(m.entry, log.hits.size());
  if (fresh) {
    CatalogueHit h;
    h.entry = m.entry;
    h.format = m.format;
    h.first_line = line_no;
    h.text = std::string(text);
    h.values = std::move(m.values);
    h.host = host;
    h.rank = rank;
    log.hits.push_back(std::move(h));
  }
  CatalogueHit& h = log.hits[it->second];
  ++h.count;
  if (!host.empty()) h.hosts.insert(host);
  for (const auto& fact : m.entry->facts) {
    auto& hosts = log.facts[fact];
    if (!host.empty()) hosts.insert(host);
  }
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// What a line tells about the next: PyTorch prints NCCL's last WARN on the line after "Last
// error:", without NCCL's marker (the only NCCL text of a log run without NCCL_DEBUG).
struct ReadState {
  bool last_error_next = false;
};

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The line after "Last error:": NCCL's WARN text, after the launcher's prefix if any (torchrun's
// "[rank0]:", a bracketed tag "[trainer0|0]:", pdsh's "host: ").
bool read_last_error(NcclLog& log, const Catalogue& catalogue, const std::string& line,
                     std::size_t line_no) {
  const std::string_view whole = trimmed(line);
  std::vector<std::string_view> candidates{whole};
  if (!whole.empty() && whole.front() == '[' && whole.find("]:") != std::string_view::npos) {
    candidates.push_back(whole.substr(whole.find("]:") + 2));
  }
  if (const std::size_t colon = whole.find(": "); colon != std::string_view::npos) {
    candidates.push_back(whole.substr(colon + 2));
  }
  for (std::string_view text : candidates) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    auto hit = catalogue.match(LineLevel::kWarn, text);
    if (!hit) continue;
    ++log.nccl_lines;
    record(log, std::move(*hit), text, std::string(), torchrun_rank(whole), line_no);
    return true;
  }
  return false;
}

// Where a second NCCL line starts inside `line` (logs pasted into bug reports lose their line
// breaks: "[0] NCCL INFO A [0] NCCL INFO B"): the start of the "host:pid:tid [dev] " prefix before
// the second marker, or npos when there is one marker or none.
std::size_t second_line_at(const std::string& line) {
  const std::size_t first = std::min(line.find("NCCL INFO "), line.find("NCCL WARN "));
  if (first == std::string::npos) return std::string::npos;
  const std::size_t second =
      std::min(line.find("NCCL INFO ", first + 10), line.find("NCCL WARN ", first + 10));
  if (second == std::string::npos) return std::string::npos;
  std::size_t cut = second;
  auto back_over_token = [&](auto is_token) {
    std::size_t i = cut;
    while (i > first + 10 && line[i - 1] == ' ') --i;
    std::size_t start = i;
    while (start > first + 10 && line[start - 1] != ' ') --start;
    if (start < i && is_token(std::string_view(line).substr(start, i - start))) cut = start;
  };
  back_over_token([](std::string_view t) { return t.front() == '[' && t.back() == ']'; });
  // "host:pid:tid": two numbers after the last two colons.
  back_over_token([](std::string_view t) {
    const std::size_t tid = t.rfind(':');
    if (tid == std::string_view::npos || tid == 0) return false;
    const std::size_t pid = t.rfind(':', tid - 1);
    auto digits = [](std::string_view d) {
      return !d.empty() &&
             std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    return pid != std::string_view::npos && digits(t.substr(pid + 1, tid - pid - 1)) &&
           digits(t.substr(tid + 1));
  });
  return cut;
}

void read_one_line(NcclLog& log, const Catalogue& catalogue, ReadState& state, std::string& line,
                   std::size_t line_no);

// One line of the log (without its line break) into `log`.
void read_line(NcclLog& log, const Catalogue& catalogue, ReadState& state, std::string& line,
               std::size_t line_no) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.size() > kNcclMaxLineBytes) return;
  const std::size_t nccl_before = log.nccl_lines;
  for (std::size_t cut = second_line_at(line); cut != std::string::npos;
       cut = second_line_at(line)) {
    std::string head = line.substr(0, cut);
    read_one_line(log, catalogue, state, head, line_no);
    line.erase(0, cut);
  }
  read_one_line(log, catalogue, state, line, line_no);
  // A line of the file counts once, however many NCCL lines were pasted into it.
  log.nccl_lines = std::min(log.nccl_lines, nccl_before + 1);
}

void read_one_line(NcclLog& log, const Catalogue& catalogue, ReadState& state, std::string& line,
                   std::size_t line_no) {
  // NCCL's own lines are short (it formats them in 1 KiB buffers); a longer one is another
  // program's, and std::regex recurses once per byte, so it is not searched at all.
  const bool last_error =
      std::exchange(state.last_error_next, ends_with(trimmed(line), "Last error:"));
  if (last_error && read_last_error(log, catalogue, line, line_no)) return;
  const std::size_t info = line.find("NCCL INFO ");
  const std::size_t warn = line.find("NCCL WARN ");
  const std::size_t marker = std::min(info, warn);
  if (marker != std::string::npos) {
    ++log.nccl_lines;
    const Prefix p = parse_prefix(line.substr(0, marker));
    if (!p.host.empty()) log.hosts.insert(p.host);
    const std::string msg = line.substr(marker + 10);
    const auto level = marker == warn ? LineLevel::kWarn : LineLevel::kInfo;
    const std::string_view text = trimmed(msg);
    auto hit = catalogue.match(level, text);
    if (hit) record(log, std::move(*hit), text, p.host, p.rank, line_no);
    if (marker == warn) {
      // A WARN the catalogue knows is reported through its entry; the others as they are.
      if (!hit) log.warnings.push_back({line_no, p.host, p.source, msg});
    } else if (msg.rfind("NCCL version ", 0) == 0) {
      // Recent NCCL (2.28 on the H200 machine) logs its version as an INFO line.
      if (log.version.empty()) std::istringstream(msg.substr(13)) >> log.version;
    } else {
      read_info(log, p, msg, line_no);
    }
    return;
  }
  // PyTorch's and torchrun's messages sit anywhere in a line, after their own prefixes.
  auto hit = catalogue.match(LineLevel::kAny, trimmed(line));
  const bool torch = line.find("ProcessGroupNCCL") != std::string::npos ||
                     line.find("WorkNCCL") != std::string::npos;
  if (hit) {
    // PyTorch's lines name no host; the rank is PyTorch's own or torchrun's prefix.
    std::string rank = torch_rank(line);
    if (rank.empty()) rank = torchrun_rank(line);
    record(log, std::move(*hit), trimmed(line), std::string(), rank, line_no);
  }
  // NCCL prints its version outside its INFO lines before 2.28; RCCL as "RCCL version : X-hash";
  // PyTorch quotes it in its errors ("..., NCCL version 2.19.3").
  bool version_line = false;
  for (const std::string_view tag : {"NCCL version ", "RCCL version : ", "RCCL version "}) {
    const std::size_t version = line.find(tag);
    if (version == std::string::npos) continue;
    version_line = true;
    if (log.version.empty()) {
      std::istringstream v(line.substr(version + tag.size()));
      v >> log.version;
    }
    break;
  }
  if (hit || torch || version_line) ++log.nccl_lines;
  if (torch) read_watchdog(log, line, line_no);
}

NcclLog finished(NcclLog log, std::size_t lines, const std::string& name) {
  log.lines = lines;
  if (log.nccl_lines == 0) {
    base::fail_input(fmt::format(
        "{}: no NCCL line in {} lines (run the job with NCCL_DEBUG=INFO and give its output)", name,
        lines));
  }
  return log;
}

}  // namespace

NcclLog parse_nccl_log(const std::string& text, const std::string& name,
                       const Catalogue& catalogue) {
  NcclLog log;
  ReadState state;
  std::istringstream in(text);
  std::size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    read_line(log, catalogue, state, line, ++line_no);
  }
  return finished(std::move(log), line_no, name);
}

NcclLog read_nccl_log(const std::string& path, const Catalogue& catalogue) {
  base::LineReader in(path, "NCCL log", base::kLogFileMaxBytes, kNcclMaxLineBytes,
                      base::LineReader::LongLines::kSkip);
  NcclLog log;
  ReadState state;
  for (std::string line; in.next(line);) read_line(log, catalogue, state, line, in.line_number());
  return finished(std::move(log), in.line_number(), path);
}

}  // namespace gpuorch::doctor
