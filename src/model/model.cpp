#include "burstpool/model.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "layers/bf16.hpp"
#include "layers/kernels.hpp"
#include "burstpool/error.hpp"

namespace burstpool {

std::string NamedTensor::path() const { return layer_name + "/" + name; }

namespace {

// Deterministic initial values that depend only on (seed, layer, param name),
// not on layer order or rank, so every rank builds the same initial model.
void initialise(const ParamSpec& p, Tensor& t, uint64_t seed, const std::string& layer) {
  float* v = t.data();
  const size_t n = t.size();
  switch (p.init) {
    case Init::zeros: t.fill(0.0f); break;
    case Init::ones: t.fill(1.0f); break;
    case Init::kaiming_uniform: {
      // He uniform: bound sqrt(6 / fan_in), suited to ReLU networks.
      const float bound = std::sqrt(6.0f / static_cast<float>(p.fan_in));
      const uint64_t key = cpu::mix64(seed ^ cpu::hash_name(layer + "/" + p.name));
      for (size_t i = 0; i < n; ++i) v[i] = (2.0f * cpu::uniform01(key + i) - 1.0f) * bound;
      break;
    }
  }
}

}  // namespace

Model::Model(const ModelSpec& spec, int max_batch, uint64_t init_seed)
    : Model(spec, [max_batch](const std::string&) { return max_batch; }, init_seed) {
  BP_CHECK(max_batch >= 1, "model batch {} must be >= 1", max_batch);
}

LayerGraph build_layer_graph(const ModelSpec& spec) {
  LayerGraph g;
  g.spec_index = spec.topological_order();
  const int n = static_cast<int>(g.spec_index.size());
  std::vector<int> position(n);
  for (int i = 0; i < n; ++i) position[g.spec_index[i]] = i;

  std::vector<int> consumers(n, 0);
  for (int i = 0; i < n; ++i) {
    const LayerSpec& ls = spec.layers[g.spec_index[i]];
    g.layers.push_back(make_layer(ls));
    std::vector<int> in;
    std::vector<Shape> shapes;
    for (const std::string& name : ls.inputs) {
      int p = position[spec.find(name)];
      in.push_back(p);
      shapes.push_back(g.layers[p]->output_shape());
      ++consumers[p];
      if (g.layers[p]->is_loss())
        throw Error(fmt::format("{}: layer '{}' takes the loss layer '{}' as input", ls.where("inputs").str(),
                                ls.name, name));
    }
    g.inputs.push_back(in);
    try {
      g.layers[i]->infer(shapes);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", ls.loc.str(), e.what()));
    }
    if (g.layers[i]->kind() == LayerKind::input) {
      if (g.input >= 0)
        throw Error(fmt::format("{}: a second input layer '{}' (one is allowed)", ls.loc.str(), ls.name));
      g.input = i;
    }
    if (g.layers[i]->is_loss()) {
      if (g.loss >= 0)
        throw Error(fmt::format("{}: a second loss layer '{}' (one is allowed)", ls.loc.str(), ls.name));
      g.loss = i;
    }
  }
  if (g.input < 0) throw Error(fmt::format("{}: the model has no layer of type 'input'", spec.source));
  if (g.loss < 0)
    throw Error(fmt::format("{}: the model has no loss layer (type 'softmax_cross_entropy')", spec.source));
  for (int i = 0; i < n; ++i)
    if (consumers[i] == 0 && i != g.loss) {
      const LayerSpec& ls = spec.layers[g.spec_index[i]];
      throw Error(fmt::format("{}: the output of layer '{}' is never used", ls.loc.str(), ls.name));
    }
  return g;
}

Model::Model(const ModelSpec& spec, const std::function<int(const std::string&)>& capacity, uint64_t init_seed)
    : spec_(spec) {
  LayerGraph graph = build_layer_graph(spec_);
  layers_ = std::move(graph.layers);
  spec_index_ = std::move(graph.spec_index);
  inputs_ = std::move(graph.inputs);
  input_ = graph.input;
  loss_ = graph.loss;
  const int n = size();

  // Backward visits layers in reverse and each layer's slots in order: the first
  // visit of a producer's gradient overwrites it, later ones accumulate.
  accumulate_.resize(n);
  std::vector<bool> written(n, false);
  for (int i = n - 1; i >= 0; --i) {
    accumulate_[i].resize(inputs_[i].size());
    for (size_t s = 0; s < inputs_[i].size(); ++s) {
      int p = inputs_[i][s];
      accumulate_[i][s] = written[p];
      written[p] = true;
    }
  }

  // Flat buffers: each layer's parameters are one contiguous range, in
  // topological order; their gradients mirror them.
  size_t nparams = 0, nstate = 0;
  for (auto& l : layers_) {
    for (const auto& p : l->param_specs()) nparams += p.shape.count();
    for (const auto& p : l->state_specs()) nstate += p.shape.count();
  }
  // Flat buffers are tensors, whose dimensions are ints: say so before any
  // allocation rather than wrapping around.
  constexpr size_t kMost = static_cast<size_t>(std::numeric_limits<int>::max());
  if (nparams > kMost || nstate > kMost)
    throw Error(fmt::format("{}: the model has {} parameters and {} state values; burstpool holds at most {} of each "
                            "per model",
                            spec_.source, nparams, nstate, kMost));
  params_ = Tensor::zeros({static_cast<int>(nparams), 1, 1, 1});
  grads_ = Tensor::zeros({static_cast<int>(nparams), 1, 1, 1});
  state_ = Tensor::zeros({static_cast<int>(nstate), 1, 1, 1});
  size_t po = 0, so = 0;
  for (int i = 0; i < n; ++i) {
    param_ranges_.emplace_back(po, 0);
    state_ranges_.emplace_back(so, 0);
    std::vector<Tensor> ps, gs, ss;
    const std::string& lname = layers_[i]->name();
    for (const auto& p : layers_[i]->param_specs()) {
      ps.push_back(params_.slice_flat(po, p.shape));
      gs.push_back(grads_.slice_flat(po, p.shape));
      initialise(p, ps.back(), init_seed, lname);
      named_.push_back({i, p.name, ps.back(), gs.back(), lname});
      po += p.shape.count();
    }
    for (const auto& p : layers_[i]->state_specs()) {
      ss.push_back(state_.slice_flat(so, p.shape));
      initialise(p, ss.back(), init_seed, lname);
      named_.push_back({i, p.name, ss.back(), Tensor(), lname});
      so += p.shape.count();
    }
    layers_[i]->bind(std::move(ps), std::move(gs), std::move(ss));
    param_ranges_[i].second = po - param_ranges_[i].first;
    state_ranges_[i].second = so - state_ranges_[i].first;
  }
  for (int i = 0; i < n; ++i) {
    capacity_.push_back(capacity(layers_[i]->name()));
    BP_CHECK(capacity_.back() >= 0, "layer '{}': negative capacity", layers_[i]->name());
    max_batch_ = std::max(max_batch_, capacity_.back());
  }
  allocate_activations();
}

Model::~Model() = default;

void Model::allocate_activations() {
  const int n = size();
  act_store_.assign(n, Tensor());
  grad_store_.assign(n, Tensor());
  for (int i = 0; i < n; ++i) {
    if (capacity_[i] == 0) continue;
    Shape s = layers_[i]->is_loss() ? Shape{1, 1, 1, 1} : layers_[i]->output_shape().with_batch(capacity_[i]);
    act_store_[i] = Tensor::zeros(s);
    if (i != input_) grad_store_[i] = Tensor::zeros(s);
  }
  loss_seed_ = Tensor::zeros({1, 1, 1, 1});
  loss_seed_.fill(1.0f);
  acts_.assign(n, Tensor());
  act_grads_.assign(n, Tensor());
  layer_batch_.assign(n, 0);
  for (int i = 0; i < n; ++i) set_layer_batch(i, capacity_[i]);
  batch_ = max_batch_;
}

void Model::set_layer_batch(int i, int n) {
  BP_CHECK(n >= 0 && n <= capacity_[i], "layer '{}': batch {} outside 0..{}", layers_[i]->name(), n, capacity_[i]);
  layer_batch_[i] = n;
  if (capacity_[i] == 0) return;
  Shape s = layers_[i]->is_loss() ? Shape{1, 1, 1, 1} : layers_[i]->output_shape().with_batch(n);
  acts_[i] = act_store_[i].view(s);
  act_grads_[i] = grad_store_[i].empty() ? Tensor() : grad_store_[i].view(s);
}

void Model::set_batch(int n) {
  BP_CHECK(n >= 1 && n <= max_batch_, "batch {} outside 1..{}", n, max_batch_);
  batch_ = n;
  for (int i = 0; i < size(); ++i) set_layer_batch(i, std::min(n, capacity_[i]));
}

int Model::find(const std::string& name) const {
  for (int i = 0; i < size(); ++i)
    if (layers_[i]->name() == name) return i;
  return -1;
}

void Model::load_batch(const float* images, Precision precision) {
  std::memcpy(acts_[input_].data(), images, acts_[input_].size() * sizeof(float));
  if (precision == Precision::bf16) bf16_round(acts_[input_].data(), acts_[input_].size());
}

void Model::forward_layer(int i, const Context& ctx) {
  std::vector<const Tensor*> in;
  for (int p : inputs_[i]) in.push_back(&acts_[p]);
  layers_[i]->forward(in, acts_[i], ctx);
}

void Model::backward_layer(int i, const Context& ctx) {
  if (i == input_) return;
  std::vector<const Tensor*> in;
  std::vector<GradSlot> din;
  for (size_t s = 0; s < inputs_[i].size(); ++s) {
    int p = inputs_[i][s];
    in.push_back(&acts_[p]);
    din.push_back({p == input_ ? nullptr : &act_grads_[p], static_cast<bool>(accumulate_[i][s])});
  }
  const Tensor& dout = (i == loss_) ? loss_seed() : act_grads_[i];
  layers_[i]->backward(in, acts_[i], dout, din, ctx);
}

float Model::forward(const Context& ctx) {
  for (int i = 0; i < size(); ++i) forward_layer(i, ctx);
  return acts_[loss_].data()[0];
}

void Model::backward(const Context& ctx) {
  for (int i = size() - 1; i >= 0; --i) backward_layer(i, ctx);
}

std::vector<NamedTensor> Model::param_views(const Tensor& flat) const {
  BP_CHECK(flat.size() == params_.size(), "buffer of {} floats is not laid out like {} parameters", flat.size(),
           params_.size());
  std::vector<NamedTensor> out;
  for (const NamedTensor& t : named_)
    if (!t.grad.empty())
      out.push_back({t.layer, t.name, flat.slice_flat(t.value.data() - params_.data(), t.value.shape()), Tensor(),
                     t.layer_name});
  return out;
}

std::vector<NamedTensor> Model::views(const Tensor& params, const Tensor& state) const {
  BP_CHECK(state.size() == state_.size(), "buffer of {} floats is not laid out like {} state values", state.size(),
           state_.size());
  std::vector<NamedTensor> out = param_views(params);
  for (const NamedTensor& t : named_)
    if (t.grad.empty())
      out.push_back({t.layer, t.name, state.slice_flat(t.value.data() - state_.data(), t.value.shape()), Tensor(),
                     t.layer_name});
  return out;
}

double Model::forward_flops_per_sample() const {
  double total = 0.0;
  for (const auto& l : layers_) total += l->forward_flops();
  return total;
}

}  // namespace burstpool
