#pragma once
// INI files (parsed with inih) with the line of every key and section, so
// model and job errors can say "file:line".
#include <string>
#include <vector>

#include "burstpool/spec.hpp"

namespace burstpool {

struct IniEntry {
  std::string key, value;
  int line = 0;
};

struct IniSection {
  std::string name;
  int line = 0;
  std::vector<IniEntry> entries;
};

struct IniDocument {
  std::string file;
  std::vector<IniSection> sections;  // file order; keys before any [section] are an error

  // Throws Error("file:line: ...") on syntax errors, empty values and repeated keys or sections.
  static IniDocument parse_file(const std::string& path);
  static IniDocument parse_text(const std::string& text, const std::string& name);
  SourceLoc at(int line) const { return {file, line}; }
};

}  // namespace burstpool
