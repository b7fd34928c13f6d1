#include "burstpool/executor.hpp"

#include <chrono>

#include "comm/communicator.hpp"
#include "comm/exchange.hpp"
#include "comm/grad_sync.hpp"
#include "comm/slice_mover.hpp"
#include "comm/wait.hpp"
#include "run/host_device.hpp"
#include "run/staging_transport.hpp"
#include "burstpool/error.hpp"
#include "burstpool/trace.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// Point-to-point tags: one per (layer, input slot, direction).
constexpr int kMaxSlots = 64;
int tag_of(int layer, int slot, bool backward) { return (layer * kMaxSlots + slot) * 2 + (backward ? 1 : 0); }

}  // namespace

// Whether a consumer of `producer` runs on another rank set. Its consumers on
// its own set then read and write it through slot buffers of their own too,
// so that no layer's backward writes a gradient that pieces from other ranks
// may still be landing in: they are added, with every other contribution, in
// the order of the walk (early sends: when the producer needs them).
bool Executor::feeds_other_sets(int producer) const {
  const Model& m = *model_;
  for (int i = 0; i < m.size(); ++i)
    for (int p : m.inputs(i))
      if (p == producer && sets_[i] != sets_[producer]) return true;
  return false;
}

Executor::Executor(const ModelSpec& spec, const Plan& plan, MPI_Comm world, uint64_t init_seed, size_t bucket_bytes)
    : plan_(plan), bucket_bytes_(bucket_bytes) {
  MPI_Comm_rank(world, &rank_);
  groups_ = std::make_unique<GroupCache>(world, plan_.layer_ranks);
  const int batch = plan_.global_batch;
  model_ = std::make_unique<Model>(
      spec, [&](const std::string& name) { return Plan::slice_of(plan_.ranks_of(name), rank_, batch).count; },
      init_seed);
  Model& m = *model_;
  const int n = m.size();
  sets_.resize(n);
  for (int i = 0; i < n; ++i) sets_[i] = plan_.ranks_of(m.layer(i).name());
  slots_.direct.resize(n);
  slots_.in.resize(n);
  slots_.grad.resize(n);
  for (int i = 0; i < n; ++i) {
    const auto& inputs = m.inputs(i);
    BP_CHECK(inputs.size() <= static_cast<size_t>(kMaxSlots), "layer '{}' has more than {} inputs", m.layer(i).name(),
             kMaxSlots);
    for (size_t s = 0; s < inputs.size(); ++s) {
      const int p = inputs[s];
      slots_.direct[i].push_back(sets_[p] == sets_[i] && !feeds_other_sets(p));
      Tensor buffer, grad;
      if (!slots_.direct[i][s] && holds(i)) {
        const Shape shape = m.layer(p).output_shape().with_batch(m.capacity(i));
        buffer = Tensor::zeros(shape);
        if (p != m.input_layer()) grad = Tensor::zeros(shape);
      }
      slots_.in[i].push_back(buffer);
      slots_.grad[i].push_back(grad);
    }
    if (holds(i) && m.param_range(i).second > 0) held_ranges_.push_back(m.param_range(i));
  }
  consumers_.resize(n);
  for (int i = 0; i < n; ++i)
    for (size_t s = 0; s < m.inputs(i).size(); ++s)
      if (!slots_.direct[i][s]) consumers_[m.inputs(i)[s]].emplace_back(i, static_cast<int>(s));
  wait_sites_.resize(n);
  for (int i = 0; i < n; ++i) wait_sites_[i].resize(2 * m.inputs(i).size());
  layer_times_.resize(n);
  host_ = make_host_device(m, slots_);
  device_ = host_.get();
  connect_layers();
}

Executor::~Executor() = default;

Slice Executor::input_slice(int batch) const { return Plan::slice_of(sets_[model_->input_layer()], rank_, batch); }
Slice Executor::loss_slice(int batch) const { return Plan::slice_of(sets_[model_->loss_layer()], rank_, batch); }
Slice Executor::logits_slice(int batch) const { return Plan::slice_of(sets_[model_->logits_layer()], rank_, batch); }

