// The job file's keys: one row each, the one place a key, its default, its
// unit, its range and its meaning are written (load_job reads by it,
// `burstpool keys` and docs/jobs.md print it).
#include "burstpool/job.hpp"

#include <fmt/format.h>

#include <iterator>

namespace burstpool {
namespace {

const JobKey kKeys[] = {
  {"job", "name", "", "text", "", "Name used in progress output and metrics; default: the job file's name"},
  {"job", "model", "", "path", "", "Model file (.ini or .h5), relative to the job file's folder. Required"},
  {"job", "seed", "1", "integer", "[0, 2147483647]", "Seed for weight initialisation, shuffling, dropout and synthetic data"},
  {"job", "device", "cpu", "cpu | cuda | twin", "", "Where layers run. cuda: the GPU of the rank's node-local rank (ranks may share one), any plan or [sync] strategy; a background job may say cuda too (docs/cuda.md); needs a build with the CUDA backend. twin: for testing, the device code paths with a second copy of the model in host memory standing in for the GPU (the CPU's results, slower; docs/cuda.md)"},
  {"job", "cuda_graphs", "false", "boolean", "", "device = cuda: capture each training step's forward and backward layers in CUDA graphs and replay them, where nothing in them waits for the host (one rank or ranks sharing a GPU, no batch-norm group sums; docs/cuda.md)"},
  {"job", "device_calls", "whole_model", "whole_model | per_layer", "", "device = cuda or twin, a data-parallel plan: whole_model: one device call per forward and one per backward, the gradient sums inside it (what cuda_graphs captures); per_layer: layer by layer, as burst plans run, the gradient sums in the executor's buckets (a background job's through host memory). The same arithmetic; the choice is for measuring which is faster (docs/cuda.md)"},
  {"job", "cudnn_cache", "", "path | none", "", "cudnn_algorithms = measured: a JSON file keeping the algorithms measured for each convolution shape (batch included) and precision, so later runs use the same ones, and repeat bit for bit, without timing them again; it names the GPU and cuDNN version, and one made for another is refused with a warning and rebuilt. Empty: <[output] checkpoint>.cudnn.json when there is a checkpoint, else none; none: no cache (docs/cuda.md)"},
  {"job", "precision", "fp32", "fp32 | tf32 | bf16", "", "Arithmetic of the layers' matrix products and convolutions. fp32: single precision throughout (the CPU's results within float rounding); tf32 (device = cuda): cuBLAS and cuDNN round the inputs of products to TF32 (a 10-bit mantissa) on the tensor cores and sum in fp32, as PyTorch does for convolutions by default; weights, gradients, optimizer state and batch-norm statistics stay fp32. bf16: every layer's output and the gradient it receives are rounded to bf16 (an 8-bit significand), and linear and conv2d layers use their weights rounded to bf16, summing in fp32 (on cuda on the TF32 tensor cores, which multiply bf16 values exactly); master weights, gradients, optimizer state, batch-norm statistics, the loss and checkpoints stay fp32. The values stay in float storage, so bf16 saves no memory: on the CPU it is slower than fp32, on a GPU about as fast as tf32 (docs/cuda.md)"},
  {"job", "cudnn_algorithms", "heuristic", "heuristic | measured | gemm", "", "device = cuda: how each convolution's cuDNN algorithms are chosen, deterministic ones only. heuristic: cuDNN's heuristic ranking, the same on every run, so runs repeat bit for bit; measured: each candidate timed once at the start, as PyTorch's cudnn.benchmark: faster, but the choice, and with it the bits, can change from run to run, unless cudnn_cache keeps it; gemm: heuristic among the algorithms that sum products directly (no FFT or Winograd transforms, which round more): results within float rounding of the CPU's, slower (docs/cuda.md)"},
  {"job", "threads", "0", "threads", "[0, 1024]", "Threads per rank; 0: OMP_NUM_THREADS, else 1 under MPI with several ranks, else all cores"},
  {"job", "memory_limit_gb", "0", "GiB", "[0, 1048576]", "Memory the ranks of one node may use together, against which the run's estimate (parameters, optimizer state, activations, layer buffers, data; docs/jobs.md) is checked before anything large is allocated; 0: what the node has free (MemAvailable, or the cgroup's limit when lower, as under Slurm). A run whose estimate exceeds it is refused, naming its largest layers. On a GPU the device's free memory is checked too, against the estimate less data and host staging plus what only the GPU holds: each device model's CUDA context (48 MiB), its largest cuDNN convolution workspace (every convolution's with cuda_graphs) and in bf16 its rounded weights"},
  {"data", "source", "fashion-mnist", "fashion-mnist | hdf5 | synthetic", "", "Where samples come from"},
  {"data", "dir", "/usr/share/datasets/fashion-mnist", "path", "", "fashion-mnist: folder with the four IDX files (.gz or plain)"},
  {"data", "train_file", "", "path", "", "hdf5: training file, relative to the job file's folder"},
  {"data", "test_file", "", "path", "", "hdf5: test file; empty: no evaluation"},
  {"data", "images_dataset", "images", "HDF5 path", "", "hdf5: images dataset, (N,H,W) or (N,C,H,W), uint8 or float"},
  {"data", "labels_dataset", "labels", "HDF5 path", "", "hdf5: labels dataset, (N) integers"},
  {"data", "check_finite", "true", "boolean", "", "hdf5: refuse float images holding NaN or infinite values: at load when read whole (one pass over the data; false skips it for very large files), else as each batch is read"},
  {"data", "read", "auto", "auto | whole | batches", "", "hdf5: how images are held. whole: every rank reads all of them into memory at the start; batches: only the labels are held, and each rank reads from the file just the samples of each batch it trains on (hyperslabs; the page cache keeps a file that fits in memory there); auto: batches for a file whose images take more than 512 MiB as float32, else whole. Results are the same bit for bit"},
  {"data", "normalize_mean", "0", "pixel value", "[-1e6, 1e6]", "Subtracted after scaling bytes to [0,1]"},
  {"data", "normalize_std", "1", "pixel value", "(0, 1e6]", "Divides after subtracting the mean; > 0"},
  {"data", "synthetic_train_samples", "1024", "samples", "[1, 100000000]", "synthetic: training set size"},
  {"data", "synthetic_test_samples", "256", "samples", "[0, 100000000]", "synthetic: test set size; 0: no evaluation"},
  {"train", "batch_size", "64", "samples", "[1, 10000000]", "Global batch per step, summed over all ranks (sync.strategy = ssgd). For sma, shadow and local-sgd use learner_batch_size; batch_size still works there as each learner's batch, with a note"},
  {"train", "learner_batch_size", "0", "samples", "[0, 10000000]", "sync.strategy = sma, shadow or local-sgd: the samples each learner takes per iteration; 0: batch_size"},
  {"train", "steps", "0", "steps", "[0, 2147483647]", "Training steps; 0: epochs decide"},
  {"train", "epochs", "1", "epochs", "[1, 1000000]", "Passes over the training set when steps = 0 (last partial batch dropped)"},
  {"train", "eval_every", "0", "steps", "[0, 2147483647]", "Test-set evaluation cadence; 0: at the end of every epoch. Always at the end"},
  {"train", "log_every", "100", "steps", "[1, 2147483647]", "Progress line cadence on rank 0"},
  {"train", "target_accuracy", "0", "fraction", "[0, 1]", "Test accuracy to reach: the metrics record the training seconds and epochs to the first evaluation at or above it; 0: none"},
  {"train", "stop_at_target", "false", "boolean", "", "End training at the first evaluation that reaches target_accuracy"},
  {"optimizer", "type", "sgd", "sgd", "", "Optimizer"},
  {"optimizer", "lr", "0.1", "learning rate", "(0, 100]", "Base learning rate"},
  {"optimizer", "momentum", "0.9", "factor", "[0, 1)", "Momentum; 0 disables it"},
  {"optimizer", "nesterov", "false", "boolean", "", "Nesterov momentum"},
  {"optimizer", "weight_decay", "0", "factor", "[0, 1]", "L2 weight decay added to every parameter's gradient"},
  {"schedule", "type", "constant", "constant | step | cosine", "", "Learning-rate schedule over training steps"},
  {"schedule", "warmup_steps", "0", "steps", "[0, 2147483647]", "Linear warm-up from lr/warmup_steps to lr"},
  {"schedule", "step_size", "0", "steps", "[0, 2147483647]", "step: multiply the rate by gamma every step_size steps"},
  {"schedule", "gamma", "0.1", "factor", "(0, 1]", "step: decay factor"},
  {"schedule", "min_lr", "0", "learning rate", "[0, optimizer.lr]", "cosine: rate reached at the last step"},
  {"parallel", "plan", "", "path | auto", "", "Plan file (JSON) giving each layer its ranks; empty: data parallel over all ranks. Relative to the job file's folder. auto: planned at start-up from the layer and network profiles in profile_cache, measured there once (docs/parallel.md)"},
  {"parallel", "amp_limit", "2", "ratio", "[1, 1000000]", "plan = auto: the amplification limit: a layer gets n ranks only if n x its time on them <= amp_limit x its time on one (docs/profiles.md)"},
  {"parallel", "amp_rule", "compute", "compute | layer-time", "", "plan = auto: what the limit bounds: the layer's compute, or its compute, gradient sync and incoming transfers (DeepPool's rule)"},
  {"parallel", "auto_min_gain", "0.1", "fraction", "[0, 0.9]", "plan = auto: data parallel unless the plan is predicted at least this fraction better: its step faster without a [background] job; with one, the throughput of foreground and background together (the background filling the rank time each leaves idle) higher than data parallel's beside it (the predictions err by about 10% either way, docs/results.md, so a plan predicted barely better can do worse)"},
  {"parallel", "branches", "auto", "auto | in-turn | at-once", "", "plan = auto: the branches of a fork (Inception, ResNet blocks) at once on disjoint ranks where that is predicted faster, else in turn (auto); always in turn; or at once wherever the ranks allow (at-once, for studies). On cuda, always in turn: NCCL moves slices in step with the layer order, so branches on other ranks would wait"},
  {"parallel", "profile_cache", "burstpool-profiles", "path", "", "plan = auto: folder of cached layer profiles (per model, device, threads and host) and network profiles (per rank count and hosts), relative to the working folder"},
  {"parallel", "bucket_mb", "25", "MiB", "(0, 4096]", "Gradient allreduce bucket size"},
  {"parallel", "progress_us", "1000", "microseconds", "[0, 1000000]", "While gradient sums are in flight over MPI, a helper thread turns MPI's progress engine this often, so a sum started during backward advances while layers compute (Open MPI moves a non-blocking allreduce only inside MPI calls); 0: no helper, sums advance only between layers (docs/parallel.md)"},
  {"parallel", "layer_timing", "false", "boolean", "", "Report transfer and allreduce seconds per layer in the metrics; each layer's gradient allreduce then runs on its own, without overlap"},
  {"parallel", "sync_batchnorm", "true", "boolean", "", "Batch-norm statistics over all ranks of a layer (the same result as one rank); false: each rank normalises its own slice, as PyTorch DDP does without SyncBatchNorm, and no reduction runs inside the step (evaluations and checkpoints then use each layer's first rank's running statistics)"},
  {"output", "metrics", "", "path", "", "Metrics JSON written at the end (relative to the working folder); {job_id}, {job} and {ranks} expand to the Slurm job id (or 'local'), the job name and the rank count"},
  {"output", "log", "", "path", "", "Progress as JSON Lines: a record at the start, per progress line, per evaluation (wall seconds, step, epoch, loss, samples/s, learning rate, accuracy) and at the end, flushed as written and appended to, so a resumed run continues it (docs/jobs.md). Placeholders as for metrics; empty: none"},
  {"output", "checkpoint", "", "path", "", "HDF5 checkpoint, written atomically at the end and at the cadences below; the previous one is kept as <path>.prev. --resume continues from the newer valid one. Placeholders as for metrics"},
  {"output", "checkpoint_every", "0", "steps", "[0, 2147483647]", "Checkpoint cadence in steps; 0: only at the end"},
  {"output", "checkpoint_seconds", "0", "seconds", "[0, 10000000]", "Checkpoint cadence in wall seconds (decided on rank 0); 0: off"},
  {"sync", "strategy", "ssgd", "ssgd | sma | shadow | local-sgd", "", "How replicas stay together (docs/learners.md): ssgd = synchronous SGD over the plan; sma = synchronous model averaging of small-batch learners; shadow = learners never wait, a thread per rank averages models in the background; local-sgd = average every local_steps. For sma, shadow and local-sgd, [train] learner_batch_size is each learner's batch"},
  {"sync", "learners", "0", "learners", "[0, 64]", "Learners (model replicas, one thread each) per rank; 0: auto-tuned for sma, 1 otherwise"},
  {"sync", "max_learners", "8", "learners", "[1, 64]", "Most learners per rank the auto-tuner tries"},
  {"sync", "autotune_threshold", "0.1", "fraction", "[0, 1]", "The auto-tuner adds a learner while throughput grows by more than this; on the first smaller gain it removes the last one and stops"},
  {"sync", "autotune_steps", "30", "iterations", "[1, 100000]", "Iterations timed per learner count while auto-tuning (after 3 untimed)"},
  {"sync", "alpha", "0.1", "factor", "(0, 1]", "sma: pull of each learner towards the average model"},
  {"sync", "average_momentum", "0.9", "factor", "[0, 1)", "sma: momentum on the average model"},
  {"sync", "sma_average", "device", "device | host", "", "sma with [job] device = cuda or twin: where each learner's copy of the average model z lives. device: z and z_prev stay on the device and move there by the same float operations as on the host, so per iteration only the learner's correction comes back and the summed correction goes up; host: z goes up before every learner step"},
  {"sync", "local_steps", "8", "iterations", "[1, 1000000]", "local-sgd: iterations between model averages"},
  {"sync", "agreement_lag", "32", "iterations", "[0, 1000]", "sma, shadow, local-sgd: iterations between the start of an iteration's agreement (the ranks' small reduction of stop signals, loss and checkpoint clock) and the iteration that waits for it; 0: each iteration waits for its own. A lag lets that message queue behind a strategy's sums on a slow link without the trainers waiting for it; a stop, a non-finite loss or a late checkpoint is then acted on that many iterations late, and progress lines report the losses agreed so far (docs/learners.md)"},
  {"sync", "shadow_pause_ms", "0", "milliseconds", "[0, 60000]", "shadow: pause between two background averaging rounds"},
  {"sync", "shadow_rule", "average", "average | elastic | block-momentum", "", "shadow: what each background round does with the ranks' snapshots (ShadowSync's rules, docs/learners.md): move each model to the mean; elastic averaging (each model pulled towards a centre, the centre towards the models, by shadow_alpha); or block momentum (BMUF: a global model moved by a momentum-filtered block update)"},
  {"sync", "shadow_alpha", "0", "factor", "[0, 1]", "shadow_rule = elastic: the pull between each model and the centre (a round moves the centre by shadow_alpha x the sum of the models' distances from it); 0: 1 / N, N the models averaged (learners on all ranks). A value at or above 2 / (N + 1) is refused: the centre and the models' mean would move apart every round"},
  {"sync", "shadow_block_momentum", "0.5", "factor", "[0, 1)", "shadow_rule = block-momentum: the momentum on the block update"},
  {"sync", "shadow_block_lr", "1", "factor", "(0, 2]", "shadow_rule = block-momentum: the block learning rate (1 with momentum 0 is plain averaging)"},
  {"background", "job", "", "path", "", "A background job file trained beside this one on the same ranks (data parallel, or a replica per rank: sync), in its own thread (at idle priority when its layers run on the CPU: thread_priority), on its own communicator (docs/multiplexing.md); empty or none: no background job (--set background.job=none switches it off). Relative to this job file's folder"},
  {"background", "calibrate_steps", "10", "steps", "[2, 1000]", "Steps each job first runs alone to measure its speed alone: a planned foreground trained data parallel (the cluster-throughput reference), the background, then the foreground under its plan; >= 2"},
  {"background", "max_slowdown", "1.1", "factor", "[1, 10]", "The background starts a piece (one layer) only while the foreground's last step took at most this times its time alone"},
  {"background", "pause_in_allreduce", "false", "boolean", "", "Also hold the background back while the foreground waits in a reduction (for devices where the two compete; on CPUs that wait is the background's chance)"},
  {"background", "wait_spin_us", "200", "microseconds", "[0, 100000]", "While a background job runs, a foreground wait polls this long before it starts sleeping"},
  {"background", "wait_sleep_us", "20", "microseconds", "[1, 100000]", "... then sleeps between polls, leaving the core to the background: at least this long"},
  {"background", "wait_predict", "0.8", "fraction", "[0, 1)", "A foreground wait at a place where the last two waits took at least T (the shorter) first sleeps this fraction of T, polling only every wait_max_sleep_us: the background gets the foreground's idle stretch in long pieces"},
  {"background", "wait_predict_min_us", "2000", "microseconds", "[0, 10000000]", "... but only where T is at least this long: a foreground that sleeps through a wait wakes late and to a cache the background has used, which only a long wait repays (on LeNet-5's millisecond waits it cost the foreground more than the background gained); shorter waits poll and back off as above"},
  {"background", "wait_max_sleep_us", "1000", "microseconds", "[1, 1000000]", "... and never sleeps longer than this between polls: MPI advances the rank's other transfers (a slice it sends, a receive its sender waits on) only while it polls, so longer sleeps hold up its peers"},
  {"background", "sync", "data-parallel", "data-parallel | none", "", "How the background job's ranks train together: data parallel over the same ranks (its gradients summed on its own communicator), or none: each rank trains a replica of its own on the whole background batch, from the job's seed plus its rank, and meets no other rank (as DeepPool's background jobs do); its rates are then summed over the ranks, and its checkpoint holds rank 0's replica"},
  {"background", "pieces_in_flight", "2", "pieces", "[1, 8]", "On a GPU: how many of the background's pieces (a layer's forward or backward each) may be queued on its stream at once; the gate is asked before each, and the host waits for the oldest only when this many are queued (1: it waits for each piece before asking about the next)"},
  {"background", "thread_priority", "auto", "auto | idle | normal", "", "The background thread's scheduling: idle (SCHED_IDLE, else nice 19: it runs only while the foreground leaves the core free), normal, or auto: idle when the background job's layers run on the CPU, normal when they run on a device (cuda, twin), where the thread only launches work and the device's stream priorities order it"},
  {"background", "cuda_wait", "block", "block | spin", "", "With a background job and a GPU: how the process's threads wait for the GPU. block (cudaDeviceScheduleBlockingSync) sleeps, leaving the core to the other job's thread; spin polls, which answers a few microseconds sooner but holds the core. Process-wide (CUDA sets it per device): the foreground job's key decides"},
  {"background", "wait_backoff", "0.02", "fraction", "[0, 1]", "... and at least this fraction of the time waited so far, so long waits hand over the core in long pieces; the foreground then wakes at most about this fraction of its wait late"},
};

}  // namespace

const std::vector<JobKey>& job_schema() {
  static const std::vector<JobKey> keys(std::begin(kKeys), std::end(kKeys));
  return keys;
}

namespace {
// A table cell's text: a bare '|' would end the cell, so it is escaped
// (Markdown viewers show "\|" as '|', also inside code spans).
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

std::string job_schema_markdown() {
  std::string out = "| section | key | default | unit | range | meaning |\n|---|---|---|---|---|---|\n";
  for (const JobKey& k : job_schema())
    out += fmt::format("| [{}] | `{}` | {} | {} | {} | {} |\n", k.section, k.key,
                       *k.fallback ? fmt::format("`{}`", cell(k.fallback)) : "(none)", cell(k.unit),
                       *k.range ? fmt::format("`{}`", cell(k.range)) : "", cell(k.meaning));
  return out;
}

}  // namespace burstpool
