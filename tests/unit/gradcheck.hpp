#pragma once
// Finite-difference gradient checks for single layers.
//
// The scalar under test is L = sum_i out_i * r_i for a fixed random r (the
// loss layer's output is already a scalar). Analytic gradients from backward
// are compared with central differences (L(x+h) - L(x-h)) / 2h for every input
// element and every parameter, with |analytic - numeric| <= atol + rtol * max(|a|, |n|).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "burstpool/error.hpp"
#include "burstpool/layer.hpp"

namespace burstpool::testing {

enum class Values { smooth, distinct };  // distinct: well-separated values (max pooling, ReLU kinks)

struct LayerCase {
  std::string type;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<Shape> inputs;  // with batch n
  Values values = Values::smooth;
  bool training = true;
  double h = 1e-2, rtol = 2e-2, atol = 2e-3;
  uint64_t seed = 7;
};

// A layer with its own inputs, parameters and output, ready to run.
struct LayerRig {
  std::unique_ptr<Layer> layer;
  std::vector<Tensor> inputs, params, grads, state;
  Tensor out, weights_r;  // weights_r: the random r of L
  std::vector<int32_t> labels;
  Context ctx;

  explicit LayerRig(const LayerCase& c);
  double loss();                     // forward, then L
  void backward(std::vector<Tensor>& din, bool accumulate);  // din sized like inputs
};

// Runs every check for one case; reports failures with gtest.
void check_layer_gradients(const LayerCase& c);

}  // namespace burstpool::testing
