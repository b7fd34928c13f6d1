#pragma once
// A whole model on one GPU: forward, backward and SGD through the CUDA layer
// twins (cuda/ops), on this rank's slice of a data-parallel batch. The CPU
// Model of the same spec stays the reference: parameters and state are
// uploaded from it and downloaded back to it (for checkpoints and evaluation
// output), and the per-layer gradient contract (overwrite or accumulate) is
// the Model's.
//
// On several ranks (join_ranks) each layer's gradients are summed as soon as
// its backward is done: with NCCL, on the gradient-sync stream, ordered after
// the layer by an event, so the sums overlap the rest of backward; else (ranks
// sharing a GPU, or a background job) copied to pinned host memory after
// backward and summed there by MPI. Batch norm sums its statistics over the
// ranks through Context::sum_over_group (host memory, a few values).
//
// CUDA graphs (set_graphs): a training step's forward layers and backward
// layers are each captured once per batch size, on the second step at that
// size (the first runs eagerly, settling cuDNN algorithms, workspaces and
// cuBLAS state), and replayed from then on, saving a launch per kernel. Only
// where nothing inside waits for the host or changes between steps except
// through device memory: training, no batch-norm group sums, no background
// gate, no NCCL sums (other steps run eagerly). Dropout reads its per-step
// key from device memory. A graph keeps the addresses of the workspaces it
// used: the allocator holds them (CachingAllocator::hold_frees) until the
// graphs are dropped, so nothing made later is handed memory every replay
// overwrites.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "burstpool/executor.hpp"
#include "burstpool/layer.hpp"
#include "burstpool/model.hpp"
#include "burstpool/optimizer.hpp"
#include "burstpool/piece_window.hpp"
#include "cuda/nccl/nccl_group.hpp"
#include "cuda/nccl/nccl_reducer.hpp"
#include "cuda/nccl/nccl_slice_mover.hpp"
#include "cuda/ops/kernels.hpp"
#include "cuda/context.hpp"

namespace burstpool::cuda {


class GpuModel final : public DeviceModel {
 public:
  // `host` fixes shapes, capacity (max_batch) and initial values.
  GpuModel(Model& host, Context& ctx);
  GpuModel(Model& host, std::unique_ptr<Context> ctx);  // owns the context (make_cuda_model)
  ~GpuModel() override;

  void upload();    // parameters and state: host -> device
  void download();  // parameters and state: device -> host

  // Forward on `batch` samples (images and labels in host memory); returns the
  // loss. ctx as for Model::forward (labels and loss_scale are taken from the
  // arguments). Logits stay on the device; logits() copies them to the host.
  float forward(int batch, const float* images, const int32_t* labels, const burstpool::Context& ctx) override;
  void backward(const burstpool::Context& ctx) override;
  void logits(float* host) override;
  bool supports(LayerKind) const override { return true; }  // every kind (launch_forward, launch_backward)
  // The PyTorch momentum rule, as Sgd::step.
  void sgd_step(float lr, const SgdOptions& options, const std::vector<std::pair<size_t, size_t>>& ranges) override;
  void axpby(float a, Buffer x, float b, Buffer y) override;
  void use_slot_buffers(const std::vector<std::vector<bool>>& direct) override;
  void load_input(const float* images, int images_n, const int32_t* labels, int labels_n,
                  const burstpool::Context& ctx) override;
  void forward_layer(int layer, const burstpool::Context& ctx) override;
  void backward_layer(int layer, const burstpool::Context& ctx) override;
  float loss() override;
  void copy_out(Buffer what, int layer, int slot, float* host, size_t floats) override;
  void copy_in(Buffer what, int layer, int slot, const float* host, size_t floats) override;
  // NCCL between the ranks' GPUs when each has its own (nccl_slice_mover.hpp,
  // nccl_reducer.hpp).
  DeviceTransport transport(const GroupCache& groups) override;
  float* address(Buffer what, int layer, int slot) override;
  void download(const float* device, float* host, size_t floats) override;
  void upload(float* device, const float* host, size_t floats) override;
  void join_ranks(DeviceRanks ranks) override;
  void set_before_layer(std::function<void()> hook) override { before_layer_ = std::move(hook); }
  bool uses_nccl() const { return nccl_ != nullptr; }
  void set_graphs(bool on) { graphs_ = on; }
  void set_conv_algorithms(ConvAlgorithms how) { conv_algorithms_ = how; }  // for convolutions set up from now on
  // With measured algorithms: the cache file of their choices (writer: this
  // process writes it; one per node), for convolutions set up from now on.
  void use_algorithm_cache(const std::string& path, bool writer);
  // [job] precision: tf32 lets cuBLAS and cuDNN round products' inputs to
  // TF32 (for layers set up from now on), else fp32 throughout. bf16 is the
  // Context's (Context::precision, as on the CPU): the batch, each layer's
  // output and the gradient it receives are rounded to bf16, and linear and
  // conv2d layers take their weights rounded; with tf32 on, the tensor cores
  // then multiply bf16 values exactly (a bf16 value is a TF32 value).
  void set_tf32(bool on);
  // With a before-layer hook (a background job's gate): how many of its
  // pieces may be queued on the stream at once (PieceWindow); 1 waits for
  // each piece before the gate is asked about the next.
  void set_pieces_in_flight(int pieces);
  void to_host(float* velocity) override;
  void from_host(const float* velocity) override;
  std::string describe() const override;
  void synchronize() override;
  void gradients(float* host) const;  // parameter gradients, laid out like Model::grads()

