#include "burstpool/executor.hpp"

#include <chrono>
#include <cstring>

#include "../comm/communicator.hpp"
#include "../comm/exchange.hpp"
#include "../comm/grad_sync.hpp"
#include "../comm/wait.hpp"
#include "burstpool/error.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;

// Point-to-point tags: one per (layer, input slot, direction).
constexpr int kMaxSlots = 64;
int tag_of(int layer, int slot, bool backward) { return (layer * kMaxSlots + slot) * 2 + (backward ? 1 : 0); }

}  // namespace

Executor::Executor(const ModelSpec& spec, const Plan& plan, MPI_Comm world, uint64_t init_seed, size_t bucket_bytes)
    : plan_(plan) {
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
  direct_.resize(n);
  in_.resize(n);
  in_grad_.resize(n);
  for (int i = 0; i < n; ++i) {
    const auto& inputs = m.inputs(i);
    BP_CHECK(inputs.size() <= static_cast<size_t>(kMaxSlots), "layer '{}' has more than {} inputs", m.layer(i).name(),
             kMaxSlots);
    for (size_t s = 0; s < inputs.size(); ++s) {
      const int p = inputs[s];
      direct_[i].push_back(sets_[p] == sets_[i]);
      Tensor buffer, grad;
      if (!direct_[i][s] && holds(i)) {
        const Shape shape = m.layer(p).output_shape().with_batch(m.capacity(i));
        buffer = Tensor::zeros(shape);
        if (p != m.input_layer()) grad = Tensor::zeros(shape);
      }
      in_[i].push_back(buffer);
      in_grad_[i].push_back(grad);
    }
    if (holds(i) && m.param_range(i).second > 0) held_ranges_.push_back(m.param_range(i));
  }
  wait_sites_.resize(n);
  for (int i = 0; i < n; ++i) wait_sites_[i].resize(2 * m.inputs(i).size());
  sync_ = std::make_unique<GradientSync>(m.grads().data(), bucket_bytes);
  layer_times_.resize(n);
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

void Executor::use_device(std::unique_ptr<DeviceModel> device, bool background) {
  device_ = std::move(device);
  device_->set_before_layer(before_layer_);
  whole_on_device_ = true;
  for (const RankSet& set : sets_) whole_on_device_ = whole_on_device_ && static_cast<int>(set.size()) == plan_.ranks;
  on_host_.assign(model_->size(), false);
  if (!whole_on_device_) return device_->use_slot_buffers(direct_);
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
  ranks.allow_nccl = !background;
  device_->join_ranks(std::move(ranks));
}

void Executor::set_before_layer(std::function<void()> hook) {
  before_layer_ = std::move(hook);
  if (device_) device_->set_before_layer(before_layer_);
}

double Executor::forward(int batch, const float* images, const int32_t* labels, const Context& base) {
  BP_CHECK(batch >= 1 && batch <= plan_.global_batch, "batch {} outside 1..{}", batch, plan_.global_batch);
  Model& m = *model_;
  batch_ = batch;
  labels_ = labels;
  for (int i = 0; i < m.size(); ++i) m.set_layer_batch(i, Plan::slice_of(sets_[i], rank_, batch).count);
  if (device_ && whole_on_device_) {
    // Every layer has the input layer's rank set and slicing (use_device).
    const int count = input_slice(batch).count;
    if (count == 0 && !base.training) return 0;  // a small last evaluation batch; evaluation sums nothing
    double reduce_seconds = 0;
    const Context ctx = layer_context(m.input_layer(), base, &reduce_seconds);
    const auto t0 = Clock::now();
    const double loss = device_->forward(count, images, labels, ctx);
    if (!base.training) device_->logits(m.activation(m.logits_layer()).data());  // evaluation reads them
    times_.compute += seconds_since(t0) - reduce_seconds;
    times_.allreduce += reduce_seconds;
    return loss;
  }
  // The host copy of the input also feeds slices sent from the input layer on the device path.
  if (holds(m.input_layer()) && m.layer_batch(m.input_layer()) > 0) m.load_batch(images);
  if (device_) {
    device_->load_input(images, m.layer_batch(m.input_layer()), labels, m.layer_batch(m.loss_layer()), base);
    std::fill(on_host_.begin(), on_host_.end(), false);
    on_host_[m.input_layer()] = true;
  }
  double loss = 0;
  for (int i = 0; i < m.size(); ++i) {
    for (size_t s = 0; s < m.inputs(i).size(); ++s)
      if (!direct_[i][s]) {
        if (device_) activation_to_host(m.inputs(i)[s]);
        exchange_forward(i, static_cast<int>(s), batch);
        if (device_ && holds(i)) copy_slot_in(i, static_cast<int>(s));
      }
    // A held layer runs even on 0 samples (a small last evaluation batch), so
    // its group reductions (batch norm) still match across the group.
    if (!holds(i) || i == m.input_layer()) continue;
    if (device_) {
      if (m.layer_batch(i) == 0 && !base.training) continue;  // evaluation sums nothing over the group
      timed_layer(i, base, [&](const Context& ctx) { device_->forward_layer(i, ctx); });
      if (i == m.loss_layer()) loss = device_->loss();
      if (i == m.logits_layer() && !base.training)  // evaluation reads them
        device_->copy_out(DeviceModel::Buffer::activation, i, 0, m.activation(i).data(), m.activation(i).size());
    } else {
      forward_on_cpu(i, base);
      if (i == m.loss_layer()) loss = m.activation(i).data()[0];
    }
  }
  return loss;
}

void Executor::forward_on_cpu(int i, const Context& base) {
  Model& m = *model_;
  std::vector<const Tensor*> in;
  std::vector<Tensor> views;
  views.reserve(m.inputs(i).size());
  for (size_t s = 0; s < m.inputs(i).size(); ++s) {
    const int p = m.inputs(i)[s];
    if (direct_[i][s]) {
      in.push_back(&m.activation(p));
    } else {
      views.push_back(in_[i][s].view(m.layer(p).output_shape().with_batch(m.layer_batch(i))));
      in.push_back(&views.back());
    }
  }
  if (before_layer_) before_layer_();
  timed_layer(i, base, [&](const Context& ctx) { m.layer(i).forward(in, m.activation(i), ctx); });
}

void Executor::timed_layer(int i, const Context& base, const std::function<void(const Context&)>& run) {
  double reduce_seconds = 0;
  const Context ctx = layer_context(i, base, &reduce_seconds);
  const auto t0 = Clock::now();
  run(ctx);
  times_.compute += seconds_since(t0) - reduce_seconds;
  times_.allreduce += reduce_seconds;
  layer_times_[i].allreduce += reduce_seconds;
}

void Executor::backward(const Context& base) {
  Model& m = *model_;
  if (device_ && whole_on_device_) {
    double reduce_seconds = 0;
    device_reduce_seconds_ = 0;
    const Context ctx = layer_context(m.input_layer(), base, &reduce_seconds);
    const auto t0 = Clock::now();
    device_->backward(ctx);  // and the gradient sums
    reduce_seconds += device_reduce_seconds_;
    times_.compute += seconds_since(t0) - reduce_seconds;
    times_.allreduce += reduce_seconds;
    return;
  }

  for (int i = m.size() - 1; i >= 0; --i) {
    if (holds(i) && i != m.input_layer()) {
      const auto [offset, count] = m.param_range(i);
      const Communicator& group = groups_->group(sets_[i]);
      if (device_) {
        timed_layer(i, base, [&](const Context& ctx) { device_->backward_layer(i, ctx); });
        if (count > 0 && group.size() > 1)  // summed on the host, uploaded after finish()
          device_->copy_out(DeviceModel::Buffer::parameter_gradient, i, 0, m.grads().data() + offset, count);
      } else {
        backward_on_cpu(i, base);
      }
      sync_->layer_ready(offset, count, group);
      if (per_layer_allreduce_) {
        const double waited = sync_->finish();
        times_.allreduce += waited;
        layer_times_[i].allreduce += waited;
      }
    }
    for (size_t s = 0; s < m.inputs(i).size(); ++s)
      if (!direct_[i][s] && m.inputs(i)[s] != m.input_layer()) {
        if (device_) gradients_to_host(i, static_cast<int>(s));
        exchange_backward(i, static_cast<int>(s), batch_);
        if (device_) gradient_to_device(m.inputs(i)[s]);
      }
    const auto t1 = Clock::now();
    sync_->progress();
    times_.allreduce += seconds_since(t1);
  }
  const int before = sync_->buckets_started();
  if (reduce_flag_) reduce_flag_->store(true);
  times_.allreduce += sync_->finish();
  if (reduce_flag_) reduce_flag_->store(false);
  buckets_ = sync_->buckets_started() - before;
  if (device_)
    for (int i = 0; i < m.size(); ++i) {
      const auto [offset, count] = m.param_range(i);
      if (holds(i) && count > 0 && groups_->group(sets_[i]).size() > 1)
        device_->copy_in(DeviceModel::Buffer::parameter_gradient, i, 0, m.grads().data() + offset, count);
    }
}

void Executor::backward_on_cpu(int i, const Context& base) {
  Model& m = *model_;
  std::vector<const Tensor*> in;
  std::vector<GradSlot> slots;
  std::vector<Tensor> views, grad_views;
  views.reserve(m.inputs(i).size());
  grad_views.reserve(m.inputs(i).size());
  for (size_t s = 0; s < m.inputs(i).size(); ++s) {
    const int p = m.inputs(i)[s];
    const bool data = p == m.input_layer();
    if (direct_[i][s]) {
      in.push_back(&m.activation(p));
      slots.push_back({data ? nullptr : &m.gradient(p), m.accumulates(i, static_cast<int>(s))});
    } else {
      const Shape shape = m.layer(p).output_shape().with_batch(m.layer_batch(i));
      views.push_back(in_[i][s].view(shape));
      in.push_back(&views.back());
      if (data) {
        slots.push_back({nullptr, false});
      } else {
        grad_views.push_back(in_grad_[i][s].view(shape));
        slots.push_back({&grad_views.back(), false});  // sent back, then overwritten or added there
      }
    }
  }
  if (before_layer_) before_layer_();
  const Tensor& dout = i == m.loss_layer() ? m.loss_seed() : m.gradient(i);
  timed_layer(i, base, [&](const Context& ctx) { m.layer(i).backward(in, m.activation(i), dout, slots, ctx); });
}

// Device path of burst plans: slices move between ranks through the host
// Model's buffers, which the exchanges read and write as on the CPU path.
void Executor::activation_to_host(int layer) {
  Model& m = *model_;
  if (on_host_[layer] || !holds(layer)) return;
  device_->copy_out(DeviceModel::Buffer::activation, layer, 0, m.activation(layer).data(), m.activation(layer).size());
  on_host_[layer] = true;  // once per step, however many consumers read it
}

void Executor::copy_slot_in(int layer, int slot) {
  Model& m = *model_;
  const size_t floats = m.layer(m.inputs(layer)[slot]).output_shape().per_sample() * m.layer_batch(layer);
  device_->copy_in(DeviceModel::Buffer::slot_input, layer, slot, in_[layer][slot].data(), floats);
}

// Before exchange_backward of (layer, slot): the slot's input gradient, and
// the producer's gradient when the exchange adds to what earlier consumers
// left there (the Model's accumulate contract).
void Executor::gradients_to_host(int layer, int slot) {
  Model& m = *model_;
  const int p = m.inputs(layer)[slot];
  const size_t per = m.layer(p).output_shape().per_sample();
  if (holds(layer))
    device_->copy_out(DeviceModel::Buffer::slot_gradient, layer, slot, in_grad_[layer][slot].data(),
                      per * m.layer_batch(layer));
  if (holds(p) && m.accumulates(layer, slot))
    device_->copy_out(DeviceModel::Buffer::gradient, p, 0, m.gradient(p).data(), m.gradient(p).size());
}

void Executor::gradient_to_device(int producer) {
  Model& m = *model_;
  if (holds(producer))
    device_->copy_in(DeviceModel::Buffer::gradient, producer, 0, m.gradient(producer).data(), m.gradient(producer).size());
}

// Producer activations (its slicing) -> this layer's input buffer (its slicing).
void Executor::exchange_forward(int layer, int slot, int batch) {
  Model& m = *model_;
  const int p = m.inputs(layer)[slot];
  const size_t per = m.layer(p).output_shape().per_sample();
  const Slice mine_p = Plan::slice_of(sets_[p], rank_, batch), mine_c = Plan::slice_of(sets_[layer], rank_, batch);
  const auto t0 = Clock::now();
  std::vector<MPI_Request> requests;
  MPI_Comm world = groups_->world();
  for (const Piece& piece : overlap_pieces(sets_[p], sets_[layer], batch)) {
    if (piece.from != rank_ && piece.to != rank_) continue;
    const int n = static_cast<int>(piece.count * per);
    float* src = piece.from == rank_ ? m.activation(p).data() + (piece.offset - mine_p.offset) * per : nullptr;
    float* dst = piece.to == rank_ ? in_[layer][slot].data() + (piece.offset - mine_c.offset) * per : nullptr;
    MPI_Request r;
    if (src && dst) {
      std::memcpy(dst, src, sizeof(float) * n);
    } else if (src) {
      BP_MPI_CHECK(MPI_Isend(src, n, MPI_FLOAT, piece.to, tag_of(layer, slot, false), world, &r));
      requests.push_back(r);
    } else {
      BP_MPI_CHECK(MPI_Irecv(dst, n, MPI_FLOAT, piece.from, tag_of(layer, slot, false), world, &r));
      requests.push_back(r);
    }
  }
  wait_all(static_cast<int>(requests.size()), requests.data(), &wait_sites_[layer][2 * slot]);
  times_.transfer += seconds_since(t0);
  layer_times_[layer].transfer += seconds_since(t0);
}

// This layer's input gradient (its slicing) -> the producer's gradient (its
// slicing), overwriting or adding as the model's gradient contract says.
void Executor::exchange_backward(int layer, int slot, int batch) {
  Model& m = *model_;
  const int p = m.inputs(layer)[slot];
  const size_t per = m.layer(p).output_shape().per_sample();
  const bool accumulate = m.accumulates(layer, slot);
  const Slice mine_p = Plan::slice_of(sets_[p], rank_, batch), mine_c = Plan::slice_of(sets_[layer], rank_, batch);
  const auto t0 = Clock::now();
  std::vector<MPI_Request> requests;
  std::vector<std::pair<float*, std::vector<float>>> received;  // destination, data
  MPI_Comm world = groups_->world();
  const auto pieces = overlap_pieces(sets_[p], sets_[layer], batch);
  received.reserve(pieces.size());
  for (const Piece& piece : pieces) {
    if (piece.from != rank_ && piece.to != rank_) continue;
    const int n = static_cast<int>(piece.count * per);
    // Reversed roles: the consumer (piece.to) sends its gradient to the producer (piece.from).
    float* src = piece.to == rank_ ? in_grad_[layer][slot].data() + (piece.offset - mine_c.offset) * per : nullptr;
    float* dst = piece.from == rank_ ? m.gradient(p).data() + (piece.offset - mine_p.offset) * per : nullptr;
    MPI_Request r;
    if (src && dst) {
      for (int k = 0; k < n; ++k) dst[k] = accumulate ? dst[k] + src[k] : src[k];
    } else if (src) {
      BP_MPI_CHECK(MPI_Isend(src, n, MPI_FLOAT, piece.from, tag_of(layer, slot, true), world, &r));
      requests.push_back(r);
    } else {
      received.emplace_back(dst, std::vector<float>(n));
      BP_MPI_CHECK(MPI_Irecv(received.back().second.data(), n, MPI_FLOAT, piece.to, tag_of(layer, slot, true), world, &r));
      requests.push_back(r);
    }
  }
  wait_all(static_cast<int>(requests.size()), requests.data(), &wait_sites_[layer][2 * slot + 1]);
  for (auto& [dst, data] : received)
    for (size_t k = 0; k < data.size(); ++k) dst[k] = accumulate ? dst[k] + data[k] : data[k];
  times_.transfer += seconds_since(t0);
  layer_times_[layer].transfer += seconds_since(t0);
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