Context Executor::layer_context(int layer, const Context& base, double* allreduce_seconds) const {
  Context ctx = base;
  ctx.sample_offset = Plan::slice_of(sets_[layer], rank_, batch_).offset;
  ctx.labels = labels_;
  const Communicator& group = groups_->group(sets_[layer]);
  if (group.size() > 1 && sync_batchnorm_)
    ctx.sum_over_group = [&group, allreduce_seconds, flag = reduce_flag_](double* v, size_t count) {
      const auto t0 = Clock::now();
      if (flag) flag->store(true);
      group.sum(v, count);
      if (flag) flag->store(false);
      *allreduce_seconds += seconds_since(t0);
    };
  return ctx;
}

void Executor::use_device(std::unique_ptr<DeviceModel> device, DeviceUse how) {
  for (int i = 0; i < model_->size(); ++i) {
    const Layer& l = model_->layer(i);
    if (!device->supports(l.kind()))
      throw Error(fmt::format("{}: layer '{}': type {} does not run on {}", model_->spec().name, l.name(), l.type(),
                              device->describe()));
  }
  accelerator_ = std::move(device);
  device_ = accelerator_.get();
  set_before_layer(before_layer_);
  whole_on_device_ = how.whole_model && device_->whole_model();
  for (const RankSet& set : sets_) whole_on_device_ = whole_on_device_ && static_cast<int>(set.size()) == plan_.ranks;
  if (!whole_on_device_) return connect_layers(how.background);
  if (plan_.ranks == 1) return;
  const Communicator& all = groups_->group(sets_.front());
  DeviceRanks ranks;
  ranks.comm = all.get();
  ranks.host_sum = [&all](float* values, size_t count) { all.sum(values, count); };
  ranks.reducing = [this](bool on) {
    if (reduce_flag_) reduce_flag_->store(on);
    if (on)
      device_reduce_start_ = Clock::now();
    else
      device_reduce_seconds_ += seconds_since(device_reduce_start_);
  };
  ranks.allow_nccl = !how.background;
  device_->join_ranks(std::move(ranks));
}

void Executor::connect_layers(bool background) {
  device_->use_slot_buffers(slots_.direct);
  // A background job's pieces go through host memory: two NCCL communicators
  // driven from two threads on the same GPUs can deadlock (DeviceRanks::allow_nccl).
  DeviceTransport transport = background ? DeviceTransport{} : device_->transport(*groups_);  // collective
  BP_CHECK(!transport.slices == !transport.gradients, "a device transport carries slices and gradients, or neither");
  if (!transport.slices) transport = staging_transport(*device_, groups_->world());
  mover_ = std::move(transport.slices);
  early_ = mover_->can_park();
  sync_ = std::make_unique<GradientSync>(device_->address(DeviceModel::Buffer::parameter_gradient, -1, 0),
                                         bucket_bytes_, std::move(transport.gradients));
  sync_->set_traced(traced_);
}

// The gate's waits are the background's idle time, not its compute.
void Executor::set_before_layer(std::function<void()> hook) {
  before_layer_ = std::move(hook);
  if (!before_layer_) return device_->set_before_layer(nullptr);
  device_->set_before_layer([this] {
    const auto t0 = Clock::now();
    before_layer_();
    hook_seconds_ += seconds_since(t0);
  });
}

double Executor::forward(int batch, const float* images, const int32_t* labels, const Context& base) {
  BP_CHECK(batch >= 1 && batch <= plan_.global_batch, "batch {} outside 1..{}", batch, plan_.global_batch);
  Model& m = *model_;
  batch_ = batch;
  labels_ = labels;
  for (int i = 0; i < m.size(); ++i) m.set_layer_batch(i, Plan::slice_of(sets_[i], rank_, batch).count);
  if (whole_on_device_) return forward_whole(batch, images, labels, base);
  finish_sends();  // none left unless the last step stopped between forward and backward
  device_->load_input(images, m.layer_batch(m.input_layer()), labels, m.layer_batch(m.loss_layer()), base);
  send_outputs(m.input_layer());
  double loss = 0;
  for (int i = 0; i < m.size(); ++i) {
    exchange_inputs(i);
    // A held layer runs even on 0 samples in training (a batch smaller than
    // its rank set), so its group reductions (batch norm) still match across
    // the group; evaluation sums nothing over the group.
    if (!holds(i) || i == m.input_layer() || (m.layer_batch(i) == 0 && !base.training)) continue;
    timed_layer(i, "forward", base, [&](const Context& ctx) { device_->forward_layer(i, ctx); });
    send_outputs(i);
    if (i == m.loss_layer()) loss = device_->loss();
    if (i == m.logits_layer() && !base.training)  // evaluation reads them
      device_->copy_out(DeviceModel::Buffer::activation, i, 0, m.activation(i).data(), m.activation(i).size());
  }
  if (!base.training) finish_sends();  // no backward follows
  return loss;
}

