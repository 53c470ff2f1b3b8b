// The informer against a scripted local server (fake_api_server.hpp): paginated lists, what the
// handlers hear on each list and watch event, bookmarks, 410 Gone as an ERROR event and as an
// HTTP status, 5xx and empty watches with backoff. The real kube-apiserver (restarts, real
// events) is in api_client_test.cpp.
#include "gpuorch/k8s/api/informer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "k8s/fake_api_server.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using test::eventually;
using test::FakeApiServer;

json configmap(const std::string& name, const std::string& version) {
  return {{"metadata", {{"name", name}, {"namespace", "default"}, {"resourceVersion", version}}}};
}

std::string event(const std::string& type, const json& obj) {
  return json{{"type", type}, {"object", obj}}.dump() + "\n";
}

std::string list_page(const std::vector<json>& items, const std::string& version,
                      const std::string& next = "") {
  json meta{{"resourceVersion", version}};
  if (!next.empty()) meta["continue"] = next;
  return json{{"kind", "ConfigMapList"}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", items}}
      .dump();
}

// What the handlers were told, in order: "add default/a 5", "synced", ...
struct Heard {
  std::mutex m;
  std::vector<std::string> lines;
  std::vector<std::string> errors;

  void add(const std::string& what, const json& obj) {
    const std::lock_guard lock(m);
    lines.push_back(what + " " + object_key(obj) + " " +
                    obj["metadata"]["resourceVersion"].get<std::string>());
  }
  InformerHandlers handlers() {
    InformerHandlers h;
    h.on_add = [this](const json& o) { add("add", o); };
    h.on_update = [this](const json& o) { add("update", o); };
    h.on_delete = [this](const json& o) { add("delete", o); };
    h.on_synced = [this] {
      const std::lock_guard lock(m);
      lines.push_back("synced");
    };
    h.on_error = [this](const std::string& e) {
      const std::lock_guard lock(m);
      errors.push_back(e);
    };
    return h;
  }
  std::vector<std::string> snapshot() {
    const std::lock_guard lock(m);
    return lines;
  }
  std::vector<std::string> error_snapshot() {
    const std::lock_guard lock(m);
    return errors;
  }
};

// Runs an informer on its own thread for the test's scope.
struct Running {
  std::atomic<bool> stop{false};
  std::thread thread;
  explicit Running(Informer& informer) : thread([this, &informer] { informer.run(stop); }) {}
  ~Running() {
    stop = true;
    thread.join();
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;
};

TEST(Informer, PagesBookmarksAndRelistAfterGone) {
  FakeApiServer fake;
  std::mutex m;
  std::vector<httplib::Request> lists, watches;
  fake.http().Get("/api/v1/configmaps", [&](const httplib::Request& req, httplib::Response& res) {
    std::unique_lock lock(m);
    if (req.get_param_value("watch") != "1") {
      lists.push_back(req);
      const auto token = req.get_param_value("continue");
      if (watches.empty() && token.empty()) {
        res.set_content(list_page({configmap("a", "5")}, "10", "page-2"), "application/json");
      } else if (watches.empty()) {
        res.set_content(list_page({configmap("b", "7")}, "10"), "application/json");
      } else {
        // After the 410: b is gone, c changed, a is as before.
        res.set_content(list_page({configmap("a", "4"), configmap("c", "17")}, "20"),
                        "application/json");
      }
      return;
    }
    watches.push_back(req);
    switch (watches.size()) {
      case 1:  // an older resourceVersion is still an update; a bookmark; then the end
        res.set_content(event("MODIFIED", configmap("a", "4")) +
                            event("BOOKMARK", {{"metadata", {{"resourceVersion", "15"}}}}),
                        "application/json");
        break;
      case 2:
        res.set_content(event("ADDED", configmap("c", "16")) +
                            event("ERROR", {{"kind", "Status"},
                                            {"code", 410},
                                            {"reason", "Expired"},
                                            {"message", "too old resource version: 15 (18)"}}),
                        "application/json");
        break;
      default:
        lock.unlock();
        fake.stream_then_idle(res, "");
    }
  });
  fake.start();
  ApiClient api(fake.config());
  Heard heard;
  Informer informer(api, "/api/v1/configmaps", heard.handlers(), "metadata.name!=zzz",
                    "app in (x,y)");
  EXPECT_FALSE(informer.synced());
  {
    const Running running(informer);
    ASSERT_TRUE(eventually([&] { return heard.snapshot().size() >= 8; }))
        << heard.snapshot().size();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing more comes
    EXPECT_EQ(heard.snapshot(),
              (std::vector<std::string>{"add default/a 5", "add default/b 7", "synced",
                                        "update default/a 4", "add default/c 16",
                                        "delete default/b 7", "update default/c 17", "synced"}));
    EXPECT_TRUE(informer.synced());
    EXPECT_EQ(informer.relists(), 1u);
    EXPECT_EQ(informer.list().size(), 2u);
    EXPECT_FALSE(informer.get("default/b"));
    const auto c = informer.get("default/c");
    ASSERT_TRUE(c);
    EXPECT_EQ((*c)["metadata"]["resourceVersion"], "17");
    // List items get the kind and apiVersion that watch events carry.
    EXPECT_EQ((*c)["kind"], "ConfigMap");
    EXPECT_EQ((*c)["apiVersion"], "v1");
    EXPECT_TRUE(heard.error_snapshot().empty());
    EXPECT_TRUE(eventually([&] {
      const std::lock_guard lock(m);
      return watches.size() == 3;
    }));
  }
  const std::lock_guard lock(m);
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[0].get_param_value("limit"), "500");
  EXPECT_EQ(lists[1].get_param_value("continue"), "page-2");
  EXPECT_EQ(lists[0].get_param_value("fieldSelector"), "metadata.name!=zzz");
  EXPECT_EQ(lists[0].get_param_value("labelSelector"), "app in (x,y)");
  ASSERT_EQ(watches.size(), 3u);
  // From the list, from the bookmark, from the relist.
  EXPECT_EQ(watches[0].get_param_value("resourceVersion"), "10");
  EXPECT_EQ(watches[1].get_param_value("resourceVersion"), "15");
  EXPECT_EQ(watches[2].get_param_value("resourceVersion"), "20");
  EXPECT_EQ(watches[0].get_param_value("allowWatchBookmarks"), "true");
  EXPECT_EQ(watches[0].get_param_value("timeoutSeconds"), "300");
  EXPECT_EQ(watches[0].get_param_value("fieldSelector"), "metadata.name!=zzz");
}

TEST(Informer, ServerErrorsBackOffAndHttpGoneRelists) {
  FakeApiServer fake;
  std::mutex m;
  int list_count = 0;
  std::vector<std::string> watch_versions;
  std::vector<std::chrono::steady_clock::time_point> watch_times;
  fake.http().Get("/api/v1/configmaps", [&](const httplib::Request& req, httplib::Response& res) {
    std::unique_lock lock(m);
    if (req.get_param_value("watch") != "1") {
      ++list_count;
      res.set_content(list_count == 1 ? list_page({configmap("a", "1")}, "1")
                                      : list_page({configmap("a", "1"), configmap("b", "2")}, "2"),
                      "application/json");
      return;
    }
    watch_versions.push_back(req.get_param_value("resourceVersion"));
    watch_times.push_back(std::chrono::steady_clock::now());
    switch (watch_versions.size()) {
      case 1:
        res.status = 500;
        res.set_content(R"({"kind":"Status","code":500,"reason":"InternalError","message":"etcd"})",
                        "application/json");
        break;
      case 2:  // 200 and nothing: not a normal end
        res.set_content("", "application/json");
        break;
      case 3:
        res.status = 410;
        res.set_content(R"({"kind":"Status","code":410,"reason":"Gone","message":"too old"})",
                        "application/json");
        break;
      default:
        lock.unlock();
        fake.stream_then_idle(res, "");
    }
  });
  fake.start();
  ApiClient api(fake.config());
  Heard heard;
  Informer informer(api, "/api/v1/configmaps", heard.handlers());
  {
    const Running running(informer);
    ASSERT_TRUE(eventually([&] { return heard.snapshot().size() >= 4; }));
    EXPECT_EQ(heard.snapshot(),
              (std::vector<std::string>{"add default/a 1", "synced", "add default/b 2", "synced"}));
    EXPECT_EQ(informer.relists(), 1u);
    EXPECT_TRUE(eventually([&] {
      const std::lock_guard lock(m);
      return watch_versions.size() == 4;
    }));
  }
  const auto errors = heard.error_snapshot();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("500 InternalError: etcd"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("closed the stream at once"), std::string::npos) << errors[1];
  const std::lock_guard lock(m);
  EXPECT_EQ(watch_versions, (std::vector<std::string>{"1", "1", "1", "2"}));
  // Backoff: 0.2 s (give or take the jitter), then twice that.
  EXPECT_GE(watch_times[1] - watch_times[0], std::chrono::milliseconds(140));
  EXPECT_GE(watch_times[2] - watch_times[1], std::chrono::milliseconds(290));
  EXPECT_EQ(list_count, 2);
}

TEST(Informer, ObjectKeys) {
  EXPECT_EQ(object_key(configmap("a", "1")), "default/a");
  EXPECT_EQ(object_key(json{{"metadata", {{"name", "node-1"}}}}), "node-1");
  EXPECT_THROW(object_key(json{{"metadata", json::object()}}), std::runtime_error);
}

}  // namespace
}  // namespace gpuorch::k8s
