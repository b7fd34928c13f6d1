#include "burstpool/ini.hpp"

#include <ini.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "burstpool/error.hpp"
#include "burstpool/files.hpp"

namespace burstpool {
namespace {

// Feeds inih line by line and counts lines, so the handler knows where it is.
struct Reader {
  std::istream* in;
  int line = 0;
  std::map<std::string, int> section_lines;
  IniDocument* doc;
  std::string error;  // first semantic error, reported after parsing stops
};

char* read_line(char* buffer, int size, void* user) {
  auto* r = static_cast<Reader*>(user);
  std::string text;
  if (!std::getline(*r->in, text)) return nullptr;
  ++r->line;
  std::string t = trim(text);
  if (t.size() > 2 && t.front() == '[' && t.back() == ']') r->section_lines.emplace(t.substr(1, t.size() - 2), r->line);
  // inih reads a line up to its first NUL byte, which would cut a value short
  // without a word; such a line is refused.
  if (text.find('\0') != std::string::npos) {
    if (r->error.empty()) r->error = fmt::format("{}:{}: the line holds a NUL byte", r->doc->file, r->line);
    text.clear();
  }
  // inih splits lines longer than its buffer; reject them instead of misreading.
  if (static_cast<int>(text.size()) + 2 > size) {
    if (r->error.empty()) r->error = fmt::format("{}:{}: line longer than {} characters", r->doc->file, r->line, size - 2);
    text.clear();
  }
  std::memcpy(buffer, text.c_str(), text.size());
  buffer[text.size()] = '\n';
  buffer[text.size() + 1] = '\0';
  return buffer;
}

int on_entry(void* user, const char* section, const char* name, const char* value) {
  auto* r = static_cast<Reader*>(user);
  if (!r->error.empty()) return 0;
  IniDocument& doc = *r->doc;
  const std::string where = fmt::format("{}:{}", doc.file, r->line);
  if (!*section) {
    r->error = fmt::format("{}: key '{}' appears before any [section]", where, name);
    return 0;
  }
  if (doc.sections.empty() || doc.sections.back().name != section) {
    for (const auto& s : doc.sections)
      if (s.name == section) {
        r->error = fmt::format("{}: section [{}] appears twice (first at line {})", where, section, s.line);
        return 0;
      }
    auto it = r->section_lines.find(section);
    doc.sections.push_back({section, it == r->section_lines.end() ? r->line : it->second, {}});
  }
  IniSection& s = doc.sections.back();
  if (!*value) {
    r->error = fmt::format("{}: [{}] key '{}' has no value", where, section, name);
    return 0;
  }
  for (const auto& e : s.entries)
    if (e.key == name) {
      r->error = fmt::format("{}: [{}] key '{}' is given twice (first at line {})", where, section, name, e.line);
      return 0;
    }
  s.entries.push_back({name, value, r->line});
  return 1;
}

IniDocument parse_stream(std::istream& in, const std::string& name) {
  IniDocument doc;
  doc.file = name;
  Reader reader{&in, 0, {}, &doc, {}};
  int rc = ini_parse_stream(read_line, &reader, on_entry, &reader);
  if (!reader.error.empty()) throw Error(reader.error);
  if (rc > 0)
    throw Error(fmt::format("{}:{}: syntax error (expected '[section]', 'key = value' or a '#' comment)", name, rc));
  if (rc < 0) throw Error(fmt::format("{}: could not be read", name));
  // Sections with no keys still count (a layer such as 'relu' may need no keys
  // beyond type, but an empty section is almost certainly a mistake).
  for (const auto& [section, line] : reader.section_lines) {
    bool seen = false;
    for (const auto& s : doc.sections) seen |= s.name == section;
    if (!seen) throw Error(fmt::format("{}:{}: section [{}] is empty", name, line, section));
  }
  return doc;
}

}  // namespace

IniDocument IniDocument::parse_file(const std::string& path) {
  require_regular_file(path, "INI", 16ll << 20);
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open file ({})", path, std::strerror(errno)));
  return parse_stream(in, path);
}

IniDocument IniDocument::parse_text(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  return parse_stream(in, name);
}

}  // namespace burstpool
