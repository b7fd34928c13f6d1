#pragma once
// What this binary is and what it runs with: the version, the commit it was
// configured from, the build type and architecture flags, the backends, and
// the versions of the libraries as they report them at run time (which is
// what matters when a cluster module swaps one). `burstpool --version`
// prints it; the metrics' "run" object holds it.
#include <string>

#include <nlohmann/json.hpp>

namespace burstpool {

nlohmann::json version_info();
std::string version_report();  // version_info as lines of text

// The CUDA backend's part of version_info: {"built": false} without it, else
// the runtime, driver, cuDNN and NCCL versions and the GPUs visible.
// Defined with the backend (cuda), else in src/run/device.cpp.
nlohmann::json cuda_info();

// The oneDNN CPU backend's part: {"built": false} without it, else its
// version as the library reports it and the instruction set it dispatches to.
// Defined in layers/onednn_conv.cpp.
nlohmann::json onednn_info();

}  // namespace burstpool
