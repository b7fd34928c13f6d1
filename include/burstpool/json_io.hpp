#pragma once
// JSON files written by burstpool (metrics, plans, profiles, summaries).
#include <nlohmann/json.hpp>

#include <string>

namespace burstpool {

// Writes JSON atomically (temporary file, then rename); errors name the file.
void write_json(const std::string& path, const nlohmann::json& j);

// Reads a JSON file strictly: a regular file of at most 64 MiB, one JSON
// value and nothing after it, no object with a key twice. Errors name the
// file and say which rule failed; `what` names the kind of file ("plan").
nlohmann::json read_json(const std::string& path, const char* what);

// v as an int within [lo, hi], checked before narrowing (a JSON number may be
// any size); errors name `where` ("plan.json: layer 'fc' rank").
int checked_int(const nlohmann::json& v, long long lo, long long hi, const std::string& where);

}  // namespace burstpool
