#pragma once
// The executor's interface to an accelerator: a copy of the model that runs
// the layers instead of the CPU ones, and the CUDA one's factory. An
// interface: its implementations are src/run/host_device.cpp (the CPU),
// src/run/twin_device.cpp, cuda/gpu_model.cpp; the choice by name is
// src/run/device.cpp.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "burstpool/layer.hpp"
#include "burstpool/model.hpp"
#include "burstpool/optimizer.hpp"

namespace burstpool {

class SliceMover;    // comm/slice_mover.hpp
class GroupReducer;  // comm/grad_sync.hpp
class GroupCache;    // comm/communicator.hpp

// What carries a burst plan's data between the ranks' devices directly,
// without host copies (the CUDA model's: NCCL). Empty when the device cannot.
struct DeviceTransport {
  std::unique_ptr<SliceMover> slices;       // between buffers from DeviceModel::address
  std::unique_ptr<GroupReducer> gradients;  // sums over a layer's group, in device memory
};

// The ranks a device model trains with (a data-parallel plan): after each
// backward their gradients are summed, and batch norm sums its statistics
// over them (Context::sum_over_group).
struct DeviceRanks {
  MPI_Comm comm = MPI_COMM_NULL;                  // all of them; NCCL's unique id goes over it
  std::function<void(float*, size_t)> host_sum;   // sums floats in host memory over them, in place
  std::function<void(bool)> reducing;             // told when a wait for a gradient sum starts and ends
  // NCCL when every rank has a GPU of its own (else the sums go through
  // host_sum). A background job says false: two NCCL communicators driven
  // from two threads on the same GPUs can deadlock.
  bool allow_nccl = true;
};

// Where the layers run: a copy of the model on an accelerator that runs
// forward, backward and the SGD step instead of the CPU layers
// (cuda/gpu_model.hpp), or the CPU itself (run/host_device.hpp). The CPU Model
// stays the reference: parameters, state and momentum are moved between the
// two for checkpoints and resumes. A data-parallel plan runs the whole model
// per call (forward, backward); a burst plan runs it layer by layer
// (forward_layer, backward_layer), the executor moving slices between ranks
// directly between device buffers (transport) or through host memory
// (download, upload).
class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  // Whether a data-parallel plan runs through forward() and backward() (the
  // whole model per call, gradient sums inside: the GPU, the twin), rather
  // than layer by layer with the executor's gradient buckets (the CPU, whose
  // DeviceModel is the host Model itself: run/host_device.hpp).
  virtual bool whole_model() const { return true; }
  // Collective over ranks.comm (every rank calls it). Not called on one rank.
  virtual void join_ranks(DeviceRanks ranks) = 0;
  // Runs before each layer's forward and backward is launched, after the
  // previous layer's work has finished: a background job's gate, so its work
  // goes to the device in pieces of one layer. Empty: no hook, no waiting.
  virtual void set_before_layer(std::function<void()> hook) = 0;
  virtual float forward(int batch, const float* images, const int32_t* labels, const Context& ctx) = 0;
  virtual void backward(const Context& ctx) = 0;
  virtual void logits(float* host) = 0;  // the last forward's logits
  // SGD on the parameter ranges given (those of the layers this rank runs).
  virtual void sgd_step(float lr, const SgdOptions& options, const std::vector<std::pair<size_t, size_t>>& ranges) = 0;
  // Burst plans. Each layer works on Model::layer_batch samples, which the
  // executor sets. Input slots whose producer runs on another rank set
  // (direct[layer][slot] false) get buffers of their own, in the layer's
  // slicing.
  virtual void use_slot_buffers(const std::vector<std::vector<bool>>& direct) = 0;
  // This rank's input and loss slices, and this step's per-step values.
  virtual void load_input(const float* images, int images_n, const int32_t* labels, int labels_n,
                          const Context& ctx) = 0;
  virtual void forward_layer(int layer, const Context& ctx) = 0;
  virtual void backward_layer(int layer, const Context& ctx) = 0;  // parameter gradients overwritten
  virtual float loss() = 0;  // after the loss layer's forward_layer
  enum class Buffer {
    activation, gradient, slot_input, slot_gradient, parameter_gradient, parameters, state,
    momentum, scratch_a, scratch_b, scratch_c, scratch_d  // whole flat vectors only (layer -1): the SGD
                                                          // velocity, a strategy's own vectors
  };
  static constexpr int kScratchVectors = 4;
  // Which of the scratch vectors `what` is (0 for scratch_a ...), -1 for the
  // other buffers: where a device keeps them.
  static int scratch_slot(Buffer what) {
    const int i = static_cast<int>(what) - static_cast<int>(Buffer::scratch_a);
    return i >= 0 && i < kScratchVectors ? i : -1;
  }
  // `floats` values from the start of a layer's buffer (slot: for the slot
  // buffers) to host memory and back. copy_out returns with the data there.
  // For parameters, parameter_gradient and state, layer -1 means the whole
  // flat array (laid out as the Model's); momentum and the scratch vectors
  // are whole arrays only.
  virtual void copy_out(Buffer what, int layer, int slot, float* host, size_t floats) = 0;
  virtual void copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) = 0;
  // A sync strategy's update on the device, in generic pieces (the sma
  // strategy's step is a sequence of them, src/sync/sma.cpp): whole flat vectors
  // of param_count floats (parameters, parameter_gradient, momentum and the
  // four scratch vectors, made at first use) combined as y = a x + b y,
  // elementwise, in the stream order of the other work; with b == 0, y is
  // only written (BLAS's beta = 0: y = a x exactly, whatever y held). Vectors
  // go up and down with copy_in and copy_out at layer -1.
  virtual void axpby(float a, Buffer x, float b, Buffer y) = 0;
  // Burst plans: slices and parameter-gradient sums carried between the
  // devices directly, or an empty transport when this device cannot (the
  // CUDA one: unless every rank has a GPU of its own, as NCCL needs); the
  // executor then moves them through host memory with download and upload.
  // Collective over groups.world(), whose rank numbers the executor's pieces
  // use; makes what it needs for every group of the plan. Called once, after
  // use_slot_buffers.
  virtual DeviceTransport transport(const GroupCache& groups) = 0;
  // Where a buffer of copy_out starts in the device's memory (activation,
  // gradient, slot_input, slot_gradient of a layer this rank runs; layer -1
  // of parameter_gradient: the whole flat array).
  virtual float* address(Buffer what, int layer, int slot) = 0;
  // Copies between the device's memory (within a buffer from address) and
  // host memory, for a transport through the host (run/staging_transport.hpp).
  // download returns with the data there; upload has read `host` when it
  // returns.
  virtual void download(const float* device, float* host, size_t floats) = 0;
  virtual void upload(float* device, const float* host, size_t floats) = 0;
  virtual void to_host(float* velocity) = 0;          // parameters, state into the Model; momentum into velocity
  virtual void from_host(const float* velocity) = 0;  // the reverse
  virtual std::string describe() const = 0;           // for the banner: which device
  // Whether this device runs layers of `kind`: Executor::use_device refuses
  // a model with a layer it does not, naming the layer, before training.
  virtual bool supports(LayerKind kind) const = 0;
  // Returns once the work launched so far is done (for timing it).
  virtual void synchronize() = 0;
};
struct CudaOptions {
  bool background = false;  // on the least-priority streams (a background job), else the greatest
  bool graphs = false;      // CUDA graphs for training steps where they apply (cuda/gpu_model.hpp)
  std::string conv_algorithms = "heuristic";  // [job] cudnn_algorithms: heuristic | measured | gemm
  // How host threads wait for the GPU, set for the whole device (CUDA keeps
  // one setting per device and process): "block" or "spin"; empty leaves it
  // as it is (a background job's model: the foreground's job decides).
  std::string wait;
  int pieces_in_flight = 1;  // a background job's pieces queued at once (GpuModel::set_pieces_in_flight)
  std::string precision = "fp32";  // [job] precision: fp32 | tf32 | bf16 (its rounding: Context::precision)
  std::string cudnn_cache;  // conv_algorithms = measured: the cache file (include/burstpool/algorithm_cache.hpp); "": none
};
// A stand-in device for testing the device paths without a GPU ([job] device
// = twin): a second Model of the same spec in host memory, run by the CPU
// layers (src/run/twin_device.cpp). With `transport`, it also moves burst plans'
// slices between its own buffers and sums gradients there (MPI standing in
// for NCCL); else the executor moves them through host memory, as for ranks
// sharing a GPU.
// BURSTPOOL_TWIN=async (true), sync or unset (false); anything else throws Error.
bool twin_async_from_environment();
// What a twin saw, for tests to check how the executor used it.
struct TwinCounts {
  size_t floats_summed = 0;              // by its transport's gradient sums
  size_t parameter_gradient_copies = 0;  // copy_out and copy_in calls of parameter gradients
  size_t parameter_copies = 0;           // copy_out and copy_in calls of parameters
  size_t floats_in = 0, floats_out = 0;  // floats copied host to device and back, any buffer
};
struct TwinOptions {
  bool transport = false;
  TwinCounts* counts = nullptr;  // optional, must outlive the twin
  // Its work queued on a stream of its own and run by a worker thread only
  // when waited for (src/run/twin_stream.hpp), so a missing synchronisation
  // reads stale values every time. Default: the environment's BURSTPOOL_TWIN
  // (async, or sync: the work done when each call returns).
  bool async = twin_async_from_environment();
};
std::unique_ptr<DeviceModel> make_twin_model(Model& host, const TwinOptions& options = {});

// The CUDA model on the GPU of this node-local rank. Throws Error when the
// build has no CUDA backend or no GPU is visible.
std::unique_ptr<DeviceModel> make_cuda_model(Model& model, int local_rank, const CudaOptions& options = {});

// By the name of [job] device and profile --device: nullptr for "cpu" (the
// executor's own layers), else the cuda or twin model of `model`. Throws
// Error for another name, or as make_cuda_model does.
std::unique_ptr<DeviceModel> make_device_model(const std::string& device, Model& model, int local_rank,
                                               const CudaOptions& options = {});

}  // namespace burstpool
