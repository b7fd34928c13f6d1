// Which GPU a rank takes and which stream priority each role gets: plain
// arithmetic on what the driver reports, so it is built (and tested) in every
// build, with or without the CUDA toolkit.
#include "burstpool/device.hpp"
#include "burstpool/error.hpp"
#include "burstpool/version.hpp"

namespace burstpool {

int choose_device(int local_rank, int device_count) {
  if (device_count < 1)
    throw Error(cuda_built() ? "no GPU is visible to this process (check CUDA_VISIBLE_DEVICES and the job's GPU "
                               "request, e.g. --gpus-per-task=1)"
                             : "this build has no CUDA backend (the CUDA toolkit was not found, or -DBURSTPOOL_CUDA=OFF)");
  BP_CHECK(local_rank >= 0, "negative local rank {}", local_rank);
  return local_rank % device_count;
}

int stream_priority(StreamRole role, PriorityRange range) {
  switch (role) {
    case StreamRole::foreground:
    case StreamRole::gradient_sync:
      return range.greatest;
    case StreamRole::background:
      return range.least;
  }
  return range.least;
}

std::string to_string(StreamRole role) {
  switch (role) {
    case StreamRole::foreground: return "foreground";
    case StreamRole::gradient_sync: return "gradient sync";
    case StreamRole::background: return "background";
  }
  return "?";
}

}  // namespace burstpool
