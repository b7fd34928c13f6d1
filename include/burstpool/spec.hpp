#pragma once
// Architecture descriptions as read from INI or HDF5 model files, before any
// memory is allocated: one LayerSpec per layer, with the place each value came
// from so that every error can name the user's file and line.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace burstpool {

struct SourceLoc {
  std::string file;
  int line = 0;  // 0 when the source has no lines (HDF5)
  std::string str() const;  // "file:line" or "file"
};

struct LayerSpec {
  std::string name;
  std::string type;
  std::vector<std::string> inputs;                         // producer layer names
  std::vector<std::pair<std::string, std::string>> attrs;  // type parameters, file order
  std::map<std::string, SourceLoc> attr_loc;               // where each attr (and "inputs", "type") was
  SourceLoc loc;                                           // the section header

  const SourceLoc& where(const std::string& key) const;
  const std::string* find(const std::string& key) const;
};

// Reads typed attributes of one LayerSpec and remembers which were used, so
// `finish` can reject unknown keys. Every error names file:line and the key.
class SpecReader {
 public:
  explicit SpecReader(const LayerSpec& spec) : spec_(spec) {}

  int get_int(const std::string& key, int fallback);
  int require_int(const std::string& key);
  // "3" -> {3,3}; "1,7" -> {1,7}
  std::pair<int, int> get_pair(const std::string& key, std::pair<int, int> fallback);
  std::pair<int, int> require_pair(const std::string& key);
  float get_float(const std::string& key, float fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  bool get_bool(const std::string& key, bool fallback);
  // Throws naming the first attribute no getter asked for.
  void finish() const;
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  const std::string* take(const std::string& key);
  const LayerSpec& spec_;
  std::set<std::string> used_;
};

// The whole model: layers in file order plus the model-level settings.
struct ModelSpec {
  std::string name;
  std::string source;  // file it came from
  std::vector<LayerSpec> layers;

  int find(const std::string& layer) const;  // -1 if absent
  // Layer indices in a topological order (file order among ready layers).
  // Throws on unknown inputs, duplicate names or cycles, naming file:line.
  std::vector<int> topological_order() const;
};

// Numbers in user files: the whole string must parse.
bool parse_int(const std::string& text, int& out);
bool parse_float(const std::string& text, float& out);
// Items between separators, trimmed; blank text gives none. An empty item (a
// separator at either end, or two in a row: "3,", "1,,2") is kept as "", so
// the caller refuses it as it refuses any malformed item.
std::vector<std::string> split_list(const std::string& text, char sep = ',');
std::string trim(const std::string& text);

}  // namespace burstpool