// Every layer has the input layer's rank set and slicing (use_device).
double Executor::forward_whole(int batch, const float* images, const int32_t* labels, const Context& base) {
  Model& m = *model_;
  const int count = input_slice(batch).count;
  if (count == 0 && !base.training) return 0;  // a small last evaluation batch; evaluation sums nothing
  double reduce_seconds = 0;
  const Context ctx = layer_context(m.input_layer(), base, &reduce_seconds);
  const auto t0 = Clock::now();
  const double loss = device_->forward(count, images, labels, ctx);
  if (!base.training) device_->logits(m.activation(m.logits_layer()).data());  // evaluation reads them
  const auto t1 = Clock::now();
  if (traced()) tracer().span(Track::main, "forward (every layer, on the device)", t0, t1, true);
  times_.compute += Seconds(t1 - t0).count() - reduce_seconds;
  times_.allreduce += reduce_seconds;
  return loss;
}

void Executor::set_traced(bool on) {
  traced_ = on;
  sync_->set_traced(on);
}
bool Executor::traced() const { return traced_ && tracer().active(); }

void Executor::timed_layer(int i, const char* pass, const Context& base,
                           const std::function<void(const Context&)>& run) {
  double reduce_seconds = 0;
  const Context ctx = layer_context(i, base, &reduce_seconds);
  const double hooked = hook_seconds_;
  const auto t0 = Clock::now();
  run(ctx);
  const auto t1 = Clock::now();
  if (traced()) tracer().span(Track::main, fmt::format("{} {}", pass, model_->layer(i).name()), t0, t1, true);
  times_.compute += Seconds(t1 - t0).count() - reduce_seconds - (hook_seconds_ - hooked);
  times_.allreduce += reduce_seconds;
  layer_times_[i].allreduce += reduce_seconds;
}

void Executor::backward(const Context& base) {
  Model& m = *model_;
  if (whole_on_device_) return backward_whole(base);
  // Parameter gradients are summed in the device's buffers, by its transport.
  for (int i = m.size() - 1; i >= 0; --i) {
    if (holds(i) && i != m.input_layer()) {
      const auto [offset, count] = m.param_range(i);
      const Communicator& group = groups_->group(sets_[i]);
      complete_gradients(i);  // its output gradient (a producer read directly has no pieces in flight)
      timed_layer(i, "backward", base, [&](const Context& ctx) { device_->backward_layer(i, ctx); });
      sync_->layer_ready(offset, count, group);
      if (per_layer_allreduce_) {
        const auto w0 = Clock::now();
        sync_->finish();
        const auto w1 = Clock::now();
        if (traced()) tracer().span(Track::gradient_sync, "allreduce " + m.layer(i).name(), w0, w1, true);
        const double waited = Seconds(w1 - w0).count();
        times_.allreduce += waited;
        layer_times_[i].allreduce += waited;
      }
    }
    exchange_input_gradients(i);
    const auto t1 = Clock::now();
    sync_->progress();
    const auto t2 = Clock::now();
    if (traced()) tracer().span(Track::gradient_sync, "allreduce progress", t1, t2, true);
    times_.allreduce += Seconds(t2 - t1).count();
  }
  complete_gradients(-1);
  const int before = sync_->buckets_started();
  if (reduce_flag_) reduce_flag_->store(true);
  // Starting the last buckets and waiting for all: gradient sync time.
  const auto t2 = Clock::now();
  sync_->finish();
  const auto t3 = Clock::now();
  if (traced()) tracer().span(Track::gradient_sync, "allreduce wait (the step's last buckets)", t2, t3, true);
  times_.allreduce += Seconds(t3 - t2).count();
  if (reduce_flag_) reduce_flag_->store(false);
  buckets_ = sync_->buckets_started() - before;
  finish_sends();
}

