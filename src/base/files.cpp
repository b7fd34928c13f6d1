#include "burstpool/files.hpp"

#include <sys/stat.h>

#include "burstpool/error.hpp"

namespace burstpool {

int64_t require_regular_file(const std::string& path, const char* what, int64_t max_bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw Error(fmt::format("{}: cannot open {} file (missing or unreadable)", path, what));
  if (!S_ISREG(st.st_mode)) throw Error(fmt::format("{}: the {} file is not a regular file", path, what));
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (max_bytes > 0 && size > max_bytes)
    throw Error(fmt::format("{}: the {} file has {} bytes, more than the {} a {} file may have", path, what, size,
                            max_bytes, what));
  return size;
}

}  // namespace burstpool
