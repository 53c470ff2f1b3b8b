#pragma once
// base/text_check.hpp for a parsed JSON document: JSON escapes (\u001b) turn into raw control
// characters only after parsing, so the check runs on the strings, not on the text.
#include <nlohmann/json.hpp>
#include <string>

namespace gpuorch::base {

// Throws InputError "file: /gpus/0/model holds a control character (0x1b) at byte N" for the
// first string (object key or value) that holds one.
void require_no_control_json(const nlohmann::json& doc, const std::string& file);

}  // namespace gpuorch::base
