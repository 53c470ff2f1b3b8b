// The extender's fast paths around the JSON library (k8s/extender/extender_request.hpp,
// k8s/extender/extender_answer.hpp): the node names read apart from the parse, only when that is
// exactly what the parse would read, and answers written as text that parse back to the protocol's
// shape.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/k8s/extender/extender_answer.hpp"
#include "gpuorch/k8s/extender/extender_request.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

TEST(ExtenderRequest, NodeNamesReadApartFromTheParse) {
  const std::string body =
      R"({"Pod": {"metadata": {"uid": "u", "annotations": {"NodeNames": "[\"x\"]"}},
                  "spec": {"NodeNames": ["inner"]}},
          "Nodes" : null, "NodeNames" : [ "node-a", "node-b.example.com" ,"n3"] })";
  const auto split = split_node_names(body);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->names, (std::vector<std::string_view>{"node-a", "node-b.example.com", "n3"}));
  // The rest parses as the body did, with the names emptied.
  json expected = json::parse(body);
  expected["NodeNames"] = json::array();
  EXPECT_EQ(json::parse(split->rest), expected);
  // Any case, as Go's decoder matches the field.
  const auto lower = split_node_names(R"({"nodenames": ["a"], "pod": {}})");
  ASSERT_TRUE(lower.has_value());
  EXPECT_EQ(lower->names, (std::vector<std::string_view>{"a"}));
  const auto empty = split_node_names(R"({"NodeNames": [ ], "Pod": {}})");
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->names.empty());
}

TEST(ExtenderRequest, AnythingElseGoesToTheFullParse) {
  for (const char* body : {
           R"({"NodeNames": ["a\"b"]})",          // an escape
           R"({"NodeNames": ["caf\u00e9"]})",     // an escape
           "{\"NodeNames\": [\"caf\xc3\xa9\"]}",  // not ASCII
           "{\"NodeNames\": [\"a\tb\"]}",         // a control character
           R"({"NodeNames": null, "Nodes": {"items": []}})",
           R"({"NodeNames": ["a"], "nodeNames": ["b"]})",  // twice
           R"({"NodeNames": ["a", 3]})",
           R"({"NodeNames": ["a",]})",
           R"({"NodeNames": ["a"})",
           R"({"NodeNames": ["a")",
           R"(["a"])",
           R"({"Pod": {"NodeNames": ["a"]}})",  // not at the top
           R"({"Pod" {}})",
           "",
       }) {
    EXPECT_FALSE(split_node_names(body).has_value()) << body;
  }
}

TEST(ExtenderAnswer, FilterAnswersParseBackToTheProtocol) {
  FilterAnswer a;
  a.offered = {"n1", "n2", "n3"};
  a.keep = "n2";
  json j = json::parse(filter_answer_text(a));
  EXPECT_EQ(j, json::parse(R"({"NodeNames": ["n2"], "Nodes": null, "FailedNodes": {},
                               "FailedAndUnresolvableNodes": {}, "Error": ""})"));

  a.keep.clear();
  a.why = "0/3 nodes are available: 3 lack a \"GPU\".\tWaiting";
  j = json::parse(filter_answer_text(a));
  EXPECT_EQ(j["NodeNames"], json::array());
  EXPECT_EQ(j["FailedNodes"].size(), 3u);
  EXPECT_EQ(j["FailedNodes"]["n3"], a.why);
  EXPECT_TRUE(j["FailedAndUnresolvableNodes"].empty());

  a.unresolvable = true;
  a.offered = {"odd\"name", "n2"};
  j = json::parse(filter_answer_text(a));
  EXPECT_TRUE(j["FailedNodes"].empty());
  EXPECT_EQ(j["FailedAndUnresolvableNodes"]["odd\"name"], a.why);

  FilterAnswer e;
  e.offered = {"n1"};
  e.error = "the extender's node and pod cache has not synced yet";
  j = json::parse(filter_answer_text(e));
  EXPECT_EQ(j["Error"], e.error);
  EXPECT_TRUE(j["FailedNodes"].empty());
  EXPECT_EQ(j["NodeNames"], json::array());

  // The Nodes form is answered in the Nodes form, with the kept object itself.
  const json items = json::parse(R"([{"metadata": {"name": "n1"}}, {"metadata": {"name": "n2"},
                                      "status": {"allocatable": {"cpu": "4"}}}])");
  FilterAnswer n;
  n.offered = {"n1", "n2"};
  n.items = &items;
  n.keep = "n2";
  j = json::parse(filter_answer_text(n));
  EXPECT_TRUE(j["NodeNames"].is_null());
  EXPECT_EQ(j["Nodes"]["items"], json::array({items[1]}));
}

TEST(ExtenderAnswer, PriorityList) {
  EXPECT_EQ(json::parse(priority_list_text({"a", "b"}, "b", 10)),
            json::parse(R"([{"Host": "a", "Score": 0}, {"Host": "b", "Score": 10}])"));
  EXPECT_EQ(json::parse(priority_list_text({}, "b", 10)), json::array());
}

}  // namespace
}  // namespace gpuorch::k8s
