#pragma once
// What `burstpool --version` prints: the version, the commit it was built
// from, the build type and architecture flags, the backends, and the versions
// of the libraries it runs with (as the libraries report them at run time,
// which is what matters when a cluster module swaps one).
#include <string>

namespace burstpool {

std::string version_report();

// The CUDA backend's part: runtime, driver, cuDNN and NCCL versions, or why
// there is none. Defined with the backend (src/cuda), else in src/device.cpp.
std::string cuda_versions();

}  // namespace burstpool
