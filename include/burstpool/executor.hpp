#pragma once
// The burst-parallel executor: runs any valid plan on the ranks of a
// communicator. Every rank builds the whole model (parameters everywhere, so
// the flat layout is the same on all ranks) but holds activations for, and
// computes, only the layers the plan gives it, on its slice of the samples.
//
// Forward visits layers in topological order; before a layer whose rank set
// differs from a producer's, the producer's activations move to the
// consumer's slicing (comm/exchange). Backward reverses this with the
// gradients, and each finished layer's parameter gradients join a bucketed,
// non-blocking allreduce on that layer's rank group (comm/grad_sync). Every
// rank walks every layer in the same order, so all point-to-point and
// collective calls match without extra coordination.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "burstpool/layer.hpp"
#include "burstpool/model.hpp"
#include "burstpool/optimizer.hpp"
#include "burstpool/plan.hpp"

namespace burstpool {

class GroupCache;
class GradientSync;

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

// A copy of the model on an accelerator that runs forward, backward and the
// SGD step instead of the CPU layers (src/cuda/gpu_model.hpp). The CPU Model
// stays the reference: parameters, state and momentum are moved between the
// two for checkpoints and resumes. A data-parallel plan runs the whole model
// per call (forward, backward); a burst plan runs it layer by layer
// (forward_layer, backward_layer), the executor moving slices between ranks
// through host memory (copy_out, copy_in).
class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
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
  enum class Buffer { activation, gradient, slot_input, slot_gradient, parameter_gradient };
  // `floats` values from the start of a layer's buffer (slot: for the slot
  // buffers) to host memory and back. copy_out returns with the data there.
  virtual void copy_out(Buffer what, int layer, int slot, float* host, size_t floats) = 0;
  virtual void copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) = 0;
  virtual void to_host(float* velocity) = 0;          // parameters, state into the Model; momentum into velocity
  virtual void from_host(const float* velocity) = 0;  // the reverse
  virtual std::string describe() const = 0;           // for the banner: which device
};
struct CudaOptions {
  bool background = false;  // on the least-priority streams (a background job), else the greatest
  bool graphs = false;      // CUDA graphs for training steps where they apply (src/cuda/gpu_model.hpp)
};
// The CUDA model on the GPU of this node-local rank. Throws Error when the
// build has no CUDA backend or no GPU is visible.
std::unique_ptr<DeviceModel> make_cuda_model(Model& model, int local_rank, const CudaOptions& options = {});
struct WaitSite;

struct TimeSplit {
  double compute = 0;    // layer forward/backward and optimizer
  double transfer = 0;   // slice redistribution
  double allreduce = 0;  // waiting for gradient reductions and batch-norm statistics
};

// Per layer, summed over steps: seconds in its slice transfers (forward and
// backward) and in its reductions (batch-norm statistics, and its gradient
// allreduce when measured per layer).
struct LayerTimes {
  double transfer = 0, allreduce = 0;
};

class Executor {
 public:
  // Collective over `world`. `plan` must already be validated for this model
  // and world size. bucket_bytes: gradient allreduce bucket size.
  Executor(const ModelSpec& spec, const Plan& plan, MPI_Comm world, uint64_t init_seed, size_t bucket_bytes);

  // Measure each layer's gradient allreduce on its own: reduce it right after
  // its backward and wait, instead of bucketing and overlapping. For
  // attribution in benchmarks; slower than the default.
  void set_per_layer_allreduce(bool on) { per_layer_allreduce_ = on; }
  const std::vector<LayerTimes>& layer_times() const { return layer_times_; }
  // Called before each layer's forward and backward on this rank: the pieces
  // a background job's work is cut into. It may block (a gate) or throw.
  // With a device model, before its layers' launches.
  void set_before_layer(std::function<void()> hook);
  // Batch-norm statistics over the layer's whole group (default, the same
  // numbers as one rank), or over each rank's own slice (like PyTorch DDP
  // without SyncBatchNorm: no reduction inside the step).
  void set_sync_batchnorm(bool on) { sync_batchnorm_ = on; }
  // Raised while this rank waits in a reduction (gradients, batch-norm
  // statistics), for a background job's gate. nullptr: none.
  void set_reduce_flag(std::atomic<bool>* flag) { reduce_flag_ = flag; }
  ~Executor();

