#pragma once
// Device policy, the same with or without the CUDA backend (so it is tested
// on machines without a GPU): which GPU a rank takes, and which CUDA stream
// priority each kind of work runs at (cuda/selection.cpp; the CUDA entry
// points in cuda/context.cpp, or cuda/absent.cpp without the backend).
#include <string>

namespace burstpool {

// The GPU of a rank: its node-local rank modulo the GPUs it can see, so one
// rank per GPU when there are as many, and ranks sharing GPUs evenly when
// there are more ranks (two ranks sharing one GPU for multiplexing tests).
// Throws Error when no GPU is visible.
int choose_device(int local_rank, int device_count);

enum class StreamRole {
  foreground,     // the foreground job's layers (and small-batch learners)
  gradient_sync,  // the foreground's gradient allreduce, overlapping backward
  background,     // a background job (multiplexing)
};

// As cudaDeviceGetStreamPriorityRange reports it: `greatest` is the most
// urgent priority and numerically the smallest (e.g. least 0, greatest -5).
struct PriorityRange {
  int least = 0, greatest = 0;
};

// The foreground and its gradient sync run at the greatest priority, a
// background job at the least, so the GPU's scheduler prefers the foreground.
int stream_priority(StreamRole role, PriorityRange range);
std::string to_string(StreamRole role);

// Whether this build has the CUDA backend, and how many GPUs it sees (0 when
// it has none, or the driver reports none).
bool cuda_built();
int cuda_device_count();
// Free memory of the GPU a rank with this node-local rank takes
// (choose_device); 0 without the CUDA backend or a GPU.
unsigned long long cuda_free_bytes(int local_rank);

}  // namespace burstpool
