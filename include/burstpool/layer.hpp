#pragma once
// The layer contract.
//
// A layer is a small object with explicit tensors. `infer` is called once with
// the per-sample input shapes (n = 1) and fixes the layer's shapes and
// parameters; afterwards `forward`/`backward` may run on any batch size. The
// public non-virtual methods check shapes and then call the virtual *_impl.
//
// Call order: `backward` must follow the `forward` of the same inputs; layers
// keep what backward needs from it (softmax, max positions, batch-norm
// statistics, Winograd transforms).
//
// Gradient contract: `backward` OVERWRITES the layer's parameter gradients, and
// for each input either overwrites or accumulates into the input gradient as
// its GradSlot says (the model decides: the first writer in backward order
// overwrites, later writers of a fanned-out tensor accumulate). A null slot
// means the input needs no gradient (data) and nothing is computed for it.
//
// Parameters, their gradients and non-trained state (batch-norm running
// statistics) are views into flat buffers owned by the Model, so a layer's
// gradients are one contiguous range for the allreduce.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "burstpool/spec.hpp"
#include "burstpool/tensor.hpp"

namespace burstpool {

enum class Init { zeros, ones, kaiming_uniform };

// The layer types make_layer knows. Code outside the registry
// (layers/registry.cpp, which maps each type name to one) compares kinds,
// never type names; a device answers DeviceModel::supports(kind).
enum class LayerKind {
  input, linear, conv2d, relu, dropout, maxpool2d, avgpool2d, global_avgpool, flatten, batchnorm2d, add, concat,
  softmax_cross_entropy
};
// The kind a type name stands for; empty for a name the registry lacks.
std::optional<LayerKind> layer_kind(const std::string& type);
const std::string& layer_kind_name(LayerKind kind);  // its type name in model files

// What a layer was built with, parsed once by its factory (layers/*.cpp,
// which hold the keys' defaults and checks): every backend reads these, and
// none parses a layer's keys again. Fields a kind does not use keep their
// initial values.
struct LayerAttrs {
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;  // conv2d, maxpool2d, avgpool2d: window, stride, padding
  float p = 0.0f;                                      // dropout: the probability of dropping
  uint64_t salt = 0;                                   // dropout: its mask stream (the layer's name hashed)
  float eps = 0.0f, momentum = 0.0f;                   // batchnorm2d
};

struct ParamSpec {
  std::string name;  // "weight", "bias", "running_mean", ...
  Shape shape;       // stored as (count, 1, 1, 1) unless a layer says otherwise
  Init init = Init::zeros;
  int fan_in = 1;    // for kaiming_uniform
};

// The layers' arithmetic ([job] precision; layers/bf16.hpp), on the CPU and
// in the CUDA model alike, which follows the same context.
// bf16: each layer's output and the gradient it receives are rounded to
// bf16, and linear and conv2d layers use their weights rounded to bf16
// (so their products take bf16 inputs and sum in fp32); the weights
// themselves, their gradients, batch-norm statistics and the loss stay fp32.
enum class Precision { fp32, bf16 };

// Per-step information the model passes to every layer.
struct Context {
  bool training = true;
  uint64_t seed = 0;           // job seed: dropout masks derive from it
  int64_t step = 0;            // training step: dropout masks change per step
  int64_t sample_offset = 0;   // global index of the first local sample
  const int32_t* labels = nullptr;  // local labels, for the loss layer
  double loss_scale = 1.0;     // the loss is sum(local losses) * loss_scale (1/global batch)
  Precision precision = Precision::fp32;
  // Sums `count` doubles over every rank holding the same layer (batch-norm
  // statistics under burst parallelism). Null: this rank holds the whole batch.
  std::function<void(double* values, size_t count)> sum_over_group;
};

struct GradSlot {
  Tensor* tensor = nullptr;  // null: no gradient wanted for this input
  bool accumulate = false;   // false: overwrite
};

class Layer {
 public:
  explicit Layer(const LayerSpec& spec) : name_(spec.name), type_(spec.type) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  LayerKind kind() const { return kind_; }
  const LayerAttrs& attrs() const { return attrs_; }

  // Fixes shapes from per-sample input shapes; returns the per-sample output
  // shape. Throws Error naming the layer when the inputs do not fit.
  Shape infer(const std::vector<Shape>& inputs);
  const std::vector<Shape>& input_shapes() const { return in_shapes_; }
  const Shape& output_shape() const { return out_shape_; }

  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual std::vector<ParamSpec> state_specs() const { return {}; }
  void bind(std::vector<Tensor> params, std::vector<Tensor> grads, std::vector<Tensor> state);
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<Tensor>& grads() const { return grads_; }
  const std::vector<Tensor>& state() const { return state_; }

  // Multiply-adds x2 of one sample's forward pass (for GFLOP/s reports).
  virtual double forward_flops() const { return 0.0; }
  // Bytes the layer itself allocates to run forward and backward on `batch`
  // samples with `threads` OpenMP threads, beyond its output, parameters and
  // gradients: what forward keeps for backward plus the peak scratch of one
  // call. For the memory estimate made before a run allocates anything.
  virtual uint64_t buffer_bytes(int /*batch*/, int /*threads*/) const { return 0; }
  // Bytes of scratch the layer takes, on top of buffer_bytes, from a pool the
  // thread shares with every other layer (reused call after call): the
  // estimate counts the largest such need among a model's layers, not the sum.
  virtual uint64_t shared_buffer_bytes(int /*batch*/, int /*threads*/) const { return 0; }
  // True for the loss layer: its output is one scalar (1,1,1,1) whatever the
  // batch, holding sum(per-sample loss) * Context::loss_scale.
  virtual bool is_loss() const { return false; }

  void forward(const std::vector<const Tensor*>& in, Tensor& out, const Context& ctx);
  void backward(const std::vector<const Tensor*>& in, const Tensor& out, const Tensor& dout,
                const std::vector<GradSlot>& din, const Context& ctx);

 protected:
  virtual Shape infer_impl(const std::vector<Shape>& inputs) = 0;
  virtual void forward_impl(const std::vector<const Tensor*>& in, Tensor& out, const Context& ctx) = 0;
  virtual void backward_impl(const std::vector<const Tensor*>& in, const Tensor& out,
                             const Tensor& dout, const std::vector<GradSlot>& din,
                             const Context& ctx) = 0;
  [[noreturn]] void fail_shape(const std::string& message) const;

  std::string name_, type_;
  LayerAttrs attrs_;  // filled by the constructors of the kinds that have any
  std::vector<Shape> in_shapes_;  // per sample (n = 1)
  Shape out_shape_;
  std::vector<Tensor> params_, grads_, state_;

 private:
  friend std::unique_ptr<Layer> make_layer(const LayerSpec& spec);
  // Runs `impl` with the context's precision: for bf16, a linear or conv2d
  // layer's weights (params_[0]) are a rounded copy while it runs.
  template <class Impl>
  void in_precision(const Context& ctx, Impl&& impl);
  LayerKind kind_ = LayerKind::input;  // set by make_layer, from the registry
  Tensor bf16_weight_;                 // the rounded copy (bf16, made at first use)
};

// Builds the layer a LayerSpec describes; throws Error naming file:line for
// unknown types and bad parameters.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec);
// The layer types make_layer knows, for messages and docs.
std::vector<std::string> layer_types();

}  // namespace burstpool
