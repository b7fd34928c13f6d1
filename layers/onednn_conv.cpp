// Convolution by oneDNN (v2 API). Tensors stay in burstpool's NCHW and
// OIHW layouts; each primitive is created with `any` layouts so oneDNN picks
// its fastest (blocked) ones, and the data is reordered to and from them
// around the call, as PyTorch's CPU convolution does. Primitives and their
// reorder buffers are made once per batch size and kept.
//
// oneDNN on the CPU is run-to-run deterministic for a fixed processor,
// library version and thread count (its documentation); the conv tests hold
// it to the direct convolution and to finite differences like the other algorithms.
#include "layers/onednn_conv.hpp"

#include "burstpool/error.hpp"
#include "burstpool/version.hpp"
#include "layers/kernels.hpp"

#ifdef BURSTPOOL_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>
#endif

namespace burstpool::cpu {

#ifndef BURSTPOOL_HAVE_ONEDNN

bool onednn_available() { return false; }

std::unique_ptr<ConvKernel> make_onednn_conv(const ConvShape&, bool) {
  throw Error("conv2d algorithm 'onednn': this build has no oneDNN (install libdnnl-dev and rebuild)");
}

#else

namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Scratch for arguments that live only within one call (the forward's
// output, backward's dy and input gradient, an input gradient to add in),
// shared by every layer the calling thread runs, so that a model holds one
// set, not one per layer. Slot numbers keep the ones live at once apart.
enum Slot { kOutput = 0, kDy = 0, kDx = 1, kDxSum = 2, kSlots = 3 };
void* transient(int slot, size_t bytes) {
  thread_local std::vector<float> slots[kSlots];
  std::vector<float>& v = slots[slot];
  if (v.size() * sizeof(float) < bytes) v.resize((bytes + sizeof(float) - 1) / sizeof(float));
  return v.data();
}

// One argument of a primitive: the user's buffer in burstpool's layout and,
// when the primitive wants another layout, a buffer in that one: the
// argument's own (kept from call to call) or, with a slot, the thread's
// transient one.
class Arg {
 public:
  Arg(const memory::desc& user, const memory::desc& wanted, int slot = -1)
      : user_mem_(user, engine(), DNNL_MEMORY_NONE), slot_(slot) {
    if (user == wanted) return;
    if (slot < 0)
      other_.emplace(wanted, engine());
    else
      other_.emplace(wanted, engine(), static_cast<void*>(DNNL_MEMORY_NONE));
  }
  // An input at `data`, in the primitive's layout. With `reuse`, a copy made
  // from the same buffer since the last forget() is taken as it is: the
  // layer contract keeps a layer's inputs and weights unchanged from its
  // forward to its backward (kept buffers only; a slot's copy lasts one call).
  memory& input(const void* data, dnnl::stream& s, bool reuse) {
    user_mem_.set_data_handle(const_cast<void*>(data));
    if (!other_) return user_mem_;
    const bool fresh = reuse && filled_from_ == data;
    if (!fresh) {
      attach();
      dnnl::reorder(user_mem_, *other_).execute(s, user_mem_, *other_);
    }
    filled_from_ = data;
    return *other_;
  }
  void forget() { filled_from_ = nullptr; }
  // An output to `data`: the memory the primitive writes, then finish() moves
  // it into burstpool's layout.
  memory& output(void* data) {
    user_mem_.set_data_handle(data);
    if (!other_) return user_mem_;
    attach();
    return *other_;
  }
  void finish(dnnl::stream& s) {
    if (other_) dnnl::reorder(*other_, user_mem_).execute(s, *other_, user_mem_);
  }
  // Bytes this argument keeps between calls.
  uint64_t kept_bytes() const { return other_ && slot_ < 0 ? other_->get_desc().get_size() : 0; }
  uint64_t transient_bytes() const { return other_ && slot_ >= 0 ? other_->get_desc().get_size() : 0; }

 private:
  void attach() {
    if (slot_ >= 0) other_->set_data_handle(transient(slot_, other_->get_desc().get_size()));
  }

  memory user_mem_;
  int slot_;
  std::optional<memory> other_;
  const void* filled_from_ = nullptr;
};

class OnednnConv final : public ConvKernel {
 public:
  OnednnConv(const ConvShape& s, bool bias) : s_(s), bias_(bias) {}

  void forward(const float* x, const float* weight, const float* bias, float* y, int n) override {
    BP_CHECK((bias != nullptr) == bias_, "conv2d (oneDNN): bias given {} but the layer was made {}",
             bias != nullptr, bias_);
    Plan& p = plan(n);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, p.src.input(x, stream_, false)},
                                         {DNNL_ARG_WEIGHTS, p.weights.input(weight, stream_, false)},
                                         {DNNL_ARG_DST, p.dst.output(y)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(p.bias_md, engine(), const_cast<float*>(bias)));
    p.fwd.execute(stream_, args);
    p.dst.finish(stream_);
    stream_.wait();
  }

  void backward(const float* x, const float* weight, const float* dy, float* dweight, float* dx, bool accumulate,
                int n) override {
    Plan& p = plan(n);
    // Where both backward primitives want the forward's layouts, the copies
    // the forward made (input, weights) and one copy of dy serve all.
    memory& src = p.src_w ? p.src_w->input(x, stream_, false) : p.src.input(x, stream_, true);
    memory& diff_dst = p.diff_dst.input(dy, stream_, false);
    p.bwd_weights.execute(stream_, {{DNNL_ARG_SRC, src},
                                    {DNNL_ARG_DIFF_DST, diff_dst},
                                    {DNNL_ARG_DIFF_WEIGHTS, p.diff_weights.output(dweight)}});
    p.diff_weights.finish(stream_);
    // Accumulating writes to the thread's transient slot first, then adds it in.
    const size_t dx_size = static_cast<size_t>(n) * s_.c * s_.h * s_.w;
    float* target = dx && accumulate ? static_cast<float*>(transient(kDxSum, dx_size * sizeof(float))) : dx;
    if (dx) {
      memory& ddst = p.diff_dst_d ? p.diff_dst_d->input(dy, stream_, false) : p.diff_dst.input(dy, stream_, true);
      memory& w = p.weights_d ? p.weights_d->input(weight, stream_, false) : p.weights.input(weight, stream_, true);
      p.bwd_data.execute(stream_,
                         {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, p.diff_src.output(target)}});
      p.diff_src.finish(stream_);
    }
    stream_.wait();
    if (dx && accumulate) write_grad(dx, target, dx_size, true);
    p.src.forget();
    p.weights.forget();
    p.diff_dst.forget();
  }

