#pragma once
// Input files read defensively: a device node, a FIFO or a folder named as an
// input would be read for ever or fail with a puzzling message, so every
// reader first checks that its path is a regular file (links followed).
#include <cstdint>
#include <string>

namespace burstpool {

// Throws Error "<path>: cannot open <what> file (missing or unreadable)",
// "<path>: the <what> file is not a regular file", or, with max_bytes > 0,
// "... has N bytes, more than the M a <what> file may have". Returns its size.
int64_t require_regular_file(const std::string& path, const char* what, int64_t max_bytes = 0);

}  // namespace burstpool
