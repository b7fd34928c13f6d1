#include "burstpool/json_io.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "burstpool/error.hpp"
#include "burstpool/files.hpp"

namespace burstpool {

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp);
    if (!out) throw Error(fmt::format("{}: cannot write file", tmp));
    // Names come from user files and may hold bytes that are not UTF-8: written as U+FFFD.
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out.flush()) throw Error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot move the file into place", path));
  }
}

nlohmann::json read_json(const std::string& path, const char* what) {
  require_regular_file(path, what, 64ll << 20);
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open {} file", path, what));
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  const nlohmann::json::parser_callback_t seen = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end && !keys.empty()) keys.pop_back();
    if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str(), seen);  // strict: text after the value is an error
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("{}: not valid JSON for a {} file (byte {})", path, what, e.byte));
  }
  if (!duplicate.empty()) throw Error(fmt::format("{}: key \"{}\" appears twice in one object", path, duplicate));
  return j;
}

int checked_int(const nlohmann::json& v, long long lo, long long hi, const std::string& where) {
  if (!v.is_number_integer()) throw Error(fmt::format("{} must be an integer", where));
  const bool above = v.is_number_unsigned() && v.get<unsigned long long>() > static_cast<unsigned long long>(hi);
  const long long x = above ? hi : v.get<long long>();
  if (above || x < lo || x > hi) throw Error(fmt::format("{} {} is outside [{}, {}]", where, v.dump(), lo, hi));
  return static_cast<int>(x);
}

}  // namespace burstpool