  // What this layer keeps from call to call (its copies of the input and weights).
  uint64_t buffer_bytes(int n, int) const override {
    const Plan& p = plan(n);
    uint64_t kept = 0;
    for (const Arg* a : {&p.src, &p.weights, &p.dst, &p.diff_dst, &p.diff_weights, &p.diff_src}) kept += a->kept_bytes();
    for (const auto* a : {&p.src_w, &p.weights_d, &p.diff_dst_d})
      if (*a) kept += (*a)->kept_bytes();
    return kept;
  }
  // The thread's transient slots and oneDNN's scratchpad, which the library
  // also shares between primitives.
  uint64_t shared_buffer_bytes(int n, int) const override {
    const Plan& p = plan(n);
    uint64_t transient = 4 * static_cast<uint64_t>(n) * s_.c * s_.h * s_.w;  // an input gradient to add in
    for (const Arg* a : {&p.dst, &p.diff_dst, &p.diff_src}) transient += a->transient_bytes();
    if (p.diff_dst_d) transient += p.diff_dst_d->transient_bytes();
    const uint64_t scratch = std::max({p.fwd_pd.scratchpad_desc().get_size(),
                                       p.bwd_weights_pd.scratchpad_desc().get_size(),
                                       p.bwd_data_pd.scratchpad_desc().get_size()});
    return transient + scratch;
  }

 private:
  // The primitives of one batch size and their arguments' layouts.
  struct Plan {
    memory::desc bias_md;
    dnnl::convolution_forward::primitive_desc fwd_pd;
    dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
    dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data bwd_data;
    dnnl::convolution_backward_weights bwd_weights;
    Arg src, weights, dst;            // forward
    Arg diff_dst, diff_weights;       // weights gradient (its dy layout is the shared one)
    Arg diff_src;                     // input gradient
    // Set only where a backward primitive wants another layout than the shared one.
    std::optional<Arg> src_w, weights_d, diff_dst_d;
  };

