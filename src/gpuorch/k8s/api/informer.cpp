#include "gpuorch/k8s/api/informer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>

namespace gpuorch::k8s {
namespace {

using Json = nlohmann::json;

std::string string_field(const Json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const Json& metadata(const Json& obj) {
  static const Json kEmpty = Json::object();
  const auto it = obj.find("metadata");
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}

std::string resource_version(const Json& obj) {
  return string_field(metadata(obj), "resourceVersion");
}

// Percent-encoding for query values: selectors carry '=', '!' and ',', continue tokens '='.
std::string encode(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

// A watch that ends this quickly with nothing in it is a server refusing to watch, not the
// normal timeoutSeconds end; re-watching at once would hammer it.
constexpr auto kShortWatch = std::chrono::seconds(1);

}  // namespace

std::string object_key(const Json& obj) {
  const auto& meta = metadata(obj);
  const auto name = string_field(meta, "name");
  if (name.empty())
    throw std::runtime_error(
        "an object without metadata.name: " +
        obj.dump(-1, ' ', false, Json::error_handler_t::replace).substr(0, 200));
  const auto ns = string_field(meta, "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

Informer::Informer(ApiClient& api, std::string list_path, InformerHandlers handlers,
                   std::string field_selector, std::string label_selector, InformerOptions options)
    : api_(api),
      list_path_(std::move(list_path)),
      handlers_(std::move(handlers)),
      field_selector_(std::move(field_selector)),
      label_selector_(std::move(label_selector)),
      options_(options),
      jitter_(std::random_device{}()) {}

std::optional<Json> Informer::get(const std::string& key) const {
  const std::lock_guard lock(mutex_);
  const auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

std::vector<Json> Informer::list() const {
  const std::lock_guard lock(mutex_);
  std::vector<Json> out;
  out.reserve(cache_.size());
  for (const auto& [key, obj] : cache_) out.push_back(obj);
  return out;
}

std::string Informer::query(const std::string& extra) const {
  std::string q = list_path_ + (list_path_.find('?') == std::string::npos ? "?" : "&") + extra;
  if (!field_selector_.empty()) q += "&fieldSelector=" + encode(field_selector_);
  if (!label_selector_.empty()) q += "&labelSelector=" + encode(label_selector_);
  return q;
}

void Informer::report(const std::string& what) const {
  if (handlers_.on_error) handlers_.on_error(what);
}

std::string Informer::relist(const std::atomic<bool>& stop) {
  std::map<std::string, Json> fresh;
  std::string version;
  std::string token;  // continue
  int restarts = 0;
  while (!stop.load()) {
    auto extra = fmt::format("limit={}", options_.page_size);
    if (!token.empty()) extra += "&continue=" + encode(token);
    Json page;
    try {
      page = api_.get(query(extra));
    } catch (const ApiError& e) {
      // The continue token outlived the snapshot it points into: start the list again.
      if (e.status() != 410 || token.empty() || ++restarts > 3) throw;
      fresh.clear();
      token.clear();
      continue;
    }
    if (!page.is_object()) throw std::runtime_error("GET " + list_path_ + ": not a list object");
    // List items carry no kind or apiVersion; watch events do. Filling them in keeps what the
    // handlers see the same whichever way an object arrived.
    auto kind = string_field(page, "kind");
    if (kind.ends_with("List")) kind.resize(kind.size() - 4);
    const auto api_version = string_field(page, "apiVersion");
    if (auto items = page.find("items"); items != page.end() && !items->is_null()) {
      if (!items->is_array())
        throw std::runtime_error("GET " + list_path_ + ": items is not a list");
      for (auto& item : *items) {
        if (!item.is_object())
          throw std::runtime_error("GET " + list_path_ + ": an item is not an object");
        if (!kind.empty() && !item.contains("kind")) item["kind"] = kind;
        if (!api_version.empty() && !item.contains("apiVersion")) item["apiVersion"] = api_version;
        auto key = object_key(item);
        fresh[std::move(key)] = std::move(item);
      }
    }
    version = string_field(metadata(page), "resourceVersion");
    token = string_field(metadata(page), "continue");
    if (token.empty()) break;
  }
  if (stop.load()) return version;

  // The difference to what the handlers were told before: resourceVersions are compared for
  // equality only (they are opaque), the content where there is none.
  std::vector<Json> added, updated, deleted;
  {
    const std::lock_guard lock(mutex_);
    for (const auto& [key, obj] : fresh) {
      const auto it = cache_.find(key);
      if (it == cache_.end()) {
        added.push_back(obj);
      } else {
        const auto before = resource_version(it->second);
        if (before != resource_version(obj) || (before.empty() && it->second != obj)) {
          updated.push_back(obj);
        }
      }
    }
    for (auto& [key, obj] : cache_) {
      if (!fresh.contains(key)) deleted.push_back(std::move(obj));
    }
    cache_ = std::move(fresh);
  }
  for (const auto& obj : deleted) {
    if (handlers_.on_delete) handlers_.on_delete(obj);
  }
  for (const auto& obj : added) {
    if (handlers_.on_add) handlers_.on_add(obj);
  }
  for (const auto& obj : updated) {
    if (handlers_.on_update) handlers_.on_update(obj);
  }
  synced_.store(true);
  if (handlers_.on_synced) handlers_.on_synced();
  return version;
}

void Informer::upsert(const Json& obj) {
  bool existed = false;
  {
    auto key = object_key(obj);
    const std::lock_guard lock(mutex_);
    auto [it, inserted] = cache_.try_emplace(std::move(key), obj);
    if (!inserted) it->second = obj;
    existed = !inserted;
  }
  // An ADDED for an object already known (a re-watch replaying it) is an update, never a
  // second add; an older resourceVersion is delivered too, the server's order is the truth.
  const auto& handler = existed ? handlers_.on_update : handlers_.on_add;
  if (handler) handler(obj);
}

void Informer::erase(const Json& obj) {
  bool known = false;
  {
    const auto key = object_key(obj);
    const std::lock_guard lock(mutex_);
    known = cache_.erase(key) > 0;
  }
  // The event's object is the last state the server had; a delete of something never seen
  // (it left a selector before we listed) tells the handlers nothing.
  if (known && handlers_.on_delete) handlers_.on_delete(obj);
}

Informer::WatchEnd Informer::watch_from(std::string& version, const std::atomic<bool>& stop) {
  auto extra = fmt::format("watch=1&allowWatchBookmarks=true&timeoutSeconds={}",
                           options_.watch_timeout_seconds);
  if (!version.empty()) extra += "&resourceVersion=" + encode(version);
  auto end = WatchEnd::kEnded;
  progressed_ = false;
  std::string failure;
  std::size_t events = 0;
  const auto started = std::chrono::steady_clock::now();
  api_.watch(
      query(extra),
      [&](const Json& event) {
        ++events;
        if (!event.is_object() || !event.contains("object") || !event["object"].is_object()) {
          throw std::runtime_error("watch " + list_path_ + ": an event without an object");
        }
        const auto type = string_field(event, "type");
        const Json& obj = event["object"];
        if (type == "ERROR") {
          const auto code = obj.find("code");
          if (code != obj.end() && code->is_number_integer() && code->get<long>() == 410) {
            end = WatchEnd::kExpired;
          } else {
            failure = fmt::format("watch {}: the server sent an error: {}", list_path_,
                                  string_field(obj, "message"));
          }
          return false;
        }
        const auto event_version = resource_version(obj);
        if (type == "ADDED" || type == "MODIFIED") {
          upsert(obj);
        } else if (type == "DELETED") {
          erase(obj);
        } else if (type != "BOOKMARK") {
          throw std::runtime_error(
              fmt::format("watch {}: an event of unknown type '{}'", list_path_, type));
        }
        if (!event_version.empty()) version = event_version;
        progressed_ = true;
        backoff_seconds_ = 0;  // the stream is healthy again
        return true;
      },
      stop);
  if (stop.load()) return WatchEnd::kStopped;
  if (!failure.empty()) throw std::runtime_error(failure);
  if (end == WatchEnd::kEnded && events == 0 &&
      std::chrono::steady_clock::now() - started < kShortWatch) {
    throw std::runtime_error(
        fmt::format("watch {}: the server closed the stream at once, with no events", list_path_));
  }
  if (end == WatchEnd::kEnded) backoff_seconds_ = 0;
  return end;
}

void Informer::sleep_backoff(const std::atomic<bool>& stop) {
  backoff_seconds_ = backoff_seconds_ == 0
                         ? options_.backoff_initial_seconds
                         : std::min(options_.backoff_max_seconds, backoff_seconds_ * 2);
  // Jitter keeps many informers that lost the same server from coming back in step.
  std::uniform_real_distribution<double> spread(0.75, 1.25);
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(backoff_seconds_ * spread(jitter_));
  while (!stop.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Informer::run(const std::atomic<bool>& stop) {
  std::string version;
  bool need_list = true;
  // Gone straight after a fresh list means the server is in no state to be watched; relisting
  // at once would list it in a tight loop.
  bool just_listed = false;
  const auto expired = [&] {
    if (just_listed && !progressed_) sleep_backoff(stop);
    need_list = true;
  };
  while (!stop.load()) {
    try {
      if (need_list) {
        const bool first = !synced_.load();
        version = relist(stop);
        if (stop.load()) return;
        if (!first) relists_.fetch_add(1);
        need_list = false;
        just_listed = true;
      }
      const auto end = watch_from(version, stop);
      if (end == WatchEnd::kStopped) return;
      if (end == WatchEnd::kExpired) expired();
      // kEnded: timeoutSeconds passed; watch again from where it stopped.
      just_listed = false;
    } catch (const ApiError& e) {
      if (e.status() == 410 && !need_list) {
        expired();  // the resourceVersion is too old to watch from
      } else {
        report(e.what());
        sleep_backoff(stop);
      }
      just_listed = false;
    } catch (const std::exception& e) {
      report(e.what());
      sleep_backoff(stop);
      just_listed = false;
    }
  }
}

}  // namespace gpuorch::k8s
