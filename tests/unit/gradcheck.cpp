#include "gradcheck.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "layers/kernels.hpp"

namespace burstpool::testing {
namespace {

void fill_random(Tensor& t, uint64_t key, Values values) {
  float* v = t.data();
  const size_t n = t.size();
  if (values == Values::smooth) {
    for (size_t i = 0; i < n; ++i) v[i] = 2.0f * cpu::uniform01(key + i) - 1.0f;
    return;
  }
  // A shuffled ladder of distinct values step apart, symmetric about zero and
  // at least step/2 from it (step >= 0.05 > 2h): no finite-difference step
  // crosses a ReLU kink or reorders a max.
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t i = n - 1; i > 0 && n > 1; --i) std::swap(perm[i], perm[cpu::mix64(key + i) % (i + 1)]);
  const float step = std::max(0.05f, 3.0f / static_cast<float>(n));
  for (size_t i = 0; i < n; ++i) v[i] = step * (static_cast<float>(perm[i]) - static_cast<float>(n / 2) - 0.5f);
}

}  // namespace

LayerRig::LayerRig(const LayerCase& c) {
  LayerSpec spec;
  spec.name = "under_test";
  spec.type = c.type;
  spec.attrs = c.attrs;
  spec.loc = {"test", 0};
  layer = make_layer(spec);
  std::vector<Shape> shapes;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inputs.push_back(Tensor::zeros(c.inputs[i]));
    fill_random(inputs.back(), cpu::mix64(c.seed + 100 * i), c.values);
    shapes.push_back(c.inputs[i]);
  }
  const int n = c.inputs.empty() ? 1 : c.inputs[0].n;
  Shape out_shape = layer->infer(shapes);
  for (const ParamSpec& p : layer->param_specs()) {
    params.push_back(Tensor::zeros(p.shape));
    grads.push_back(Tensor::zeros(p.shape));
    fill_random(params.back(), cpu::mix64(c.seed + 7 + params.size()), Values::smooth);
  }
  for (const ParamSpec& p : layer->state_specs()) {
    state.push_back(Tensor::zeros(p.shape));
    Tensor& s = state.back();
    for (size_t i = 0; i < s.size(); ++i)  // positive values work for running mean and variance alike
      s.data()[i] = 0.5f + cpu::uniform01(cpu::mix64(c.seed + 31) + i);
  }
  layer->bind(params, grads, state);
  out = Tensor::zeros(layer->is_loss() ? Shape{1, 1, 1, 1} : out_shape.with_batch(n));
  weights_r = Tensor::zeros(out.shape());
  fill_random(weights_r, cpu::mix64(c.seed + 99), Values::smooth);
  if (layer->is_loss()) {
    const int k = static_cast<int>(shapes[0].per_sample());
    for (int i = 0; i < n; ++i) labels.push_back(static_cast<int32_t>(cpu::mix64(c.seed + 5 + i) % k));
    ctx.labels = labels.data();
    ctx.loss_scale = 1.0 / n;
  }
  ctx.training = c.training;
  ctx.seed = c.seed;
  ctx.step = 3;
}

double LayerRig::loss() {
  std::vector<const Tensor*> in;
  for (auto& t : inputs) in.push_back(&t);
  // Batch-norm running statistics change on every training forward; restore
  // them so repeated evaluations see the same layer.
  std::vector<std::vector<float>> saved;
  for (auto& s : state) saved.emplace_back(s.data(), s.data() + s.size());
  layer->forward(in, out, ctx);
  for (size_t i = 0; i < state.size(); ++i) std::copy(saved[i].begin(), saved[i].end(), state[i].data());
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out.data()[i]) * weights_r.data()[i];
  return sum;
}

void LayerRig::backward(std::vector<Tensor>& din, bool accumulate) {
  std::vector<const Tensor*> in;
  std::vector<GradSlot> slots;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(&inputs[i]);
    slots.push_back({&din[i], accumulate});
  }
  layer->backward(in, out, weights_r, slots, ctx);
}

namespace {

void expect_close(double analytic, double numeric, const LayerCase& c, const std::string& what, size_t i,
                  int& failures) {
  const double tol = c.atol + c.rtol * std::max(std::fabs(analytic), std::fabs(numeric));
  if (std::fabs(analytic - numeric) > tol && failures++ < 5)
    ADD_FAILURE() << c.type << ": d/d" << what << "[" << i << "] analytic " << analytic << " numeric " << numeric;
}

double central_difference(LayerRig& rig, float* x, double h) {
  const float orig = *x;
  *x = orig + static_cast<float>(h);
  const double up = rig.loss();
  *x = orig - static_cast<float>(h);
  const double down = rig.loss();
  *x = orig;
  return (up - down) / (2 * h);
}

}  // namespace

void check_layer_gradients(const LayerCase& c) {
  LayerRig rig(c);
  rig.loss();
  std::vector<Tensor> din;
  for (auto& t : rig.inputs) din.push_back(Tensor::zeros(t.shape()));
  rig.backward(din, false);
  int failures = 0;
  for (size_t k = 0; k < rig.inputs.size(); ++k)
    for (size_t i = 0; i < rig.inputs[k].size(); ++i)
      expect_close(din[k].data()[i], central_difference(rig, rig.inputs[k].data() + i, c.h), c,
                   "input" + std::to_string(k), i, failures);
  for (size_t p = 0; p < rig.params.size(); ++p) {
    std::vector<float> analytic(rig.grads[p].data(), rig.grads[p].data() + rig.grads[p].size());
    for (size_t i = 0; i < rig.params[p].size(); ++i)
      expect_close(analytic[i], central_difference(rig, rig.params[p].data() + i, c.h), c,
                   rig.layer->param_specs()[p].name, i, failures);
  }
  // Accumulate mode adds exactly the same gradient onto what is there.
  rig.loss();
  std::vector<Tensor> acc;
  for (size_t k = 0; k < din.size(); ++k) {
    acc.push_back(Tensor::zeros(din[k].shape()));
    acc.back().fill(0.25f);
  }
  rig.backward(acc, true);
  for (size_t k = 0; k < din.size(); ++k)
    for (size_t i = 0; i < din[k].size(); ++i)
      ASSERT_NEAR(acc[k].data()[i], din[k].data()[i] + 0.25f, 1e-5f + 1e-5f * std::fabs(din[k].data()[i]))
          << c.type << ": accumulate mode differs at input " << k << " element " << i;
  EXPECT_EQ(failures, 0) << c.type << ": " << failures << " mismatched gradients";
}

}  // namespace burstpool::testing
