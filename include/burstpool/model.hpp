#pragma once
// A Model is one trainable instance of a ModelSpec on this rank: its layers in
// topological order, flat parameter/gradient/state buffers, and activations
// for up to `max_batch` samples. Several Models may live in one process (more
// learners per rank, a background job); they share nothing.
//
// Gradients are sums over the local samples of the loss scaled by
// Context::loss_scale (1 / global batch), so adding them over ranks gives the
// gradient of the mean loss over the global batch.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "burstpool/layer.hpp"
#include "burstpool/spec.hpp"

namespace burstpool {

struct NamedTensor {
  int layer;          // topological position
  std::string name;   // "weight", "running_mean", ...
  Tensor value;
  Tensor grad;        // empty for non-trained state
  std::string path() const;  // "<layer>/<name>", set by the Model
  std::string layer_name;
};

// A model's layers in topological order, their shapes inferred and their
// producers listed, checked (one input, one loss, every output used); nothing
// is allocated beyond the layer objects. Model builds on it, and the memory
// estimate reads shapes from it before a run allocates anything large.
// Throws Error naming the file and line of a bad layer.
struct LayerGraph {
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<int> spec_index;           // topological position -> spec index
  std::vector<std::vector<int>> inputs;  // producers by topological position
  int input = -1, loss = -1;
};
LayerGraph build_layer_graph(const ModelSpec& spec);

class Model {
 public:
  // Every layer holds activations for up to max_batch samples.
  Model(const ModelSpec& spec, int max_batch, uint64_t init_seed);
  // Layer `name` holds activations for up to capacity(name) samples; 0 means
  // this rank does not run it (no activation memory; parameters still exist
  // so every rank has the same flat layout).
  Model(const ModelSpec& spec, const std::function<int(const std::string&)>& capacity, uint64_t init_seed);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelSpec& spec() const { return spec_; }
  int size() const { return static_cast<int>(layers_.size()); }
  Layer& layer(int i) { return *layers_[i]; }
  const Layer& layer(int i) const { return *layers_[i]; }
  const LayerSpec& layer_spec(int i) const { return spec_.layers[spec_index_[i]]; }
  const std::vector<int>& inputs(int i) const { return inputs_[i]; }
  int find(const std::string& name) const;  // topological position, -1 if absent
  int input_layer() const { return input_; }
  int loss_layer() const { return loss_; }
  int logits_layer() const { return inputs_[loss_][0]; }
  Shape sample_shape() const { return layers_[input_]->output_shape(); }
  int classes() const { return static_cast<int>(layers_[logits_layer()]->output_shape().per_sample()); }

  int max_batch() const { return max_batch_; }  // the largest layer capacity
  int batch() const { return batch_; }
  void set_batch(int n);  // every layer: 0 < n <= its capacity; re-views activations, no allocation
  int capacity(int i) const { return capacity_[i]; }
  int layer_batch(int i) const { return layer_batch_[i]; }
  void set_layer_batch(int i, int n);  // 0 <= n <= capacity(i)
  // Whether backward of layer i adds into (true) or overwrites (false) the
  // gradient of its input slot s: the first writer in backward order overwrites.
  bool accumulates(int i, int s) const { return accumulate_[i][s]; }
  // [offset, offset + count) of layer i's parameters in params()/grads().
  std::pair<size_t, size_t> param_range(int i) const { return param_ranges_[i]; }
  std::pair<size_t, size_t> state_range(int i) const { return state_ranges_[i]; }

  Tensor& activation(int i) { return acts_[i]; }
  Tensor& gradient(int i) { return act_grads_[i]; }  // empty for the input layer
  const Tensor& loss_seed() const { return loss_seed_; }  // d(loss)/d(loss) = 1, the loss layer's output gradient
  // batch() samples into the input layer; in bf16 rounded to bf16 as the
  // input layer's forward rounds its output (and the GPU its upload), so the
  // paths that skip that layer's forward (the executor, the twin) train the
  // same numbers as Model::forward.
  void load_batch(const float* images, Precision precision = Precision::fp32);

  void forward_layer(int i, const Context& ctx);
  void backward_layer(int i, const Context& ctx);
  float forward(const Context& ctx);  // every layer; returns the loss layer's output
  void backward(const Context& ctx);  // every layer, in reverse; seeds d(loss) = 1

  Tensor& params() { return params_; }
  Tensor& grads() { return grads_; }
  Tensor& state() { return state_; }
  const std::vector<NamedTensor>& tensors() const { return named_; }  // params and state, by layer
  // Views of `flat` (laid out like params(), e.g. optimizer velocity), named like the parameters.
  std::vector<NamedTensor> param_views(const Tensor& flat) const;
  // Views named like tensors(): parameters in `params` (laid out like
  // params()), state in `state` (laid out like state(); may be empty when
  // the model has none). For writing another copy of the model's values.
  std::vector<NamedTensor> views(const Tensor& params, const Tensor& state) const;
  size_t param_count() const { return params_.size(); }
  double forward_flops_per_sample() const;

 private:
  void allocate_activations();

  const ModelSpec spec_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int> spec_index_;              // topological position -> spec index
  std::vector<std::vector<int>> inputs_;     // producers by topological position
  std::vector<std::vector<bool>> accumulate_;  // per input slot: accumulate into its gradient
  int input_ = -1, loss_ = -1;
  int max_batch_ = 0, batch_ = 0;
  std::vector<int> capacity_, layer_batch_;
  std::vector<std::pair<size_t, size_t>> param_ranges_, state_ranges_;
  Tensor params_, grads_, state_;
  std::vector<NamedTensor> named_;
  std::vector<Tensor> act_store_, grad_store_;  // full-capacity buffers
  std::vector<Tensor> acts_, act_grads_;        // views for the current batch
  Tensor loss_seed_;                            // d(loss)/d(loss) = 1
};

}  // namespace burstpool
