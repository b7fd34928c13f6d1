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
//
// Where the transport can leave pieces in flight (MPI over host memory, the
// host device's and the twin's), a slice is sent as soon as its producer
// has made it (forward) or its consumer has computed its gradient
// (backward), and a rank waits only for what the layer in front of it
// needs: a gradient piece is received in the background and waited for just
// before the producer's backward (earlier pieces into the same gradient
// first, so sums add in one order on every run). Branches of a fork on
// disjoint rank sets therefore run at the same time, though every rank
// still walks one order: a rank blocks only on data of layers before the
// one it waits at, which the ranks holding them have already sent. Over
// NCCL (a send waits in its stream for the peer), exchanges stay in step
// with the walk.
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

// Per layer and input slot: whether the slot reads its producer's buffer
// directly (same rank set and slicing), else a buffer of its own in the
// consumer's slicing for the input and one for its gradient. The host
// device computes in them; an accelerator keeps buffers of its own alike
// (DeviceModel::use_slot_buffers).
struct SlotBuffers {
  std::vector<std::vector<bool>> direct;       // slot shares its producer's rank set and slicing
  std::vector<std::vector<Tensor>> in, grad;   // per non-direct slot: its input and input gradient
};

// How an executor uses an accelerator (Executor::use_device).
struct DeviceUse {
  bool background = false;  // a background job's model: no NCCL (DeviceRanks::allow_nccl)
  // A data-parallel plan as one device call per forward and per backward,
  // gradient sums inside (DeviceModel::forward, backward: what CUDA graphs
  // capture), where the device offers it; false: layer by layer, as any
  // other plan runs ([job] device_calls).
  bool whole_model = true;
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

  // Hands the layers to an accelerator (CUDA, the twin) instead of the host
  // device, which runs them from construction. A data-parallel plan runs
  // whole on it (DeviceUse::whole_model), gradient sums included (collective
  // over the plan's ranks); other plans run layer by layer, slices and
  // gradient sums moving between its buffers by its transport, or through
  // host memory when it has none (run/staging_transport.hpp).
  void use_device(std::unique_ptr<DeviceModel> device, DeviceUse how = {});
  // Where the layers run: the accelerator, else the host device.
  DeviceModel& device() { return *device_; }
  // Whether the layers run on an accelerator, which keeps a copy of the
  // model in memory of its own and can update it there (DeviceModel::sgd_step,
  // axpby), rather than on the host device, whose memory is the host Model
  // (updated by the host optimizer). Moves between the Model and the device
  // (copy_in, copy_out, to_host, from_host) need not ask: on the host
  // device they are copies onto themselves, which copy nothing.
  bool on_accelerator() const { return accelerator_ != nullptr; }

  TimeSplit& times() { return times_; }
  int buckets_last_step() const { return buckets_; }

 private:
  void exchange_inputs(int layer);           // forward: every input slot from another rank set
  void exchange_input_gradients(int layer);  // backward: their gradients back
  // Which pieces of an exchange this rank queues: all, the ones it sends, or
  // the ones it keeps and receives (early sends: the two at different times).
  enum class Pieces { all, sends, receives };
  void queue_exchange(int layer, int slot, bool backward, Pieces which = Pieces::all);
  // Early sends: the activations of `producer` to every consumer on other rank sets.
  void send_outputs(int producer);
  // Early sends: waits for the gradient pieces in flight into layers up to
  // the last entry for `producer` (all: -1), in the order they were posted.
  void complete_gradients(int producer);
  void finish_sends();  // early sends: every send of the step delivered
  bool feeds_other_sets(int producer) const;
  void finish_exchanges(int layer, int first_slot, bool backward);
  // Counts [t0, now) as `layer`'s transfer time and traces it as "<what> <layer>[ slot <slot>]" (slot < 0: none).
  void transfer_done(int layer, std::chrono::steady_clock::time_point t0, const char* what, int slot);
  Context layer_context(int layer, const Context& base, double* allreduce_seconds) const;
  // The per-layer path's transport: the device's, else (an accelerator
  // without one, or a background job's) through host memory
  // (run/staging_transport.hpp).
  void connect_layers(bool background = false);
  double forward_whole(int batch, const float* images, const int32_t* labels, const Context& base);
  void backward_whole(const Context& base);
  // Runs one layer's work with its context, counting its time as compute
  // and its batch-norm reductions as allreduce.
  // `pass` ("forward", "backward") names it in the trace.
  void timed_layer(int layer, const char* pass, const Context& base, const std::function<void(const Context&)>& run);

  Plan plan_;
  std::unique_ptr<GroupCache> groups_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<GradientSync> sync_;
  int rank_ = 0;
  int batch_ = 0;  // of the last forward
  const int32_t* labels_ = nullptr;
  std::vector<RankSet> sets_;                    // rank set per layer (topological position)
  SlotBuffers slots_;
  std::vector<std::pair<size_t, size_t>> held_ranges_;
  TimeSplit times_;
  std::vector<LayerTimes> layer_times_;
  bool per_layer_allreduce_ = false;
  std::function<void()> before_layer_;
  double hook_seconds_ = 0;  // spent in before_layer_ (a gate's waits), not counted as compute
  std::atomic<bool>* reduce_flag_ = nullptr;
  bool sync_batchnorm_ = true;
  std::unique_ptr<DeviceModel> host_;         // the CPU: the host Model's own layers and buffers
  std::unique_ptr<DeviceModel> accelerator_;  // use_device's, or none
  DeviceModel* device_ = nullptr;             // the one the layers run on: accelerator_, else host_
  // Slices move by mover_ and parameter gradients are summed by sync_, over
  // the device's buffers by its transport (the host's: MPI; a GPU's: NCCL;
  // one without: through host memory).
  std::unique_ptr<SliceMover> mover_;
  size_t bucket_bytes_;
  bool whole_on_device_ = false;  // a data-parallel plan: DeviceModel::forward and backward
  std::chrono::steady_clock::time_point device_reduce_start_;
  double device_reduce_seconds_ = 0;  // the device model's waits for gradient sums, this step
  std::vector<std::vector<WaitSite>> wait_sites_;  // per layer: forward, backward wait per input slot
  // Early sends (see the top): whether the mover sends slices as soon as they are made,
  // each layer's consumers (layer, slot), the send batches in flight and the gradient
  // receives in flight (into `producer`, for `layer`'s slot `slot`), oldest first.
  bool early_ = false;
  std::vector<std::vector<std::pair<int, int>>> consumers_;
  std::vector<size_t> sends_in_flight_;
  struct GradientsInFlight {
    int producer, layer, slot;
    size_t batch;
  };
  std::vector<GradientsInFlight> gradients_in_flight_;
  int buckets_ = 0;
  bool traced_ = false;
};

}  // namespace burstpool