  // The plan of batch size n, made on first use (by the memory estimate or the first call).
  Plan& plan(int n) const {
    auto it = plans_.find(n);
    if (it == plans_.end()) it = plans_.emplace(n, make_plan(n)).first;
    return it->second;
  }

  Plan make_plan(int n) const {
    const memory::dims src{n, s_.c, s_.h, s_.w}, wts{s_.oc, s_.c, s_.kh, s_.kw}, dst{n, s_.oc, s_.oh, s_.ow};
    const memory::dims strides{s_.sh, s_.sw}, pad_l{s_.ph, s_.pw};
    // Right padding so that the output size comes out as the layer's (floor division).
    const memory::dims pad_r{(s_.oh - 1) * s_.sh + s_.kh - s_.h - s_.ph, (s_.ow - 1) * s_.sw + s_.kw - s_.w - s_.pw};
    const auto f32 = memory::data_type::f32;
    auto any = [&](const memory::dims& d) { return memory::desc(d, f32, tag::any); };
    const memory::desc user_src(src, f32, tag::nchw), user_w(wts, f32, tag::oihw), user_dst(dst, f32, tag::nchw);
    const memory::desc bias_md({s_.oc}, f32, tag::x);
    // Direct (not Winograd): what PyTorch's CPU convolution asks oneDNN for.
    const auto algo = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, algo, any(src), any(wts),
                                       bias_ ? bias_md : memory::desc(), any(dst), strides, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc fpd(fd, engine());
    dnnl::convolution_backward_data::desc dd(algo, any(src), any(wts), any(dst), strides, pad_l, pad_r);
    dnnl::convolution_backward_data::primitive_desc dpd(dd, engine(), fpd);
    dnnl::convolution_backward_weights::desc wd(algo, any(src), any(wts), any(dst), strides, pad_l, pad_r);
    dnnl::convolution_backward_weights::primitive_desc wpd(wd, engine(), fpd);
    auto unless_same = [](const memory::desc& user, const memory::desc& wanted, const memory::desc& shared,
                          int slot = -1) {
      return wanted == shared ? std::nullopt : std::optional<Arg>(Arg(user, wanted, slot));
    };
    return Plan{bias_md,
                fpd,
                dpd,
                wpd,
                dnnl::convolution_forward(fpd),
                dnnl::convolution_backward_data(dpd),
                dnnl::convolution_backward_weights(wpd),
                Arg(user_src, fpd.src_desc()),
                Arg(user_w, fpd.weights_desc()),
                Arg(user_dst, fpd.dst_desc(), kOutput),
                Arg(user_dst, wpd.diff_dst_desc(), kDy),
                Arg(user_w, wpd.diff_weights_desc()),
                Arg(user_src, dpd.diff_src_desc(), kDx),
                unless_same(user_src, wpd.src_desc(), fpd.src_desc()),
                unless_same(user_w, dpd.weights_desc(), fpd.weights_desc()),
                unless_same(user_dst, dpd.diff_dst_desc(), wpd.diff_dst_desc(), kDy)};
  }

  ConvShape s_;
  bool bias_;
  dnnl::stream stream_{engine()};
  mutable std::map<int, Plan> plans_;
};

}  // namespace

bool onednn_available() { return true; }

std::unique_ptr<ConvKernel> make_onednn_conv(const ConvShape& shape, bool bias) {
  return std::make_unique<OnednnConv>(shape, bias);
}

#endif

}  // namespace burstpool::cpu

namespace burstpool {

#ifndef BURSTPOOL_HAVE_ONEDNN

nlohmann::json onednn_info() { return {{"built", false}}; }

#else

nlohmann::json onednn_info() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "unknown";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx: isa = "AVX-512 with AMX"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "AVX-512 with bf16"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "AVX-512 with VNNI"; break;
    case dnnl::cpu_isa::avx512_core: isa = "AVX-512"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "AVX2 with VNNI"; break;
    case dnnl::cpu_isa::avx2: isa = "AVX2"; break;
    case dnnl::cpu_isa::avx: isa = "AVX"; break;
    case dnnl::cpu_isa::sse41: isa = "SSE4.1"; break;
    default: break;
  }
  return {{"built", true}, {"version", fmt::format("{}.{}.{}", v->major, v->minor, v->patch)}, {"isa", isa}};
}

#endif

}  // namespace burstpool
