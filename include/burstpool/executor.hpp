#pragma once
// The burst-parallel executor: runs any valid plan on the ranks of a
// communicator. Every rank builds the whole model (parameters everywhere, so
// the flat layout is the same on all ranks) but holds activations for, and
// computes, only the layers the plan gives it, on its slice of the samples.
//
// Forward visits layers in topological order; before a layer whose rank set
// differs from a producer's, the producer's activations move to the
// consumer's slicing (comm/exchange decides the pieces, comm/slice_mover
// moves them). Backward reverses this with the gradients, and each finished
// layer's parameter gradients join a bucketed, non-blocking allreduce on that
// layer's rank group (comm/grad_sync). Every rank walks every layer in the
// same order, so all point-to-point and collective calls match without extra
// coordination.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "burstpool/device_model.hpp"
#include "burstpool/layer.hpp"
#include "burstpool/model.hpp"
#include "burstpool/optimizer.hpp"
#include "burstpool/plan.hpp"

namespace burstpool {

class GroupCache;
class GradientSync;
class SliceMover;

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
  // Record this executor's layers, transfers and gradient sums in the
  // process's trace (include/burstpool/trace.hpp) while it is active: the
  // foreground's executor; a background job's shows as whole steps.
  void set_traced(bool on);
  bool traced() const;
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
  void exchange_inputs(int layer);           // forward: every input slot from another rank set
  void exchange_input_gradients(int layer);  // backward: their gradients back
  void queue_exchange(int layer, int slot, bool backward);
  void finish_exchanges(int layer, int first_slot, bool backward);
  // Counts [t0, now) as `layer`'s transfer time and traces it as "<what> <layer>[ slot <slot>]" (slot < 0: none).
  void transfer_done(int layer, std::chrono::steady_clock::time_point t0, const char* what, int slot);
  Context layer_context(int layer, const Context& base, double* allreduce_seconds) const;
  void forward_on_cpu(int layer, const Context& base);
  void backward_on_cpu(int layer, const Context& base);
  // Runs one layer's work with its context, counting its time as compute
  // and its batch-norm reductions as allreduce.
  // `pass` ("forward", "backward") names it in the trace.
  void timed_layer(int layer, const char* pass, const Context& base, const std::function<void(const Context&)>& run);
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
  // Slices move by mover_ and parameter gradients are summed by sync_: MPI
  // over the host Model's buffers, or, for a burst plan on a device with a
  // transport (NCCL), the device's own, over its buffers.
  std::unique_ptr<SliceMover> mover_;
  bool device_transport_ = false;
  // A device without a transport: slices and gradient sums go through the host Model.
  bool staged() const { return device_ && !device_transport_; }
  size_t bucket_bytes_;
  bool whole_on_device_ = false;  // a data-parallel plan: DeviceModel::forward and backward
  std::vector<bool> on_host_;     // burst plans: the layer's activations copied to the host this step
  std::chrono::steady_clock::time_point device_reduce_start_;
  double device_reduce_seconds_ = 0;  // the device model's waits for gradient sums, this step
  std::vector<std::vector<WaitSite>> wait_sites_;  // per layer: forward, backward wait per input slot
  int buckets_ = 0;
  bool traced_ = false;
};

}  // namespace burstpool
