// The pickled `_RendezvousState` field by field. Objects are rebuilt by class reference in
// PyTorch's module; a datetime is `datetime(<10 state bytes>[, timezone(timedelta(...))])`, the
// bytes being year (2, big-endian), month (its top bit is `fold`), day, hour, minute, second and
// microseconds (3, big-endian), local to the timezone when there is one.
#include "gpuorch/launch/torch_rdzv_state.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpuorch/launch/py_pickle.hpp"

namespace gpuorch::launch {
namespace {

using pickle::Kind;
using pickle::PickleError;
using pickle::Value;

constexpr std::string_view kModule = "torch.distributed.elastic.rendezvous.dynamic_rendezvous";
constexpr std::int64_t kMicrosPerDay = 86'400'000'000;

[[noreturn]] void bad(const std::string& what) { throw PickleError("rendezvous state: " + what); }

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
  std::int64_t y;
  unsigned m, d;
};
Civil civil_from_days(std::int64_t z) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2), m, d};
}

bool is_leap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

const Value& object_of(const Value& v, std::string_view module, std::string_view cls,
                       const std::string& what) {
  if (v.kind != Kind::kObject || !v.callable->is_global(module, cls)) {
    bad(fmt::format("{} is a {}, not a {}.{}", what,
                    v.kind == Kind::kObject ? v.callable->text + "." + v.callable->name
                                            : pickle::kind_name(v.kind),
                    module, cls));
  }
  return v;
}

std::int64_t int_of(const Value& v, const std::string& what) {
  if (v.kind != Kind::kInt)
    bad(fmt::format("{} is a {}, not an int", what, pickle::kind_name(v.kind)));
  return v.integer;
}

bool bool_of(const Value& v, const std::string& what) {
  if (v.kind != Kind::kBool)
    bad(fmt::format("{} is a {}, not a bool", what, pickle::kind_name(v.kind)));
  return v.boolean;
}

// The str-keyed __dict__ an object was built with.
std::vector<std::pair<std::string, const Value*>> fields_of(const Value& object,
                                                            const std::string& what) {
  if (!object.args->items.empty()) bad(what + " was made with arguments");
  if (!object.state || object.state->kind != Kind::kDict) bad(what + " has no field dict");
  std::vector<std::pair<std::string, const Value*>> out;
  const auto& kv = object.state->items;
  for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (kv[i]->kind != Kind::kStr) bad(what + " has a field name that is not a str");
    out.emplace_back(kv[i]->text, kv[i + 1]);
  }
  return out;
}

class Decoder {
 public:
  explicit Decoder(const TorchStateDialect& fallback) { state_.dialect = fallback; }

  TorchRdzvState run(const Value& root) {
    object_of(root, kModule, "_RendezvousState", "the state");
    bool seen[8] = {};
    static constexpr std::string_view kFields[] = {"round",           "complete",       "deadline",
                                                   "closed",          "participants",   "wait_list",
                                                   "last_heartbeats", "redundancy_list"};
    for (const auto& [name, value] : fields_of(root, "the state")) {
      const auto at = std::find(std::begin(kFields), std::end(kFields), name) - std::begin(kFields);
      if (at == static_cast<std::ptrdiff_t>(std::size(kFields)))
        bad(fmt::format("unknown field '{}' (a newer PyTorch?)", name));
      seen[at] = true;
      const Value& v = *value;
      switch (at) {
        case 0:
          state_.round = int_of(v, "round");
          break;
        case 1:
          state_.complete = bool_of(v, "complete");
          break;
        case 2:
          if (v.kind == Kind::kNone)
            state_.deadline.reset();
          else
            state_.deadline = time_of(v, "deadline");
          break;
        case 3:
          state_.closed = bool_of(v, "closed");
          break;
        case 4:
          for_pairs(v, "participants", [&](const Value& k, const Value& r) {
            put(state_.participants, node_of(k), int_of(r, "a rank"));
          });
          break;
        case 5:
          state_.wait_list = nodes_of(v, "wait_list");
          break;
        case 6:
          for_pairs(v, "last_heartbeats", [&](const Value& k, const Value& t) {
            put(state_.last_heartbeats, node_of(k), time_of(t, "a heartbeat"));
          });
          break;
        case 7:
          state_.redundancy_list = nodes_of(v, "redundancy_list");
          break;
        default:
          break;
      }
    }
    for (std::size_t i = 0; i < 7; ++i) {
      if (!seen[i]) bad(fmt::format("no field '{}'", kFields[i]));
    }
    state_.dialect.redundancy_list = seen[7];
    return std::move(state_);
  }

