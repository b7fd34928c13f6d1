#include "burstpool/spec.hpp"

#include <cerrno>
#include <cstdlib>
#include <queue>

#include "burstpool/error.hpp"

namespace burstpool {

std::string SourceLoc::str() const {
  return line > 0 ? fmt::format("{}:{}", file, line) : file;
}

const SourceLoc& LayerSpec::where(const std::string& key) const {
  auto it = attr_loc.find(key);
  return it == attr_loc.end() ? loc : it->second;
}

const std::string* LayerSpec::find(const std::string& key) const {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

std::string trim(const std::string& text) {
  const char* ws = " \t\r\n";
  size_t b = text.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  size_t e = text.find_last_not_of(ws);
  return text.substr(b, e - b + 1);
}

std::vector<std::string> split_list(const std::string& text, char sep) {
  std::vector<std::string> out;
  if (trim(text).empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string::npos) end = text.size();
    out.push_back(trim(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

bool parse_int(const std::string& text, int& out) {
  std::string t = trim(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(t.c_str(), &end, 10);
  if (errno || *end != '\0' || v < -2147483647L || v > 2147483647L) return false;
  out = static_cast<int>(v);
  return true;
}

bool parse_float(const std::string& text, float& out) {
  std::string t = trim(text);
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  float v = std::strtof(t.c_str(), &end);
  if (errno || *end != '\0') return false;
  out = v;
  return true;
}

void SpecReader::fail(const std::string& key, const std::string& message) const {
  throw Error(fmt::format("{}: layer '{}' ({}), key '{}': {}", spec_.where(key).str(), spec_.name,
                          spec_.type, key, message));
}

const std::string* SpecReader::take(const std::string& key) {
  used_.insert(key);
  return spec_.find(key);
}

int SpecReader::get_int(const std::string& key, int fallback) {
  const std::string* v = take(key);
  if (!v) return fallback;
  int out;
  if (!parse_int(*v, out)) fail(key, fmt::format("'{}' is not an integer", *v));
  return out;
}

int SpecReader::require_int(const std::string& key) {
  if (!spec_.find(key)) fail(key, "missing (required)");
  return get_int(key, 0);
}

std::pair<int, int> SpecReader::get_pair(const std::string& key, std::pair<int, int> fallback) {
  const std::string* v = take(key);
  if (!v) return fallback;
  auto parts = split_list(*v);
  int a, b;
  if (parts.size() == 1 && parse_int(parts[0], a)) return {a, a};
  if (parts.size() == 2 && parse_int(parts[0], a) && parse_int(parts[1], b)) return {a, b};
  fail(key, fmt::format("'{}' is not an integer or a pair 'h,w'", *v));
}

std::pair<int, int> SpecReader::require_pair(const std::string& key) {
  if (!spec_.find(key)) fail(key, "missing (required)");
  return get_pair(key, {0, 0});
}

float SpecReader::get_float(const std::string& key, float fallback) {
  const std::string* v = take(key);
  if (!v) return fallback;
  float out;
  if (!parse_float(*v, out)) fail(key, fmt::format("'{}' is not a number", *v));
  return out;
}

std::string SpecReader::get_string(const std::string& key, const std::string& fallback) {
  const std::string* v = take(key);
  return v ? *v : fallback;
}

bool SpecReader::get_bool(const std::string& key, bool fallback) {
  const std::string* v = take(key);
  if (!v) return fallback;
  if (*v == "true" || *v == "1" || *v == "yes") return true;
  if (*v == "false" || *v == "0" || *v == "no") return false;
  fail(key, fmt::format("'{}' is not a boolean (true/false)", *v));
}

void SpecReader::finish() const {
  for (const auto& [k, v] : spec_.attrs)
    if (!used_.count(k)) fail(k, fmt::format("unknown key for a {} layer", spec_.type));
}

int ModelSpec::find(const std::string& layer) const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].name == layer) return static_cast<int>(i);
  return -1;
}

std::vector<int> ModelSpec::topological_order() const {
  const int n = static_cast<int>(layers.size());
  if (n == 0) throw Error(fmt::format("{}: the model has no layers", source));
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    const LayerSpec& l = layers[i];
    int first = find(l.name);
    if (first != i)
      throw Error(fmt::format("{}: layer name '{}' is used twice (first at {})", l.loc.str(), l.name,
                              layers[first].loc.str()));
    for (const std::string& in : l.inputs) {
      if (in.empty())
        throw Error(fmt::format("{}: layer '{}' has an empty name in 'inputs' (a comma too many?)",
                                l.where("inputs").str(), l.name));
      int p = find(in);
      if (p < 0)
        throw Error(fmt::format("{}: layer '{}' has unknown input '{}'", l.where("inputs").str(),
                                l.name, in));
      if (p == i)
        throw Error(fmt::format("{}: layer '{}' lists itself as input", l.where("inputs").str(), l.name));
      consumers[p].push_back(i);
      ++pending[i];
    }
  }
  // Kahn's algorithm; a min-heap keeps file order among ready layers, so a chain
  // written top to bottom runs top to bottom.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[i])
      if (--pending[c] == 0) ready.push(c);
  }
  if (static_cast<int>(order.size()) != n) {
    for (int i = 0; i < n; ++i)
      if (pending[i] > 0)
        throw Error(fmt::format("{}: layer '{}' is part of a cycle", layers[i].loc.str(),
                                layers[i].name));
  }
  return order;
}

}  // namespace burstpool