void Executor::backward_whole(const Context& base) {
  double reduce_seconds = 0;
  device_reduce_seconds_ = 0;
  const Context ctx = layer_context(model_->input_layer(), base, &reduce_seconds);
  const auto t0 = Clock::now();
  device_->backward(ctx);  // and the gradient sums
  const auto t1 = Clock::now();
  if (traced()) tracer().span(Track::main, "backward and gradient sums (every layer, on the device)", t0, t1, true);
  reduce_seconds += device_reduce_seconds_;
  times_.compute += Seconds(t1 - t0).count() - reduce_seconds;
  times_.allreduce += reduce_seconds;
}

// Before layer i's forward: the inputs whose producers run on other rank
// sets, all in one exchange (one NCCL group on GPUs): each goes to a buffer
// of its own.
void Executor::exchange_inputs(int i) {
  Model& m = *model_;
  std::vector<int> slots;
  for (size_t s = 0; s < m.inputs(i).size(); ++s)
    if (!slots_.direct[i][s]) {
      queue_exchange(i, static_cast<int>(s), false, early_ ? Pieces::receives : Pieces::all);  // sent by send_outputs
      slots.push_back(static_cast<int>(s));
    }
  if (!slots.empty()) finish_exchanges(i, slots.front(), false);
}

// After layer i's backward: its input gradients back to their producers, in
// one exchange as long as the producers differ. Two slots of one producer
// write the same gradient, the second adding to the first, so the second
// waits for the first.
void Executor::exchange_input_gradients(int i) {
  Model& m = *model_;
  std::vector<int> pending;
  auto finish = [&] {
    if (pending.empty()) return;
    finish_exchanges(i, pending.front(), true);
    pending.clear();
  };
  for (size_t s = 0; s < m.inputs(i).size(); ++s) {
    const int p = m.inputs(i)[s];
    if (slots_.direct[i][s] || p == m.input_layer()) continue;
    if (early_) {  // sent now, received in the background, added in the order posted
      queue_exchange(i, static_cast<int>(s), true, Pieces::sends);
      sends_in_flight_.push_back(mover_->park());
      queue_exchange(i, static_cast<int>(s), true, Pieces::receives);
      gradients_in_flight_.push_back({p, i, static_cast<int>(s), mover_->park()});
      continue;
    }
    for (int q : pending)
      if (m.inputs(i)[q] == p) {
        finish();
        break;
      }
    queue_exchange(i, static_cast<int>(s), true);
    pending.push_back(static_cast<int>(s));
  }
  finish();
}

// Queues the pieces of one input slot. Forward: the producer's activations
// (its slicing) -> this layer's input buffer (its slicing). Backward: this
// layer's input gradient (its slicing) -> the producer's gradient (its
// slicing), overwriting or adding as the model's gradient contract says.
// Between the device's buffers, by its transport.
void Executor::queue_exchange(int layer, int slot, bool backward, Pieces which) {
  Model& m = *model_;
  const int p = m.inputs(layer)[slot];
  const size_t per = m.layer(p).output_shape().per_sample();
  const bool accumulate = backward && m.accumulates(layer, slot);
  const Slice mine_p = Plan::slice_of(sets_[p], rank_, batch_), mine_c = Plan::slice_of(sets_[layer], rank_, batch_);
  DeviceModel& buffers = *device_;
  using B = DeviceModel::Buffer;
  float* producer = nullptr;  // its activations forward, its gradient backward
  float* consumer = nullptr;  // this slot's input forward, its input gradient backward
  if (holds(p)) producer = buffers.address(backward ? B::gradient : B::activation, p, 0);
  if (holds(layer)) consumer = buffers.address(backward ? B::slot_gradient : B::slot_input, layer, slot);
  SliceMover& mover = *mover_;
  const int tag = tag_of(layer, slot, backward);
  const auto t0 = Clock::now();
  for (const Piece& piece : overlap_pieces(sets_[p], sets_[layer], batch_)) {
    if (piece.from != rank_ && piece.to != rank_) continue;
    const size_t n = piece.count * per;
    float* at_p = piece.from == rank_ ? producer + (piece.offset - mine_p.offset) * per : nullptr;
    float* at_c = piece.to == rank_ ? consumer + (piece.offset - mine_c.offset) * per : nullptr;
    // Backward reverses the roles: the consumer (piece.to) sends to the producer (piece.from).
    float* src = backward ? at_c : at_p;
    float* dst = backward ? at_p : at_c;
    if (which == Pieces::sends ? !src || dst : which == Pieces::receives && !dst) continue;
    if (src && dst)
      mover.keep(dst, src, n, accumulate);
    else if (src)
      mover.send(src, n, backward ? piece.from : piece.to, tag);
    else
      mover.receive(dst, n, backward ? piece.to : piece.from, tag, accumulate);
  }
  transfer_done(layer, t0, backward ? "send gradients of" : "send inputs of", slot);
}