 private:
  template <typename T>
  static void put(std::vector<std::pair<TorchNode, T>>& dict, TorchNode node, T value) {
    for (auto& [k, v] : dict) {
      if (k == node) {  // a dict keeps one entry per key: the last one written
        v = value;
        return;
      }
    }
    dict.emplace_back(std::move(node), value);
  }

  template <typename F>
  static void for_pairs(const Value& dict, const char* what, const F& each) {
    if (dict.kind != Kind::kDict)
      bad(fmt::format("{} is a {}, not a dict", what, pickle::kind_name(dict.kind)));
    for (std::size_t i = 0; i + 1 < dict.items.size(); i += 2)
      each(*dict.items[i], *dict.items[i + 1]);
  }

  std::vector<TorchNode> nodes_of(const Value& set, const char* what) {
    if (set.kind != Kind::kSet)
      bad(fmt::format("{} is a {}, not a set", what, pickle::kind_name(set.kind)));
    std::vector<TorchNode> out;
    for (const auto* item : set.items) {
      auto n = node_of(*item);
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    }
    return out;
  }

  TorchNode node_of(const Value& v) {
    object_of(v, kModule, "_NodeDesc", "a node");
    TorchNode n;
    int found = 0;
    for (const auto& [name, value] : fields_of(v, "a node")) {
      if (name == "fqdn" || name == "addr") {
        if (value->kind != Kind::kStr) bad("a node's " + name + " is not a str");
        n.host = value->text;
        if (node_field_ && *node_field_ != name) bad("nodes with both 'fqdn' and 'addr'");
        node_field_ = name;
        state_.dialect.node_field = name;
      } else if (name == "pid") {
        n.pid = int_of(*value, "a node's pid");
      } else if (name == "local_id") {
        n.local_id = int_of(*value, "a node's local_id");
      } else {
        bad(fmt::format("a node has an unknown field '{}'", name));
      }
      ++found;
    }
    if (found != 3) bad(fmt::format("a node has {} fields, not fqdn/addr, pid, local_id", found));
    return n;
  }

  UtcMicros time_of(const Value& v, const char* what) {
    object_of(v, "datetime", "datetime", what);
    const auto& args = v.args->items;
    if (args.empty() || args.size() > 2 || args[0]->kind != Kind::kBytes ||
        args[0]->text.size() != 10) {
      bad(fmt::format("{} is not datetime's pickled form", what));
    }
    const auto* b = reinterpret_cast<const unsigned char*>(args[0]->text.data());
    const std::int64_t year = b[0] * 256 + b[1];
    const unsigned month = b[2] & 0x7F, day = b[3];
    static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (year < 1 || year > 9999 || month < 1 || month > 12 || day < 1 ||
        day > kDays[month - 1] + (month == 2 && is_leap(year)) || b[4] > 23 || b[5] > 59 ||
        b[6] > 59) {
      bad(fmt::format("{} is not a valid date and time", what));
    }
    const std::int64_t micros = (b[7] << 16) | (b[8] << 8) | b[9];
    if (micros > 999'999) bad(fmt::format("{} has {} microseconds", what, micros));
    UtcMicros t = days_from_civil(year, month, day) * kMicrosPerDay +
                  ((b[4] * 60 + b[5]) * 60 + b[6]) * std::int64_t{1'000'000} + micros;
    const bool aware = args.size() == 2 && args[1]->kind != Kind::kNone;
    if (aware) t -= utc_offset(*args[1], what);
    if (times_aware_ && *times_aware_ != aware) bad("both naive and aware datetimes");
    times_aware_ = aware;
    state_.dialect.aware_times = aware;
    return t;
  }

  static std::int64_t utc_offset(const Value& tz, const char* what) {
    object_of(tz, "datetime", "timezone", std::string(what) + "'s timezone");
    const auto& a = tz.args->items;
    if (a.empty() || a.size() > 2) bad(fmt::format("{}'s timezone is not timezone(offset)", what));
    const Value& delta = object_of(*a[0], "datetime", "timedelta", std::string(what) + "'s offset");
    const auto& d = delta.args->items;
    if (d.size() != 3)
      bad(fmt::format("{}'s offset is not timedelta(days, seconds, micros)", what));
    const auto days = int_of(*d[0], "days"), secs = int_of(*d[1], "seconds"),
               us = int_of(*d[2], "micros");
    if (days < -1 || days > 0 || secs < 0 || secs >= 86400 || us < 0 || us > 999'999) {
      bad(fmt::format("{}'s offset is not within a day", what));
    }
    return days * kMicrosPerDay + secs * 1'000'000 + us;
  }

  TorchRdzvState state_;
  std::optional<std::string> node_field_;
  std::optional<bool> times_aware_;
};

class Encoder {
 public:
  explicit Encoder(const TorchStateDialect& d) : d_(d) {}

