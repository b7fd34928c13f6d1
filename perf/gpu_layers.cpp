// bp_gpu_layers MODEL.ini [--batch 32] [--repeats 20] [--algorithms heuristic|measured|gemm] [--out FILE.json]
//
// Forward and backward time of every layer of a model on the GPU, through the
// CUDA layer twins (cuda/ops), at one batch size: per layer and per step
// (the sum), median of `repeats` after 3 warm-up runs, timed with CUDA events
// on the foreground stream; convolutions also in TFLOP/s (2 x multiply-adds,
// backward counted as 2 x forward, 1 x for a convolution of the data, which
// needs no input gradient, as in a training step). fp32 throughout: cuBLAS
// pedantic math and cuDNN FMA math, no TF32. cuDNN's convolution algorithms
// are chosen as [job] cudnn_algorithms says (--algorithms; deterministic ones
// only) and listed. Built with the CUDA backend only; for the issue's
// vgg16-at-batch-32 comparison with PyTorch (perf/torch_gpu_peer.py).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "burstpool/device.hpp"
#include "burstpool/model_io.hpp"
#include "cuda/check.hpp"
#include "cuda/context.hpp"
#include "cuda/ops/kernels.hpp"

using namespace burstpool;

namespace {

struct Timed {
  std::function<void()> forward, backward;
  double flops = 0;  // forward multiply-adds x 2, whole batch
  int passes = 3;     // forward's flops in forward + backward: 3, or 2 without an input gradient
  std::string algorithms;  // a convolution's cuDNN algorithms
};

float* device_floats(cuda::Context& ctx, size_t n, std::vector<void*>& owned) {
  void* p = ctx.allocator().allocate(std::max<size_t>(n, 1) * sizeof(float));
  BP_CUDA_CHECK(cudaMemset(p, 0, std::max<size_t>(n, 1) * sizeof(float)));
  owned.push_back(p);
  return static_cast<float*>(p);
}

double median_ms(cuda::Context& ctx, const std::function<void()>& f, int repeats) {
  cudaStream_t s = ctx.stream(StreamRole::foreground);
  cudaEvent_t a, b;
  BP_CUDA_CHECK(cudaEventCreate(&a));
  BP_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    BP_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    BP_CUDA_CHECK(cudaEventRecord(b, s));
    BP_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    BP_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    times.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2)
      throw Error(
          "usage: bp_gpu_layers MODEL.ini [--batch 32] [--repeats 20] [--algorithms heuristic|measured|gemm] "
          "[--out FILE.json]");
    int batch = 32, repeats = 20;
    std::string out_path, algorithms = "heuristic";
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      if (flag == "--batch") batch = std::stoi(argv[i + 1]);
      else if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
      else if (flag == "--out") out_path = argv[i + 1];
      else if (flag == "--algorithms") algorithms = argv[i + 1];
      else throw Error("unknown option " + flag);
    }
    const cuda::ConvAlgorithms how = cuda::conv_algorithms(algorithms);
    const ModelSpec spec = load_model_spec(argv[1]);
    cuda::Context ctx(0);
    cudaStream_t s = ctx.stream(StreamRole::foreground);
    std::vector<void*> owned;
    std::map<std::string, Shape> shapes;  // per-sample output shape by layer
    std::map<std::string, float*> outs;
    nlohmann::json rows = nlohmann::json::array();
    double total_fwd = 0, total_bwd = 0, conv_flops = 0, conv_ms = 0;
    std::vector<std::unique_ptr<cuda::CudnnConv>> convs;
    std::vector<std::unique_ptr<cuda::CudnnPool>> pools;
    int32_t* labels = nullptr;
    for (int idx : spec.topological_order()) {
      const LayerSpec& l = spec.layers[idx];
      std::unique_ptr<Layer> layer = make_layer(l);
      std::vector<Shape> in_shapes;
      for (const std::string& in : l.inputs) in_shapes.push_back(shapes.at(in));
      const Shape out = layer->infer(in_shapes);
      shapes[l.name] = out;
      const size_t out_n = out.with_batch(batch).count();
      float* y = device_floats(ctx, out_n, owned);
      outs[l.name] = y;
      const LayerKind kind = layer->kind();
      const LayerAttrs& a = layer->attrs();
      if (kind == LayerKind::input) continue;
      const Shape in = in_shapes[0].with_batch(batch);
      float* x = outs.at(l.inputs[0]);
      // Fed by the data: no input gradient in a training step (a convolution skips it).
      const bool from_data = layer_kind(spec.layers[spec.find(l.inputs[0])].type) == LayerKind::input;
      float* dy = device_floats(ctx, out_n, owned);
      float* dx = device_floats(ctx, in.count(), owned);
      std::vector<float*> p, g;
      for (const ParamSpec& ps : layer->param_specs()) {
        p.push_back(device_floats(ctx, ps.shape.count(), owned));
        g.push_back(device_floats(ctx, ps.shape.count(), owned));
      }
      Timed t;
      if (kind == LayerKind::conv2d) {
        cuda::Geometry2d geo;
        geo.n = batch, geo.c = in.c, geo.h = in.h, geo.w = in.w, geo.oc = out.c;
        geo.kh = a.kh, geo.kw = a.kw, geo.sh = a.sh, geo.sw = a.sw, geo.ph = a.ph, geo.pw = a.pw;
        convs.push_back(std::make_unique<cuda::CudnnConv>(ctx.cudnn(), geo, how));
        cuda::CudnnConv* conv = convs.back().get();
        const bool bias = p.size() > 1;
        float* conv_dx = from_data ? nullptr : dx;
        t.forward = [=, &ctx] { conv->forward(x, p[0], bias ? p[1] : nullptr, y, ctx.allocator(), s); };
        t.backward = [=, &ctx] {
          conv->backward(x, p[0], dy, g[0], bias ? g[1] : nullptr, conv_dx, false, ctx.allocator(), s);
        };
        t.flops = 2.0 * batch * out.per_sample() * geo.c * geo.kh * geo.kw;
        t.passes = from_data ? 2 : 3;
        t.algorithms = conv->algorithms();
      } else if (kind == LayerKind::maxpool2d || kind == LayerKind::avgpool2d) {
        cuda::Geometry2d geo;
        geo.n = batch, geo.c = in.c, geo.h = in.h, geo.w = in.w, geo.oc = in.c;
        geo.kh = a.kh, geo.kw = a.kw, geo.sh = a.sh, geo.sw = a.sw, geo.ph = a.ph, geo.pw = a.pw;
        pools.push_back(std::make_unique<cuda::CudnnPool>(ctx.cudnn(), geo, kind == LayerKind::maxpool2d));
        cuda::CudnnPool* pool = pools.back().get();
        t.forward = [=] { pool->forward(x, y, s); };
        t.backward = [=] { pool->backward(x, y, dy, dx, false, s); };
      } else if (kind == LayerKind::relu) {
        t.forward = [=] { cuda::relu_forward(x, y, out_n, s); };
        t.backward = [=] { cuda::relu_backward(x, dy, dx, out_n, false, s); };
      } else if (kind == LayerKind::linear) {
        const int fin = static_cast<int>(in.per_sample()), fout = static_cast<int>(out.per_sample());
        t.forward = [=, &ctx] { cuda::linear_forward(ctx.cublas(), x, p[0], p.size() > 1 ? p[1] : nullptr, y, batch, fin, fout, s); };
        t.backward = [=, &ctx] {
          cuda::linear_backward(ctx.cublas(), x, p[0], dy, g[0], p.size() > 1 ? g[1] : nullptr, dx, false, batch, fin, fout, s);
        };
        t.flops = 2.0 * batch * fin * fout;
      } else if (kind == LayerKind::dropout) {
        const float prob = a.p;
        auto* key = static_cast<uint64_t*>(ctx.allocator().allocate(sizeof(uint64_t)));
        owned.push_back(key);
        BP_CUDA_CHECK(cudaMemset(key, 0, sizeof(uint64_t)));
        t.forward = [=] { cuda::dropout_apply(x, y, batch, out.per_sample(), prob, key, 0, false, s); };
        t.backward = [=] { cuda::dropout_apply(dy, dx, batch, out.per_sample(), prob, key, 0, false, s); };
      } else if (kind == LayerKind::flatten) {
        t.forward = [=] { cuda::write_grad(y, x, out_n, false, s); };
        t.backward = [=] { cuda::write_grad(dx, dy, out_n, false, s); };
      } else if (kind == LayerKind::softmax_cross_entropy) {
        const int k = static_cast<int>(in.per_sample());
        labels = static_cast<int32_t*>(ctx.allocator().allocate(sizeof(int32_t) * batch));
        BP_CUDA_CHECK(cudaMemset(labels, 0, sizeof(int32_t) * batch));
        float* prob = device_floats(ctx, in.count(), owned);
        auto* parts = reinterpret_cast<double*>(device_floats(ctx, 2 * static_cast<size_t>(batch), owned));
        t.forward = [=] { cuda::softmax_xent_forward(x, labels, prob, y, parts, batch, k, 1.0 / batch, s); };
        t.backward = [=] { cuda::softmax_xent_backward(prob, labels, 1.0f / batch, dx, batch, k, false, s); };
      } else {
        throw Error(fmt::format("layer '{}': type {} is not in this benchmark yet", l.name, l.type));
      }
      const double f = median_ms(ctx, t.forward, repeats), b = median_ms(ctx, t.backward, repeats);
      total_fwd += f;
      total_bwd += b;
      nlohmann::json row = {{"layer", l.name}, {"type", l.type}, {"forward_ms", f}, {"backward_ms", b}};
      if (t.flops > 0) row["tflops"] = t.passes * t.flops / ((f + b) * 1e-3) / 1e12;
      if (kind == LayerKind::conv2d) conv_flops += t.passes * t.flops, conv_ms += f + b;
      if (!t.algorithms.empty()) row["algorithms"] = t.algorithms;
      rows.push_back(row);
      std::printf("%-12s %-22s fwd %8.3f ms  bwd %8.3f ms%s%s\n", l.name.c_str(), l.type.c_str(), f, b,
                  t.flops > 0 ? fmt::format("  {:.1f} TFLOP/s", row["tflops"].get<double>()).c_str() : "",
                  t.algorithms.empty() ? "" : ("  " + t.algorithms).c_str());
    }
    std::printf("step (sum of layers): forward %.3f ms, backward %.3f ms, total %.3f ms at batch %d; "
                "convolutions %.1f TFLOP/s\n",
                total_fwd, total_bwd, total_fwd + total_bwd, batch, conv_flops / (conv_ms * 1e-3) / 1e12);
    if (!out_path.empty()) {
      std::ofstream(out_path) << nlohmann::json{{"model", spec.name},       {"batch", batch},
                                                {"layers", rows},           {"forward_ms", total_fwd},
                                                {"backward_ms", total_bwd}, {"step_ms", total_fwd + total_bwd},
                                                {"conv_tflops", conv_flops / (conv_ms * 1e-3) / 1e12},
                                                {"math", "fp32 (no TF32)"},
                                                {"cudnn_algorithms", algorithms}}
                                     .dump(1);
    }
    for (void* ptr : owned) ctx.allocator().deallocate(ptr);
    if (labels) ctx.allocator().deallocate(labels);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bp_gpu_layers: error: %s\n", e.what());
    return 1;
  }
}
