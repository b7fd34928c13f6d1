// Convolution and pooling through cuDNN (cuda/ops/kernels.hpp).
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "cuda/check.hpp"
#include "burstpool/allocator.hpp"
#include "cuda/ops/kernels.hpp"

namespace burstpool::cuda {
namespace {

cudnnTensorDescriptor_t tensor(int n, int c, int h, int w) {
  cudnnTensorDescriptor_t d;
  BP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  BP_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  return d;
}

// A workspace from the caching allocator, returned when it goes out of scope.
struct Workspace {
  Workspace(CachingAllocator& memory, size_t bytes) : memory(memory), bytes(bytes), ptr(memory.allocate(bytes)) {}
  ~Workspace() { memory.deallocate(ptr); }
  CachingAllocator& memory;
  size_t bytes;
  void* ptr;
};

// Algorithms that sum products directly (ConvAlgorithms::gemm), by the enum values of cudnn_ops.h.
bool sums_directly(cudnnConvolutionFwdAlgo_t a) { return a <= CUDNN_CONVOLUTION_FWD_ALGO_DIRECT; }
bool sums_directly(cudnnConvolutionBwdDataAlgo_t a) { return a <= CUDNN_CONVOLUTION_BWD_DATA_ALGO_1; }
bool sums_directly(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// From a ranking (best first), the first algorithm that works, is allowed
// (with `direct_only`, one that sums directly) and gives the same bits on
// every run, so training runs repeat exactly (a background job, a resume, a
// rerun); failing that, the first that works and is allowed.
// The entry is returned whole: its math type is the variant ranked (and, when
// measured, timed), which the descriptor must be set to when the algorithm runs.
template <class Perf>
const Perf& chosen_algorithm(const Perf* perf, int found, bool direct_only, const char* what) {
  auto usable = [&](int k) {
    return perf[k].status == CUDNN_STATUS_SUCCESS && (!direct_only || sums_directly(perf[k].algo));
  };
  for (int k = 0; k < found; ++k)
    if (usable(k) && perf[k].determinism == CUDNN_DETERMINISTIC) return perf[k];
  for (int k = 0; k < found; ++k)
    if (usable(k)) return perf[k];
  throw Error(
      fmt::format("cuDNN has no {} convolution {}for this shape", what, direct_only ? "that sums directly " : ""));
}

}  // namespace

ConvAlgorithms conv_algorithms(const std::string& name) {
  if (name == "heuristic") return ConvAlgorithms::heuristic;
  if (name == "measured") return ConvAlgorithms::measured;
  if (name == "gemm") return ConvAlgorithms::gemm;
  throw Error("cuDNN algorithm choice '" + name + "': heuristic, measured or gemm");
}

CudnnConv::CudnnConv(cudnnHandle_t handle, const Geometry2d& g, ConvAlgorithms how, bool tf32, AlgorithmCache* cache)
    : handle_(handle) {
  // A throwing constructor runs no destructor: what was made so far goes here.
  try {
    describe_and_choose(g, how, tf32, cache);
  } catch (...) {
    release();
    throw;
  }
}

void CudnnConv::describe_and_choose(const Geometry2d& g, ConvAlgorithms how, bool tf32, AlgorithmCache* cache) {
  x_ = tensor(g.n, g.c, g.h, g.w);
  y_ = tensor(g.n, g.oc, g.oh(), g.ow());
  bias_ = tensor(1, g.oc, 1, 1);
  BP_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
  BP_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g.oc, g.c, g.kh, g.kw));
  BP_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
  // Cross-correlation, as every framework's "convolution" and the CPU layer.
  BP_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, g.ph, g.pw, g.sh, g.sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                                 CUDNN_DATA_FLOAT));
  BP_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  const bool measured = how == ConvAlgorithms::measured, direct = how == ConvAlgorithms::gemm;
  if (!measured) cache = nullptr;
  const std::string key = fmt::format("n{} c{} h{} w{} oc{} k{}x{} s{}x{} p{}x{} {}", g.n, g.c, g.h, g.w, g.oc, g.kh,
                                      g.kw, g.sh, g.sw, g.ph, g.pw, tf32 ? "tf32" : "fp32");
  if (cache)
    if (const std::optional<AlgorithmChoice> c = cache->find(key)) {
      fwd_ = static_cast<cudnnConvolutionFwdAlgo_t>((*c)[0]);
      bwd_data_ = static_cast<cudnnConvolutionBwdDataAlgo_t>((*c)[1]);
      bwd_filter_ = static_cast<cudnnConvolutionBwdFilterAlgo_t>((*c)[2]);
      for (int k = 0; k < 3; ++k) math_[k] = static_cast<cudnnMathType_t>((*c)[3 + k]);
      return;
    }
  choose(measured, direct);
  if (cache)
    cache->add(key, {static_cast<int>(fwd_), static_cast<int>(bwd_data_), static_cast<int>(bwd_filter_), math_[0],
                     math_[1], math_[2]});
}

