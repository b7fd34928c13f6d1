#include "burstpool/json_io.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "burstpool/error.hpp"

namespace burstpool {

void write_json(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp);
    if (!out) throw Error(fmt::format("{}: cannot write file", tmp));
    out << j.dump(2) << "\n";
    if (!out.flush()) throw Error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot move the file into place", path));
  }
}

}  // namespace burstpool
