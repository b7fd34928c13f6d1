#include "cuda/gpu_model.hpp"

#include <algorithm>
#include <string>

#include "cuda/ops/kernels.hpp"
#include "layers/kernels.hpp"
#include "burstpool/spec.hpp"
#include "cuda/check.hpp"

namespace burstpool::cuda {

void sgd_kernel_launch(float* w, const float* g, float* v, size_t n, float lr, float mu, float wd, bool nesterov,
                       cudaStream_t stream);
void axpby_kernel_launch(float a, const float* x, float b, float* y, size_t n, cudaStream_t stream);

GpuModel::GpuModel(Model& host, std::unique_ptr<Context> owned) : GpuModel(host, *owned) { owned_context_ = std::move(owned); }

GpuModel::GpuModel(Model& host, Context& ctx) : host_(host), ctx_(ctx), stream_(ctx.work_stream()) {
  const Model& m = host_;
  params_ = device(m.param_count());
  grads_ = device(m.param_count());
  velocity_ = device(m.param_count());
  state_ = device(host_.state().size());
  const int cap = m.max_batch();
  size_t widest = 1;
  for (int i = 0; i < m.size(); ++i) {
    const size_t per = m.layer(i).output_shape().per_sample() * m.capacity(i);  // 0: not run here
    acts_.push_back(device(per));
    act_grads_.push_back(i == m.input_layer() ? nullptr : device(per));
    layer_n_.push_back(0);
    slot_in_.emplace_back(m.inputs(i).size(), nullptr);
    slot_grad_.emplace_back(m.inputs(i).size(), nullptr);
    widest = std::max<size_t>(widest, m.layer(i).output_shape().c);
    const bool bn = m.layer(i).kind() == LayerKind::batchnorm2d;
    has_batchnorm_ = has_batchnorm_ || bn;
    layer_mean_.push_back(bn ? device(m.layer(i).output_shape().c) : nullptr);
    layer_invstd_.push_back(bn ? device(m.layer(i).output_shape().c) : nullptr);
  }
  loss_ = device(1);
  prob_ = device(static_cast<size_t>(cap) * m.classes());
  labels_ = reinterpret_cast<int32_t*>(device(cap));
  loss_parts_ = reinterpret_cast<double*>(device(2 * static_cast<size_t>(cap)));  // cap doubles
  bn_sums_ = reinterpret_cast<double*>(device(2 * (2 * widest + 1)));
  BP_CUDA_CHECK(cudaMallocHost(&host_sums_, (2 * widest + 1) * sizeof(double)));
  keys_ = reinterpret_cast<uint64_t*>(device(2 * static_cast<size_t>(m.size())));
  BP_CUDA_CHECK(cudaMallocHost(&host_keys_, m.size() * sizeof(uint64_t)));
  upload();
}

GpuModel::~GpuModel() {
  drop_graphs();
  convs_.clear();
  pools_.clear();
  for (void* p : owned_) ctx_.allocator().deallocate(p);
  cudaFreeHost(host_sums_);
  cudaFreeHost(host_grads_);
  cudaFreeHost(host_keys_);
  if (layer_done_) cudaEventDestroy(layer_done_);
  if (sums_done_) cudaEventDestroy(sums_done_);
  for (cudaEvent_t e : piece_events_) cudaEventDestroy(e);
}

void GpuModel::set_pieces_in_flight(int pieces) {
  use_device();
  for (cudaEvent_t e : piece_events_) cudaEventDestroy(e);
  piece_events_.assign(static_cast<size_t>(std::max(1, pieces)) + 1, nullptr);
  for (cudaEvent_t& e : piece_events_) e = host_wait_event(ctx_.device());  // waited on by the host
  pieces_ = std::make_unique<PieceWindow<cudaEvent_t>>(
      pieces,
      [this] {
        cudaEvent_t e = piece_events_[next_piece_event_++ % piece_events_.size()];
        BP_CUDA_CHECK(cudaEventRecord(e, stream_));
        return e;
      },
      [](cudaEvent_t& e) { BP_CUDA_CHECK(cudaEventSynchronize(e)); });
}

void GpuModel::join_ranks(DeviceRanks ranks) {
  ranks_ = std::move(ranks);
  // NCCL allows one rank per GPU; gpus_are_distinct gives every rank the same answer.
  if (ranks_.allow_nccl && gpus_are_distinct(ranks_.comm, ctx_.device())) {
    nccl_ = std::make_unique<NcclGroup>(ranks_.comm);
    sync_stream_ = ctx_.stream(StreamRole::gradient_sync);
    BP_CUDA_CHECK(cudaEventCreateWithFlags(&layer_done_, cudaEventDisableTiming));
    sums_done_ = host_wait_event(ctx_.device());  // finish_gradient_sums waits on it
  } else {
    BP_CUDA_CHECK(cudaMallocHost(&host_grads_, std::max<size_t>(host_.param_count(), 1) * sizeof(float)));
  }
}

void GpuModel::write_dropout_keys(const burstpool::Context& ctx) {
  for (int i = 0; i < host_.size(); ++i)
    host_keys_[i] = host_.layer(i).kind() == LayerKind::dropout
                        ? cpu::dropout_step_key(ctx.seed, host_.layer(i).attrs().salt, ctx.step)
                        : 0;
  // host_keys_ is written again only after this step's final synchronisation.
  BP_CUDA_CHECK(cudaMemcpyAsync(keys_, host_keys_, host_.size() * sizeof(uint64_t), cudaMemcpyHostToDevice, stream_));
}

GpuModel::StepGraphs* GpuModel::step_graphs(const burstpool::Context& ctx) {
  const bool group_sums = ctx.sum_over_group && has_batchnorm_;  // they wait for the host
  if (!graphs_ || !ctx.training || group_sums || before_layer_ || nccl_) return nullptr;
  return &graphs_by_batch_[batch_];
}

void GpuModel::run_layers(cudaGraphExec_t* graph, bool* warm, const std::function<void()>& layers) {
  if (!graph) return layers();
  if (*graph) {
    BP_CUDA_CHECK(cudaGraphLaunch(*graph, stream_));
    return;
  }
  if (!*warm) {
    layers();
    *warm = true;
    return;
  }
  // Relaxed: an allocation the warm-up did not make may still happen (and stays cached).
  // The workspaces the graph uses stay out of the free lists until the graphs are dropped.
  BP_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  ctx_.allocator().hold_frees(true);
  cudaGraph_t captured = nullptr;
  try {
    layers();
  } catch (...) {
    ctx_.allocator().hold_frees(false);
    cudaStreamEndCapture(stream_, &captured);
    if (captured) cudaGraphDestroy(captured);
    throw;
  }
  ctx_.allocator().hold_frees(false);
  BP_CUDA_CHECK(cudaStreamEndCapture(stream_, &captured));
  const cudaError_t made = cudaGraphInstantiate(graph, captured, 0);
  cudaGraphDestroy(captured);
  BP_CUDA_CHECK(made);
  BP_CUDA_CHECK(cudaGraphLaunch(*graph, stream_));
}

void GpuModel::drop_graphs() {
  if (graphs_by_batch_.empty()) return;
  cudaStreamSynchronize(stream_);  // no replay still writes the held workspaces
  for (auto& [batch, g] : graphs_by_batch_) {
    if (g.forward) cudaGraphExecDestroy(g.forward);
    if (g.backward) cudaGraphExecDestroy(g.backward);
  }
  graphs_by_batch_.clear();
  ctx_.allocator().release_held();
}

float* GpuModel::input(int i, size_t k) const {
  return slot_in_[i][k] ? slot_in_[i][k] : acts_[host_.inputs(i)[k]];
}

float* GpuModel::input_grad(int i, size_t k) const {
  const int p = host_.inputs(i)[k];
  if (p == host_.input_layer()) return nullptr;
  return slot_grad_[i][k] ? slot_grad_[i][k] : act_grads_[p];
}

void GpuModel::use_slot_buffers(const std::vector<std::vector<bool>>& direct) {
  const Model& m = host_;
  for (int i = 0; i < m.size(); ++i)
    for (size_t k = 0; k < m.inputs(i).size(); ++k) {
      if (direct[i][k] || m.capacity(i) == 0) continue;
      const int p = m.inputs(i)[k];
      const size_t floats = m.layer(p).output_shape().per_sample() * m.capacity(i);
      slot_in_[i][k] = device(floats);
      if (p != m.input_layer()) slot_grad_[i][k] = device(floats);
    }
}

void GpuModel::upload_batch(const float* images, int images_n, const int32_t* labels, int labels_n,
                            const burstpool::Context& ctx) {
  const size_t in = static_cast<size_t>(images_n) * host_.sample_shape().per_sample();
  if (in > 0)
    BP_CUDA_CHECK(cudaMemcpyAsync(acts_[host_.input_layer()], images, in * sizeof(float), cudaMemcpyHostToDevice, stream_));
  if (ctx.precision == Precision::bf16) bf16_round(acts_[host_.input_layer()], acts_[host_.input_layer()], in, stream_);
  if (labels_n > 0)
    BP_CUDA_CHECK(cudaMemcpyAsync(labels_, labels, labels_n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  if (ctx.training) write_dropout_keys(ctx);
}

void GpuModel::load_input(const float* images, int images_n, const int32_t* labels, int labels_n,
                          const burstpool::Context& ctx) {
  use_device();
  upload_batch(images, images_n, labels, labels_n, ctx);
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));  // host_keys_ may be rewritten from here on
}

void GpuModel::download_to(float* host, const float* from, size_t floats) const {
  BP_CUDA_CHECK(cudaMemcpyAsync(host, from, floats * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::forward_layer(int layer, const burstpool::Context& ctx) {
  use_device();
  prepare_precision(ctx);
  layer_n_[layer] = host_.layer_batch(layer);
  next_piece();
  launch_forward(layer, ctx);
}

void GpuModel::backward_layer(int layer, const burstpool::Context& ctx) {
  use_device();
  prepare_precision(ctx);
  layer_n_[layer] = host_.layer_batch(layer);
  next_piece();
  launch_backward(layer, ctx);
}

float GpuModel::loss() {
  float loss = 0;
  download_to(&loss, loss_, 1);
  return loss;
}

DeviceTransport GpuModel::transport(const GroupCache& groups) {
  use_device();
  DeviceTransport t;
  int ranks = 1;
  MPI_Comm_size(groups.world(), &ranks);
  if (ranks == 1) return t;  // no one to move slices to: no one-rank NCCL communicator, no "between ranks"
  if (!gpus_are_distinct(groups.world(), ctx_.device())) {
    host_transport_ = true;
    return t;  // then through the host
  }
  nccl_transport_ = true;
  auto order = std::make_shared<NcclSequence>();
  t.slices = std::make_unique<NcclSliceMover>(std::make_unique<NcclGroup>(groups.world()), ctx_.device(), stream_,
                                              ctx_.allocator(), order);
  t.gradients = std::make_unique<NcclGroupReducer>(groups, ctx_.device(), stream_,
                                                   ctx_.stream(StreamRole::gradient_sync), order);
  return t;
}

float* GpuModel::address(Buffer what, int layer, int slot) {
  float* at = buffer(what, layer, slot);
  BP_CHECK(at, "layer {} slot {}: no such device buffer", layer, slot);
  return at;
}

float* GpuModel::buffer(Buffer what, int layer, int slot) const {
  switch (what) {
    case Buffer::activation: return acts_[layer];
    case Buffer::gradient: return act_grads_[layer];
    case Buffer::slot_input: return slot_in_[layer][slot];
    case Buffer::slot_gradient: return slot_grad_[layer][slot];
    case Buffer::parameter_gradient: return layer < 0 ? grads_ : grads_ + host_.param_range(layer).first;
    case Buffer::parameters: return layer < 0 ? params_ : params_ + host_.param_range(layer).first;
    case Buffer::state: return layer < 0 ? state_ : state_ + host_.state_range(layer).first;
    case Buffer::momentum: return layer < 0 ? velocity_ : nullptr;
    case Buffer::scratch_a:
    case Buffer::scratch_b:
    case Buffer::scratch_c:
    case Buffer::scratch_d: return layer < 0 ? scratch_[scratch_slot(what)] : nullptr;
  }
  return nullptr;
}

void GpuModel::copy_out(Buffer what, int layer, int slot, float* host, size_t floats) {
  if (floats == 0) return;
  use_device();  // flat() may make a scratch vector
  const float* from = layer < 0 ? flat(what) : buffer(what, layer, slot);
  BP_CHECK(from, "layer {} slot {}: no such device buffer", layer, slot);
  download(from, host, floats);
}

void GpuModel::copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) {
  if (floats == 0) return;
  use_device();
  float* to = layer < 0 ? flat(what) : buffer(what, layer, slot);
  BP_CHECK(to, "layer {} slot {}: no such device buffer", layer, slot);
  upload(to, host, floats);
}

void GpuModel::download(const float* device, float* host, size_t floats) {
  if (floats == 0) return;
  use_device();
  download_to(host, device, floats);
}

void GpuModel::upload(float* device, const float* host, size_t floats) {
  if (floats == 0) return;
  use_device();
  // From pageable memory: the copy has read `host` when this returns.
  BP_CUDA_CHECK(cudaMemcpyAsync(device, host, floats * sizeof(float), cudaMemcpyHostToDevice, stream_));
}

// The CUDA device is per thread: a background job's model runs in its own thread.
void GpuModel::use_device() const { BP_CUDA_CHECK(cudaSetDevice(ctx_.device())); }

void GpuModel::next_piece() {
  if (!before_layer_) return;
  if (pieces_)
    pieces_->piece_queued();  // the window decides how many pieces stay queued while the gate decides
  else
    BP_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the last piece is done before the gate decides on the next
  before_layer_();
}

void GpuModel::sum_over_group(double* sums, size_t count, const burstpool::Context& ctx) {
  if (!ctx.sum_over_group) return;
  BP_CUDA_CHECK(cudaMemcpyAsync(host_sums_, sums, count * sizeof(double), cudaMemcpyDeviceToHost, stream_));
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  ctx.sum_over_group(host_sums_, count);
  // The next use of host_sums_ copies into it behind this copy on the same stream.
  BP_CUDA_CHECK(cudaMemcpyAsync(sums, host_sums_, count * sizeof(double), cudaMemcpyHostToDevice, stream_));
}

void GpuModel::start_gradient_sum(int i) {
  const auto [offset, count] = host_.param_range(i);
  if (count == 0) return;
  BP_CUDA_CHECK(cudaEventRecord(layer_done_, stream_));
  BP_CUDA_CHECK(cudaStreamWaitEvent(sync_stream_, layer_done_, 0));
  nccl_->allreduce_sum(grads_ + offset, count, sync_stream_);
}

void GpuModel::finish_gradient_sums() {
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));  // backward's own work
  if (nccl_) {
    BP_CUDA_CHECK(cudaEventRecord(sums_done_, sync_stream_));
    BP_CUDA_CHECK(cudaStreamWaitEvent(stream_, sums_done_, 0));  // the optimizer reads summed gradients
    ranks_.reducing(true);
    BP_CUDA_CHECK(cudaEventSynchronize(sums_done_));
    ranks_.reducing(false);
    return;
  }
  if (!ranks_.host_sum) return;  // one rank
  const size_t n = host_.param_count();
  BP_CUDA_CHECK(cudaMemcpyAsync(host_grads_, grads_, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  ranks_.reducing(true);
  ranks_.host_sum(host_grads_, n);
  ranks_.reducing(false);
  BP_CUDA_CHECK(cudaMemcpyAsync(grads_, host_grads_, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

float* GpuModel::device(size_t floats) {
  void* p = ctx_.allocator().allocate(std::max<size_t>(floats, 1) * sizeof(float));
  BP_CUDA_CHECK(cudaMemsetAsync(p, 0, std::max<size_t>(floats, 1) * sizeof(float), stream_));
  owned_.push_back(p);
  return static_cast<float*>(p);
}

void GpuModel::upload() {
  BP_CUDA_CHECK(cudaMemcpyAsync(params_, host_.params().data(), host_.param_count() * sizeof(float),
                                cudaMemcpyHostToDevice, stream_));
  BP_CUDA_CHECK(cudaMemcpyAsync(state_, host_.state().data(), host_.state().size() * sizeof(float),
                                cudaMemcpyHostToDevice, stream_));
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::download() {
  BP_CUDA_CHECK(cudaMemcpyAsync(host_.params().data(), params_, host_.param_count() * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
  BP_CUDA_CHECK(cudaMemcpyAsync(host_.state().data(), state_, host_.state().size() * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::logits(float* host) {
  use_device();
  const int i = host_.logits_layer();
  download_to(host, acts_[i], static_cast<size_t>(layer_n_[i]) * host_.layer(i).output_shape().per_sample());
}

void GpuModel::to_host(float* velocity) {
  use_device();
  BP_CUDA_CHECK(cudaMemcpyAsync(velocity, velocity_, host_.param_count() * sizeof(float), cudaMemcpyDeviceToHost,
                                stream_));
  download();
}

void GpuModel::from_host(const float* velocity) {
  use_device();
  BP_CUDA_CHECK(cudaMemcpyAsync(velocity_, velocity, host_.param_count() * sizeof(float), cudaMemcpyHostToDevice,
                                stream_));
  upload();
}

void GpuModel::use_algorithm_cache(const std::string& path, bool writer) {
  cudaDeviceProp prop{};
  BP_CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx_.device()));
  algorithm_cache_ = std::make_unique<AlgorithmCache>(path, prop.name, static_cast<long>(cudnnGetVersion()), writer);
  if (!writer) return;  // one line per node
  if (!algorithm_cache_->refused().empty())
    fmt::print(stderr, "burstpool: warning: cudnn cache refused: {}; measuring again and rebuilding it\n",
               algorithm_cache_->refused());
  else if (algorithm_cache_->entries() > 0)
    fmt::print("cudnn cache {}: reusing the measured algorithms of {} convolution shape(s)\n", path,
               algorithm_cache_->entries());
}

std::string GpuModel::describe() const {
  cudaDeviceProp prop{};
  BP_CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx_.device()));
  // Between ranks: the whole-model path joined ranks, or the burst path asked for a transport.
  const char* between = nccl_ || nccl_transport_ ? ", NCCL between ranks"
                        : ranks_.host_sum || host_transport_ ? ", between ranks through host memory"
                                                             : "";
  return fmt::format("GPU {} ({}){}{}", ctx_.device(), prop.name, graphs_ ? ", CUDA graphs" : "", between);
}

void GpuModel::synchronize() {
  use_device();
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::gradients(float* host) const { download_to(host, grads_, host_.param_count()); }

float GpuModel::forward(int batch, const float* images, const int32_t* labels, const burstpool::Context& base) {
  use_device();
  BP_CHECK(batch >= 1 && batch <= host_.max_batch(), "batch {} outside 1..{}", batch, host_.max_batch());
  prepare_precision(base);
  batch_ = batch;
  upload_batch(images, batch, labels, batch, base);
  std::fill(layer_n_.begin(), layer_n_.end(), batch);
  StepGraphs* graphs = step_graphs(base);
  run_layers(graphs ? &graphs->forward : nullptr, graphs ? &graphs->forward_warm : nullptr, [&] {
    for (int i = 0; i < host_.size(); ++i)
      if (i != host_.input_layer()) {
        next_piece();
        launch_forward(i, base);
      }
  });
  return loss();
}

GpuModel::LayerView GpuModel::view(int i) const {
  const Layer& l = host_.layer(i);
  const auto& ins = host_.inputs(i);
  const Shape in = host_.layer(ins[0]).output_shape(), out = l.output_shape();
  return {l,
          l.attrs(),
          ins,
          layer_n_[i],
          in,
          out,
          out.per_sample() * layer_n_[i],
          input(i, 0),
          acts_[i],
          params_ + host_.param_range(i).first,
          host_.param_range(i).second};
}

// Parameters are laid out weight, then bias (when the layer has one).
float* GpuModel::LayerView::bias(float* base, size_t weights) const { return param_count > weights ? base + weights : nullptr; }

Geometry2d GpuModel::LayerView::geometry() const {
  Geometry2d g;
  g.n = n, g.c = in.c, g.h = in.h, g.w = in.w, g.oc = out.c;
  g.kh = attrs.kh, g.kw = attrs.kw, g.sh = attrs.sh, g.sw = attrs.sw, g.ph = attrs.ph, g.pw = attrs.pw;
  return g;
}

void GpuModel::prepare_precision(const burstpool::Context& ctx) {
  if (ctx.precision == Precision::bf16 && !bf16_weights_) bf16_weights_ = device(host_.param_count());
}

const float* GpuModel::product_weights(int i, const LayerView& v, size_t weights, const burstpool::Context& ctx) {
  if (ctx.precision != Precision::bf16) return v.p;
  float* rounded = bf16_weights_ + host_.param_range(i).first;
  bf16_round(v.p, rounded, weights, stream_);
  return rounded;
}

void GpuModel::launch_forward(int i, const burstpool::Context& ctx) {
  launch_layer_forward(i, ctx);
  const Layer& l = host_.layer(i);
  if (ctx.precision == Precision::bf16 && !l.is_loss())
    bf16_round(acts_[i], acts_[i], l.output_shape().per_sample() * layer_n_[i], stream_);
}

void GpuModel::launch_backward(int i, const burstpool::Context& ctx) {
  const Layer& l = host_.layer(i);
  if (ctx.precision == Precision::bf16 && !l.is_loss())  // the gradient it receives, complete now
    bf16_round(act_grads_[i], act_grads_[i], l.output_shape().per_sample() * layer_n_[i], stream_);
  launch_layer_backward(i, ctx);
}

void GpuModel::launch_layer_forward(int i, const burstpool::Context& ctx) {
  const LayerView v = view(i);
  const int n = v.n;
  const Shape &in = v.in, &out = v.out;
  float *x = v.x, *y = v.y, *p = v.p;
  float* s = state_ + host_.state_range(i).first;
  switch (v.layer.kind()) {
    case LayerKind::conv2d: {
      const Geometry2d geo = v.geometry();
      auto& conv = convs_[{i, n}];
      if (!conv) conv = std::make_unique<CudnnConv>(ctx_.cudnn(), geo, conv_algorithms_, tf32_, algorithm_cache_.get());
      conv->forward(x, product_weights(i, v, geo.weights(), ctx), v.bias(p, geo.weights()), y, ctx_.allocator(),
                    stream_);
      return;
    }
    case LayerKind::maxpool2d:
    case LayerKind::avgpool2d: {
      auto& pool = pools_[{i, n}];
      if (!pool) pool = std::make_unique<CudnnPool>(ctx_.cudnn(), v.geometry(), v.layer.kind() == LayerKind::maxpool2d);
      pool->forward(x, y, stream_);
      return;
    }
    case LayerKind::global_avgpool:
      return global_avgpool_forward(x, y, static_cast<size_t>(n) * in.c, in.h * in.w, stream_);
    case LayerKind::relu: return relu_forward(x, y, v.out_n, stream_);
    case LayerKind::flatten: return write_grad(y, x, v.out_n, false, stream_);
    case LayerKind::linear: {
      const int fin = static_cast<int>(in.per_sample()), fout = static_cast<int>(out.per_sample());
      const size_t weights = static_cast<size_t>(fin) * fout;
      return linear_forward(ctx_.cublas(), x, product_weights(i, v, weights, ctx), v.bias(p, weights), y, n, fin, fout,
                            stream_);
    }
    case LayerKind::dropout:
      if (!ctx.training || v.attrs.p == 0.0f) return write_grad(y, x, v.out_n, false, stream_);
      return dropout_apply(x, y, n, out.per_sample(), v.attrs.p, keys_ + i, ctx.sample_offset, false, stream_);
    case LayerKind::batchnorm2d: {
      const int c = in.c, hw = in.h * in.w;
      const float eps = v.attrs.eps;
      if (ctx.training) {
        bn_forward_sums(x, n, c, hw, bn_sums_, stream_);
        sum_over_group(bn_sums_, 2 * c + 1, ctx);
        bn_forward_finish(bn_sums_, c, eps, v.attrs.momentum, s, s + c, layer_mean_[i], layer_invstd_[i], stream_);
      } else {
        bn_eval_stats(s, s + c, c, eps, layer_mean_[i], layer_invstd_[i], stream_);
      }
      return bn_apply(x, p, p + c, layer_mean_[i], layer_invstd_[i], y, n, c, hw, stream_);
    }
    case LayerKind::add:
      write_grad(y, x, v.out_n, false, stream_);
      for (size_t k = 1; k < v.ins.size(); ++k) write_grad(y, input(i, k), v.out_n, true, stream_);
      return;
    case LayerKind::concat: {
      size_t offset = 0;
      for (size_t k = 0; k < v.ins.size(); ++k) {
        const size_t per = host_.layer(v.ins[k]).output_shape().per_sample();
        concat_forward_part(input(i, k), y, n, per, offset, out.per_sample(), stream_);
        offset += per;
      }
      return;
    }
    case LayerKind::softmax_cross_entropy:
      return softmax_xent_forward(x, labels_, prob_, loss_, loss_parts_, n, static_cast<int>(in.per_sample()), ctx.loss_scale,
                                  stream_);
    case LayerKind::input: break;  // never launched: its activations are the loaded batch
  }
  BP_CHECK(false, "layer '{}': no forward for type {} on the GPU", v.layer.name(), v.layer.type());
}

void GpuModel::backward(const burstpool::Context& ctx) {
  use_device();
  prepare_precision(ctx);
  StepGraphs* graphs = step_graphs(ctx);
  run_layers(graphs ? &graphs->backward : nullptr, graphs ? &graphs->backward_warm : nullptr, [&] {
    for (int i = host_.size() - 1; i >= 0; --i)
      if (i != host_.input_layer()) {
        next_piece();
        launch_backward(i, ctx);
        if (nccl_) start_gradient_sum(i);
      }
  });
  finish_gradient_sums();
}

void GpuModel::launch_layer_backward(int i, const burstpool::Context& ctx) {
  const LayerView v = view(i);
  const int n = v.n;
  const auto& ins = v.ins;
  const Shape &in = v.in, &out = v.out;
  float *x = v.x, *y = v.y, *p = v.p;
  float* dy = act_grads_[i];
  float* g = grads_ + host_.param_range(i).first;
  // Input gradient of slot k: none for the data layer.
  auto dx_of = [&](size_t k) { return input_grad(i, k); };
  // A slot buffer of its own is overwritten: the executor adds it to the producer's gradient.
  auto acc = [&](size_t k) { return !slot_grad_[i][k] && host_.accumulates(i, static_cast<int>(k)); };
  float* dx = dx_of(0);
  switch (v.layer.kind()) {
    case LayerKind::conv2d: {
      const Geometry2d geo = v.geometry();
      return convs_.at({i, n})->backward(x, product_weights(i, v, geo.weights(), ctx), dy, g, v.bias(g, geo.weights()),
                                         dx, acc(0), ctx_.allocator(), stream_);
    }
    case LayerKind::maxpool2d:
    case LayerKind::avgpool2d:
      if (dx) pools_.at({i, n})->backward(x, y, dy, dx, acc(0), stream_);
      return;
    case LayerKind::global_avgpool:
      if (dx) global_avgpool_backward(dy, dx, static_cast<size_t>(n) * in.c, in.h * in.w, acc(0), stream_);
      return;
    case LayerKind::relu:
      if (dx) relu_backward(x, dy, dx, v.out_n, acc(0), stream_);
      return;
    case LayerKind::flatten:
      if (dx) write_grad(dx, dy, v.out_n, acc(0), stream_);
      return;
    case LayerKind::linear: {
      const int fin = static_cast<int>(in.per_sample()), fout = static_cast<int>(out.per_sample());
      const size_t weights = static_cast<size_t>(fin) * fout;
      return linear_backward(ctx_.cublas(), x, product_weights(i, v, weights, ctx), dy, g, v.bias(g, weights), dx,
                             acc(0), n, fin, fout, stream_);
    }
    case LayerKind::dropout:
      if (!dx) return;
      if (!ctx.training || v.attrs.p == 0.0f) return write_grad(dx, dy, v.out_n, acc(0), stream_);
      return dropout_apply(dy, dx, n, out.per_sample(), v.attrs.p, keys_ + i, ctx.sample_offset, acc(0), stream_);
    case LayerKind::batchnorm2d: {
      const int c = in.c, hw = in.h * in.w;
      bn_backward_sums(x, dy, layer_mean_[i], layer_invstd_[i], n, c, hw, bn_sums_, g, g + c, stream_);
      if (dx && ctx.training) sum_over_group(bn_sums_, 2 * c + 1, ctx);  // as the CPU layer does
      if (dx)
        bn_backward_dx(x, dy, p, layer_mean_[i], layer_invstd_[i], bn_sums_, ctx.training, dx, acc(0), n, c, hw,
                       stream_);
      return;
    }
    case LayerKind::add:
      for (size_t k = 0; k < ins.size(); ++k)
        if (float* d = dx_of(k)) write_grad(d, dy, v.out_n, acc(k), stream_);
      return;
    case LayerKind::concat: {
      size_t offset = 0;
      for (size_t k = 0; k < ins.size(); ++k) {
        const size_t per = host_.layer(ins[k]).output_shape().per_sample();
        if (float* d = dx_of(k)) concat_backward_part(dy, d, n, per, offset, out.per_sample(), acc(k), stream_);
        offset += per;
      }
      return;
    }
    case LayerKind::softmax_cross_entropy:
      // d(loss)/d(loss) = 1, so the logit gradient is (p - onehot) * loss_scale.
      if (dx)
        softmax_xent_backward(prob_, labels_, static_cast<float>(ctx.loss_scale), dx, n,
                              static_cast<int>(in.per_sample()), acc(0), stream_);
      return;
    case LayerKind::input: return;  // no gradient for the data
  }
}

void GpuModel::sgd_step(float lr, const SgdOptions& o, const std::vector<std::pair<size_t, size_t>>& ranges) {
  use_device();
  for (const auto& [offset, count] : ranges)
    sgd_kernel_launch(params_ + offset, grads_ + offset, velocity_ + offset, count, lr, o.momentum, o.weight_decay,
                      o.nesterov, stream_);
  BP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuModel::axpby(float a, Buffer x, float b, Buffer y) {
  use_device();
  const float* xs = flat(x);
  float* ys = flat(y);
  axpby_kernel_launch(a, xs, b, ys, host_.param_count(), stream_);
}

float* GpuModel::flat(Buffer what) {
  if (scratch_slot(what) >= 0) {
    float*& s = scratch_[scratch_slot(what)];
    if (!s) {
      s = device(host_.param_count());
      BP_CUDA_CHECK(cudaMemsetAsync(s, 0, host_.param_count() * sizeof(float), stream_));
    }
    return s;
  }
  float* at = buffer(what, -1, 0);
  BP_CHECK(at, "no whole-model device vector {}", static_cast<int>(what));
  return at;
}

void GpuModel::set_tf32(bool on) {
  tf32_ = on;
  set_gemm_precision(ctx_.cublas(), on);
}

}  // namespace burstpool::cuda

namespace burstpool {

std::unique_ptr<DeviceModel> make_cuda_model(Model& model, int local_rank, const CudaOptions& options) {
  const StreamRole work = options.background ? StreamRole::background : StreamRole::foreground;
  auto gpu = std::make_unique<cuda::GpuModel>(model, std::make_unique<cuda::Context>(local_rank, work, options.wait));
  gpu->set_graphs(options.graphs);
  gpu->set_conv_algorithms(cuda::conv_algorithms(options.conv_algorithms));
  if (!options.cudnn_cache.empty()) gpu->use_algorithm_cache(options.cudnn_cache, local_rank == 0);
  // bf16 too: its products' inputs are bf16 values, which TF32 holds exactly.
  gpu->set_tf32(options.precision == "tf32" || options.precision == "bf16");
  if (options.background) gpu->set_pieces_in_flight(options.pieces_in_flight);
  return gpu;
}

}  // namespace burstpool
