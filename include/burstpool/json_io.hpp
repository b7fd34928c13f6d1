#pragma once
// JSON files written by burstpool (metrics, plans, profiles, summaries).
#include <nlohmann/json.hpp>

#include <string>

namespace burstpool {

// Writes JSON atomically (temporary file, then rename); errors name the file.
void write_json(const std::string& path, const nlohmann::json& j);

}  // namespace burstpool