  std::string run(const TorchRdzvState& s) {
    p_.global(kModule, "_RendezvousState");
    p_.empty_tuple();
    p_.new_object();
    p_.empty_dict();
    p_.mark();
    p_.str("round");
    p_.integer(s.round);
    p_.str("complete");
    p_.boolean(s.complete);
    p_.str("deadline");
    if (s.deadline)
      time(*s.deadline);
    else
      p_.none();
    p_.str("closed");
    p_.boolean(s.closed);
    p_.str("participants");
    p_.empty_dict();
    p_.mark();
    for (const auto& [n, rank] : s.participants) {
      node(n);
      p_.integer(rank);
    }
    p_.set_items_from_mark();
    p_.str("wait_list");
    nodes(s.wait_list);
    if (d_.redundancy_list) {
      p_.str("redundancy_list");
      nodes(s.redundancy_list);
    }
    p_.str("last_heartbeats");
    p_.empty_dict();
    p_.mark();
    for (const auto& [n, t] : s.last_heartbeats) {
      node(n);
      time(t);
    }
    p_.set_items_from_mark();
    p_.set_items_from_mark();
    p_.build();
    return p_.finish();
  }

 private:
  void nodes(const std::vector<TorchNode>& list) {
    p_.empty_set();
    p_.mark();
    for (const auto& n : list) node(n);
    p_.add_items_from_mark();
  }

  void node(const TorchNode& n) {
    p_.global(kModule, "_NodeDesc");
    p_.empty_tuple();
    p_.new_object();
    p_.empty_dict();
    p_.mark();
    p_.str(d_.node_field);
    p_.str(n.host);
    p_.str("pid");
    p_.integer(n.pid);
    p_.str("local_id");
    p_.integer(n.local_id);
    p_.set_items_from_mark();
    p_.build();
  }

  void time(UtcMicros t) {
    const std::int64_t days = t >= 0 ? t / kMicrosPerDay : (t - kMicrosPerDay + 1) / kMicrosPerDay;
    std::int64_t rest = t - days * kMicrosPerDay;
    const auto c = civil_from_days(days);
    const auto secs = rest / 1'000'000;
    const auto us = rest % 1'000'000;
    const unsigned char b[10] = {static_cast<unsigned char>(c.y >> 8),
                                 static_cast<unsigned char>(c.y & 0xff),
                                 static_cast<unsigned char>(c.m),
                                 static_cast<unsigned char>(c.d),
                                 static_cast<unsigned char>(secs / 3600),
                                 static_cast<unsigned char>(secs / 60 % 60),
                                 static_cast<unsigned char>(secs % 60),
                                 static_cast<unsigned char>(us >> 16),
                                 static_cast<unsigned char>((us >> 8) & 0xff),
                                 static_cast<unsigned char>(us & 0xff)};
    p_.global("datetime", "datetime");
    p_.mark();
    p_.bytes(std::string_view(reinterpret_cast<const char*>(b), sizeof b));
    if (d_.aware_times) {  // timezone(timedelta(0, 0, 0)), which Python reads as timezone.utc
      p_.global("datetime", "timezone");
      p_.mark();
      p_.global("datetime", "timedelta");
      p_.mark();
      p_.integer(0);
      p_.integer(0);
      p_.integer(0);
      p_.tuple_from_mark();
      p_.reduce();
      p_.tuple_from_mark();
      p_.reduce();
    }
    p_.tuple_from_mark();
    p_.reduce();
  }

  const TorchStateDialect& d_;
  pickle::Pickler p_;
};

}  // namespace

std::string TorchNode::text() const { return fmt::format("{}_{}_{}", host, pid, local_id); }

const std::int64_t* TorchRdzvState::rank_of(const TorchNode& n) const {
  for (const auto& [k, r] : participants) {
    if (k == n) return &r;
  }
  return nullptr;
}

bool TorchRdzvState::waiting(const TorchNode& n) const {
  return std::find(wait_list.begin(), wait_list.end(), n) != wait_list.end();
}

TorchRdzvState decode_torch_state(std::string_view pickle_bytes,
                                  const TorchStateDialect& fallback) {
  const auto values = pickle::unpickle(pickle_bytes);
  return Decoder(fallback).run(values.root());
}

std::string encode_torch_state(const TorchRdzvState& state) {
  return Encoder(state.dialect).run(state);
}

}  // namespace gpuorch::launch