// The rankings list the candidates best first: by cuDNN's heuristics, or by
// time when measured (cuDNN allocates and times on buffers of its own).
void CudnnConv::choose(bool measured, bool direct) {
  int found = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  BP_CUDNN_CHECK((measured ? cudnnFindConvolutionForwardAlgorithm : cudnnGetConvolutionForwardAlgorithm_v7)(
      handle_, x_, w_, conv_, y_, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, fwd));
  const auto& f = chosen_algorithm(fwd, found, direct, "forward");
  fwd_ = f.algo, math_[0] = f.mathType;
  cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  BP_CUDNN_CHECK((measured ? cudnnFindConvolutionBackwardDataAlgorithm : cudnnGetConvolutionBackwardDataAlgorithm_v7)(
      handle_, w_, y_, conv_, x_, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, data));
  const auto& d = chosen_algorithm(data, found, direct, "backward-data");
  bwd_data_ = d.algo, math_[1] = d.mathType;
  cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  BP_CUDNN_CHECK(
      (measured ? cudnnFindConvolutionBackwardFilterAlgorithm : cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
          handle_, x_, y_, conv_, w_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, filter));
  const auto& w = chosen_algorithm(filter, found, direct, "backward-filter");
  bwd_filter_ = w.algo, math_[2] = w.mathType;
}

std::string CudnnConv::algorithms() const {
  static const char* const forward[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                        "FFT",           "FFT_TILING",            "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* const data[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* const filter[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED",
                                       "FFT_TILING"};
  static const char* const math[] = {"default math", "tensor ops", "tensor ops with conversion", "fma"};
  auto name = [](const auto& names, int algo) {
    return algo >= 0 && algo < static_cast<int>(std::size(names)) ? std::string(names[algo]) : std::to_string(algo);
  };
  auto with = [&](const auto& names, int algo, cudnnMathType_t m) {
    return name(names, algo) + " (" + name(math, static_cast<int>(m)) + ")";
  };
  return "forward " + with(forward, fwd_, math_[0]) + ", data " + with(data, bwd_data_, math_[1]) + ", filter " +
         with(filter, bwd_filter_, math_[2]);
}

CudnnConv::~CudnnConv() { release(); }

void CudnnConv::release() {
  if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
  if (w_) cudnnDestroyFilterDescriptor(w_);
  for (cudnnTensorDescriptor_t d : {x_, y_, bias_})
    if (d) cudnnDestroyTensorDescriptor(d);
  conv_ = nullptr, w_ = nullptr, x_ = y_ = bias_ = nullptr;
}

// Each direction runs in the math type its algorithm was chosen with.
void CudnnConv::use_math(int direction) { BP_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, math_[direction])); }

void CudnnConv::forward(const float* x, const float* weight, const float* bias, float* y, CachingAllocator& memory,
                        cudaStream_t stream) {
  BP_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  size_t bytes = 0;
  use_math(0);
  BP_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(handle_, x_, w_, conv_, y_, fwd_, &bytes));
  Workspace ws(memory, bytes);
  const float one = 1.0f, zero = 0.0f;
  BP_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, x_, x, w_, weight, conv_, fwd_, ws.ptr, bytes, &zero, y_, y));
  if (bias) BP_CUDNN_CHECK(cudnnAddTensor(handle_, &one, bias_, bias, &one, y_, y));
}

void CudnnConv::backward(const float* x, const float* weight, const float* dy, float* dweight, float* dbias, float* dx,
                         bool accumulate, CachingAllocator& memory, cudaStream_t stream) {
  BP_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  const float one = 1.0f, zero = 0.0f, keep = accumulate ? 1.0f : 0.0f;
  size_t bytes = 0;
  use_math(2);
  BP_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, x_, y_, conv_, w_, bwd_filter_, &bytes));
  {
    Workspace ws(memory, bytes);
    BP_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &one, x_, x, y_, dy, conv_, bwd_filter_, ws.ptr, bytes,
                                                  &zero, w_, dweight));
  }
  if (dbias) BP_CUDNN_CHECK(cudnnConvolutionBackwardBias(handle_, &one, y_, dy, &zero, bias_, dbias));
  if (!dx) return;
  use_math(1);
  BP_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, w_, y_, conv_, x_, bwd_data_, &bytes));
  Workspace ws(memory, bytes);
  BP_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, w_, weight, y_, dy, conv_, bwd_data_, ws.ptr, bytes,
                                              &keep, x_, dx));
}

CudnnPool::CudnnPool(cudnnHandle_t handle, const Geometry2d& g, bool max) : handle_(handle) {
  x_ = tensor(g.n, g.c, g.h, g.w);
  y_ = tensor(g.n, g.c, g.oh(), g.ow());
  BP_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_));
  BP_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
      pool_, max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_NOT_PROPAGATE_NAN,
      g.kh, g.kw, g.ph, g.pw, g.sh, g.sw));
}

CudnnPool::~CudnnPool() {
  cudnnDestroyPoolingDescriptor(pool_);
  cudnnDestroyTensorDescriptor(x_);
  cudnnDestroyTensorDescriptor(y_);
}

void CudnnPool::forward(const float* x, float* y, cudaStream_t stream) {
  BP_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  const float one = 1.0f, zero = 0.0f;
  BP_CUDNN_CHECK(cudnnPoolingForward(handle_, pool_, &one, x_, x, &zero, y_, y));
}

void CudnnPool::backward(const float* x, const float* y, const float* dy, float* dx, bool accumulate,
                         cudaStream_t stream) {
  BP_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  const float one = 1.0f, keep = accumulate ? 1.0f : 0.0f;
  BP_CUDNN_CHECK(cudnnPoolingBackward(handle_, pool_, &one, y_, y, y_, dy, x_, x, &keep, x_, dx));
}

}  // namespace burstpool::cuda