void Executor::send_outputs(int p) {
  if (!early_ || !holds(p)) return;
  for (const auto& [layer, slot] : consumers_[p]) queue_exchange(layer, slot, false, Pieces::sends);
  sends_in_flight_.push_back(mover_->park());
}

void Executor::complete_gradients(int producer) {
  size_t last = gradients_in_flight_.size();
  for (size_t k = 0; k < gradients_in_flight_.size(); ++k)
    if (producer < 0 || gradients_in_flight_[k].producer == producer) last = k;
  if (last == gradients_in_flight_.size()) return;
  for (size_t k = 0; k <= last; ++k) {
    const GradientsInFlight& g = gradients_in_flight_[k];
    const auto t0 = Clock::now();
    mover_->complete(g.batch, &wait_sites_[g.layer][2 * g.slot + 1]);
    transfer_done(g.layer, t0, "wait for gradients of", g.slot);
  }
  gradients_in_flight_.erase(gradients_in_flight_.begin(), gradients_in_flight_.begin() + last + 1);
}

void Executor::finish_sends() {
  if (sends_in_flight_.empty()) return;
  const auto t0 = Clock::now();
  for (size_t batch : sends_in_flight_) mover_->complete(batch, nullptr);
  sends_in_flight_.clear();
  const auto t1 = Clock::now();
  if (traced()) tracer().span(Track::transfers, "sends delivered", t0, t1, true);
  times_.transfer += Seconds(t1 - t0).count();
}

void Executor::transfer_done(int layer, Clock::time_point t0, const char* what, int slot) {
  const auto t1 = Clock::now();
  if (traced())
    tracer().span(Track::transfers,
                  fmt::format("{} {}{}", what, model_->layer(layer).name(), slot < 0 ? "" : fmt::format(" slot {}", slot)),
                  t0, t1, true);
  times_.transfer += Seconds(t1 - t0).count();
  layer_times_[layer].transfer += Seconds(t1 - t0).count();
}

// Moves every piece queued for `layer` in this direction; `first_slot` names
// the wait site (wait.hpp).
void Executor::finish_exchanges(int layer, int first_slot, bool backward) {
  const auto t0 = Clock::now();
  mover_->finish(&wait_sites_[layer][2 * first_slot + (backward ? 1 : 0)]);
  transfer_done(layer, t0, backward ? "wait for gradients of" : "wait for inputs of", -1);
}

void Executor::share_from_owners(float* flat, size_t size, bool state_layout) {
  Model& m = *model_;
  std::vector<float> mine(size, 0.0f);
  for (int i = 0; i < m.size(); ++i) {
    if (sets_[i].front() != rank_) continue;
    const auto [offset, count] = state_layout ? m.state_range(i) : m.param_range(i);
    std::copy(flat + offset, flat + offset + count, mine.begin() + offset);
  }
  if (size > 0)
    BP_MPI_CHECK(MPI_Allreduce(mine.data(), flat, static_cast<int>(size), MPI_FLOAT, MPI_SUM, groups_->world()));
}

}  // namespace burstpool