  Model& model() { return *model_; }
  const Plan& plan() const { return plan_; }
  int rank() const { return rank_; }
  bool holds(int layer) const { return model_->capacity(layer) > 0; }
  const RankSet& ranks_of(int layer) const { return sets_[layer]; }

  // This rank's share of a batch of `batch` samples at the input layer (the
  // images it must supply) and at the loss layer (the labels it must supply).
  Slice input_slice(int batch) const;
  Slice loss_slice(int batch) const;
  Slice logits_slice(int batch) const;

  // Forward over a batch of `batch` <= global batch samples. images: this
  // rank's input slice; labels: its loss slice. ctx.loss_scale should be
  // 1/batch. Returns this rank's part of the loss (0 if it holds no loss).
  double forward(int batch, const float* images, const int32_t* labels, const Context& ctx);
  // Backward of the last forward, then the gradient allreduce; after it every
  // rank holds the global-batch gradient of the layers it runs.
  void backward(const Context& ctx);

  // Parameter ranges of the layers this rank runs (what its optimizer may update).
  const std::vector<std::pair<size_t, size_t>>& held_param_ranges() const { return held_ranges_; }
  // Copies each layer's values from the layer's first rank to every rank, for a
  // buffer laid out like params() (ranges from Model::param_range) or like
  // state() (Model::state_range). Collective over the world.
  void share_from_owners(float* flat, size_t size, bool state_layout);

  // Hands the layers to `device` (CUDA). A data-parallel plan runs whole on
  // the device, gradient sums included (collective over the plan's ranks);
  // other plans run layer by layer, slices and gradient sums going through
  // the host Model's buffers.
  void use_device(std::unique_ptr<DeviceModel> device, bool background = false);
  DeviceModel* device() { return device_.get(); }

  TimeSplit& times() { return times_; }
  int buckets_last_step() const { return buckets_; }

 private:
  void exchange_forward(int layer, int slot, int batch);
  void exchange_backward(int layer, int slot, int batch);
  Context layer_context(int layer, const Context& base, double* allreduce_seconds) const;
  void forward_on_cpu(int layer, const Context& base);
  void backward_on_cpu(int layer, const Context& base);
  // Runs one layer's work with its context, counting its time as compute
  // and its batch-norm reductions as allreduce.
  void timed_layer(int layer, const Context& base, const std::function<void(const Context&)>& run);
  void activation_to_host(int layer);
  void copy_slot_in(int layer, int slot);
  void gradients_to_host(int layer, int slot);
  void gradient_to_device(int producer);

  Plan plan_;
  std::unique_ptr<GroupCache> groups_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<GradientSync> sync_;
  int rank_ = 0;
  int batch_ = 0;  // of the last forward
  const int32_t* labels_ = nullptr;
  std::vector<RankSet> sets_;                    // rank set per layer (topological position)
  std::vector<std::vector<bool>> direct_;        // input slot shares the producer's slicing
  std::vector<std::vector<Tensor>> in_, in_grad_;  // per non-direct slot: input in this layer's slicing
  std::vector<std::pair<size_t, size_t>> held_ranges_;
  TimeSplit times_;
  std::vector<LayerTimes> layer_times_;
  bool per_layer_allreduce_ = false;
  std::function<void()> before_layer_;
  std::atomic<bool>* reduce_flag_ = nullptr;
  bool sync_batchnorm_ = true;
  std::unique_ptr<DeviceModel> device_;
  bool whole_on_device_ = false;  // a data-parallel plan: DeviceModel::forward and backward
  std::vector<bool> on_host_;     // burst plans: the layer's activations copied to the host this step
  std::chrono::steady_clock::time_point device_reduce_start_;
  double device_reduce_seconds_ = 0;  // the device model's waits for gradient sums, this step
  std::vector<std::vector<WaitSite>> wait_sites_;  // per layer: forward, backward wait per input slot
  int buckets_ = 0;
};

}  // namespace burstpool
