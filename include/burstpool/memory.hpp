#pragma once
// The memory a run needs, estimated from the model's shapes before anything
// large is allocated, and the check that refuses a run that would not fit
// with one line naming the estimate and its largest layers, instead of an
// OOM kill without a message. All counts are bytes, in 64 bits.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "burstpool/job.hpp"
#include "burstpool/plan.hpp"
#include "burstpool/spec.hpp"

namespace burstpool {

// One layer's share on a rank: its parameters with their gradients and
// optimizer state, and, where the rank runs it, its output and output
// gradient at the rank's slice of the batch, its inputs re-sliced for it, and
// its own buffers.
struct LayerBytes {
  std::string name;
  uint64_t bytes = 0;
};

struct MemoryEstimate {
  uint64_t parameters = 0;   // values, gradients and non-trained state of every model copy
  uint64_t optimizer = 0;    // momentum and averaging buffers, each the size of the parameters
  uint64_t activations = 0;  // layer outputs and their gradients, re-sliced inputs
  uint64_t buffers = 0;      // what layers keep for backward and their scratch (Layer::buffer_bytes)
  uint64_t data = 0;         // training and test samples held in memory, as float32
  uint64_t workspace = 0;    // gradient buckets and batch staging
  // On a GPU only ([job] device = cuda): each device model's CUDA context
  // (kCudaContextBytes), its largest cuDNN convolution workspace (with CUDA
  // graphs, every convolution's: a graph holds them all), and in bf16 its
  // rounded copy of the weights. Not in total(): the host does not hold it.
  uint64_t device_only = 0;
  std::vector<LayerBytes> layers;  // every model copy's layers, largest first

  uint64_t total() const { return parameters + optimizer + activations + buffers + data + workspace; }
  // The part that lives on a GPU when the job runs on one (no data, no host staging).
  uint64_t device_total() const { return parameters + optimizer + activations + buffers + device_only; }
  // Adds `copies` times `other` (learners are copies of one model).
  void add(const MemoryEstimate& other, uint64_t copies = 1);
  // "2.4 GiB: parameters 0.1, optimizer 0.1, activations 1.9, ... ; largest layers: conv1 0.6 GiB, ..."
  std::string describe(int largest = 3) const;
};

// One model on `rank` under `plan`: every layer's parameters, gradients and
// state (every rank holds the whole flat layout), and, for the layers the
// rank runs, activations, their gradients and buffers at its slice of the
// plan's batch, with `threads` OpenMP threads. `optimizer_copies` buffers the
// size of the parameters for the optimizer.
MemoryEstimate estimate_model_memory(const ModelSpec& spec, const Plan& plan, int rank, int threads,
                                     int optimizer_copies);

// What one CUDA context costs on its GPU beyond the model's buffers, as an
// estimate: cuBLAS's default workspace (32 MiB on Hopper, 4 MiB before) and
// cuDNN's handle. Every device model has one: each learner and a background job too.
constexpr uint64_t kCudaContextBytes = uint64_t(48) << 20;

// Everything `job` allocates on `rank` of `world_size` ranks: its model(s)
// under `plan` (sma, shadow and local-sgd ignore it: their learners each take
// a one-rank plan; counted as many times as a rank may hold learners, plus
// the average model), its data, and
// a background job's model and data with the data-parallel reference the
// calibration trains. Reads the background job file and data file headers;
// input errors are left to the readers that report them.
MemoryEstimate estimate_job_memory(const JobConfig& job, const ModelSpec& spec, const Plan& plan, int rank,
                                   int world_size, int threads);

// Bytes the ranks of this node may use: `limit_gb` when positive, else the
// lower of MemAvailable and the cgroup's limit less its usage. `source` says
// which, for messages.
uint64_t node_memory_available(double limit_gb, std::string* source);

// The largest resident memory this process has held so far (getrusage's
// ru_maxrss), in bytes: reported per rank in the metrics.
uint64_t peak_resident_bytes();

// Collective over `comm`. Sums the job's estimate over the ranks on each node
// and refuses (Error naming the job file) a run whose node total exceeds
// node_memory_available, or, on a GPU, whose ranks sharing a device exceed
// its free memory.
void require_memory(const JobConfig& job, const ModelSpec& spec, const Plan& plan, MPI_Comm comm);

}  // namespace burstpool