 private:
  // What forward and backward of one layer both need, for the current batch.
  struct LayerView {
    const Layer& layer;
    const LayerAttrs& attrs;  // the layer's own (Layer::attrs)
    const std::vector<int>& ins;
    int n;
    Shape in, out;  // per sample: first input, output
    size_t out_n;   // output floats for the batch
    float *x, *y;   // first input and output activations
    float* p;       // the layer's parameters
    size_t param_count;
    // Where the bias starts in `base` (parameters or gradients) after
    // `weights` floats, or nullptr when the layer has none.
    float* bias(float* base, size_t weights) const;
    Geometry2d geometry() const;  // convolution and pooling, for this batch
  };
  LayerView view(int i) const;
  float* device(size_t floats);
  // On layer_n_[i] samples, in the context's precision (bf16: the rounding
  // around launch_layer_forward/backward, which run the layer itself).
  void launch_forward(int i, const burstpool::Context& ctx);
  void launch_backward(int i, const burstpool::Context& ctx);
  void launch_layer_forward(int i, const burstpool::Context& ctx);
  void launch_layer_backward(int i, const burstpool::Context& ctx);
  // A linear or conv2d layer's first `weights` parameters as its products
  // take them: v.p itself, or in bf16 a rounded copy (in bf16_weights_).
  const float* product_weights(int i, const LayerView& v, size_t weights, const burstpool::Context& ctx);
  // Device memory bf16 needs, made before any graph capture (none in fp32).
  void prepare_precision(const burstpool::Context& ctx);
  float* input(int i, size_t k) const;       // slot k's input: its own buffer, or the producer's activations
  float* input_grad(int i, size_t k) const;  // where slot k's input gradient goes; nullptr for the data layer
  float* buffer(Buffer what, int layer, int slot) const;  // nullptr for a scratch vector not made yet
  float* flat(Buffer what);  // a whole-model vector; scratch ones made (zeroed) at first use
  void use_device() const;  // makes this model's GPU the calling thread's
  void next_piece();  // the before-layer hook, once the last layer's work is done
  // Batch-norm sums (count doubles on the device) over the ranks, if ctx sums over a group.
  void sum_over_group(double* sums, size_t count, const burstpool::Context& ctx);
  void start_gradient_sum(int i);  // NCCL: layer i's gradients, on the sync stream
  void finish_gradient_sums();     // all of them summed before the optimizer reads them
  void write_dropout_keys(const burstpool::Context& ctx);  // this step's, into keys_
  // This rank's input and loss slices and the step's dropout keys, queued on the stream.
  void upload_batch(const float* images, int images_n, const int32_t* labels, int labels_n,
                    const burstpool::Context& ctx);
  void download_to(float* host, const float* from, size_t floats) const;  // there when this returns
  struct StepGraphs {  // one batch size's
    cudaGraphExec_t forward = nullptr, backward = nullptr;
    bool forward_warm = false, backward_warm = false;  // ran once eagerly
  };
  // The StepGraphs for this step when it may use graphs, else nullptr.
  StepGraphs* step_graphs(const burstpool::Context& ctx);
  // `layers` eagerly, or captured into *graph on its second run and replayed after.
  void run_layers(cudaGraphExec_t* graph, bool* warm, const std::function<void()>& layers);
  void drop_graphs();

  Model& host_;
  Context& ctx_;
  std::unique_ptr<Context> owned_context_;  // when owned: outlives the members declared below it
  cudaStream_t stream_;
  int batch_ = 0;
  std::vector<void*> owned_;
  float *params_ = nullptr, *grads_ = nullptr, *state_ = nullptr, *velocity_ = nullptr;
  float* scratch_[kScratchVectors] = {};           // Buffer::scratch_a to scratch_d, made at first use
  float* bf16_weights_ = nullptr;                  // bf16: rounded weights, laid out like params_
  std::vector<float*> acts_, act_grads_;          // per layer, sized by its capacity on this rank
  std::vector<std::vector<float*>> slot_in_, slot_grad_;  // per input slot; nullptr: the producer's buffers
  std::vector<int> layer_n_;                       // each layer's samples in this step
  float* loss_ = nullptr;
  float* prob_ = nullptr;
  int32_t* labels_ = nullptr;
  double* loss_parts_ = nullptr;  // the loss layer's per-sample losses (softmax_xent_forward)
  std::vector<float*> layer_mean_, layer_invstd_;  // batch norm, per layer
  double* bn_sums_ = nullptr;
  std::map<std::pair<int, int>, std::unique_ptr<CudnnConv>> convs_;  // (layer, batch)
  std::unique_ptr<AlgorithmCache> algorithm_cache_;                  // use_algorithm_cache's, or none
  std::map<std::pair<int, int>, std::unique_ptr<CudnnPool>> pools_;

  DeviceRanks ranks_;  // comm MPI_COMM_NULL: one rank
  std::unique_ptr<NcclGroup> nccl_;
  cudaStream_t sync_stream_ = nullptr;
  cudaEvent_t layer_done_ = nullptr, sums_done_ = nullptr;
  float* host_grads_ = nullptr;  // pinned: gradients summed on the host
  double* host_sums_ = nullptr;  // pinned: batch-norm sums
  std::function<void()> before_layer_;
  std::vector<cudaEvent_t> piece_events_;                // a ring of pieces_in_flight + 1
  size_t next_piece_event_ = 0;
  std::unique_ptr<PieceWindow<cudaEvent_t>> pieces_;     // made by set_pieces_in_flight
  bool nccl_transport_ = false, host_transport_ = false;  // what transport() found (for describe)

  bool graphs_ = false;
  ConvAlgorithms conv_algorithms_ = ConvAlgorithms::heuristic;
  bool tf32_ = false;
  bool has_batchnorm_ = false;
  std::map<int, StepGraphs> graphs_by_batch_;
  uint64_t* keys_ = nullptr;       // device: each layer's dropout key for this step
  uint64_t* host_keys_ = nullptr;  // pinned
};

}  // namespace burstpool::cuda
