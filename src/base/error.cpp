#include "burstpool/error.hpp"

#include <cstring>

namespace burstpool {

void throw_check_failure(const char* file, int line, const std::string& what) {
  const char* base = std::strrchr(file, '/');
  throw Error(fmt::format("{} (at {}:{})", what, base ? base + 1 : file, line));
}

}  // namespace burstpool
