#include "burstpool/memory.hpp"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "burstpool/device.hpp"
#include "burstpool/error.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"

namespace burstpool {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr uint64_t kFloat = sizeof(float);

// "1.25 GiB", "340 MiB", "12 KiB": three significant figures at most.
std::string human(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.3g} {}", v, units[u]);
}

// A kernel-reported value in bytes from "<key>: <n> kB" lines (/proc/meminfo).
uint64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  uint64_t value = 0;
  while (in >> name >> value >> unit)
    if (name == key + ":") return value * 1024;
  return 0;
}

// A number from a cgroup file; "max" (no limit), absent or unreadable: none.
uint64_t cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return 0;
  }
}

// What this process's cgroup may still allocate: v2 (memory.max less
// memory.current) or v1 (limit less usage); 0 when it has no limit.
uint64_t cgroup_room() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::string dir, limit_file, usage_file;
    if (line.compare(0, 2, "0:") == 0 && controllers.empty())
      dir = "/sys/fs/cgroup" + path, limit_file = "/memory.max", usage_file = "/memory.current";
    else if (controllers.find("memory") != std::string::npos)
      dir = "/sys/fs/cgroup/memory" + path, limit_file = "/memory.limit_in_bytes", usage_file = "/memory.usage_in_bytes";
    else
      continue;
    const uint64_t limit = cgroup_value(dir + limit_file);
    // v1 reports "no limit" as a huge number.
    if (limit == 0 || limit >= (uint64_t{1} << 60)) continue;
    const uint64_t used = cgroup_value(dir + usage_file);
    return limit > used ? limit - used : 1;
  }
  return 0;
}

// Bytes of one layer's (or every layer's) parameters, one copy, and state values.
struct LayoutBytes {
  uint64_t params = 0, state = 0;
};
LayoutBytes layout_bytes(const Layer& layer) {
  LayoutBytes b;
  for (const ParamSpec& p : layer.param_specs()) b.params += kFloat * p.shape.count();
  for (const ParamSpec& p : layer.state_specs()) b.state += kFloat * p.shape.count();
  return b;
}
LayoutBytes layout_bytes(const LayerGraph& g) {
  LayoutBytes b;
  for (const auto& layer : g.layers) {
    const LayoutBytes l = layout_bytes(*layer);
    b.params += l.params;
    b.state += l.state;
  }
  return b;
}

// One layer on a rank holding `capacity` samples of it: output and output
// gradient (the input layer has no gradient, the loss one scalar), and a
// copy of each input (and its gradient) that arrives in another slicing.
uint64_t activation_bytes(const LayerGraph& g, const Plan& plan, int i, int capacity) {
  const auto per = [&](int layer) { return kFloat * g.layers[layer]->output_shape().per_sample() * capacity; };
  uint64_t bytes = g.layers[i]->is_loss() ? 2 * kFloat : per(i) * (i == g.input ? 1 : 2);
  const RankSet& own = plan.ranks_of(g.layers[i]->name());
  for (int p : g.inputs[i])
    if (plan.ranks_of(g.layers[p]->name()) != own) bytes += per(p) * (p == g.input ? 1 : 2);
  return bytes;
}

void sort_largest_first(std::vector<LayerBytes>& layers) {
  std::stable_sort(layers.begin(), layers.end(), [](const LayerBytes& a, const LayerBytes& b) { return a.bytes > b.bytes; });
}

uint64_t dataset_bytes(const JobConfig& job, const LayerGraph& g) {
  return job_data_bytes(job, kFloat * g.layers[g.input]->output_shape().per_sample());
}

}  // namespace

void MemoryEstimate::add(const MemoryEstimate& o, uint64_t copies) {
  parameters += copies * o.parameters;
  optimizer += copies * o.optimizer;
  activations += copies * o.activations;
  buffers += copies * o.buffers;
  data += copies * o.data;
  workspace += copies * o.workspace;
  device_only += copies * o.device_only;
  if (copies > 0) layers.insert(layers.end(), o.layers.begin(), o.layers.end());
  sort_largest_first(layers);
}

std::string MemoryEstimate::describe(int largest) const {
  std::string s = fmt::format("{} (parameters {}, optimizer {}, activations {}, layer buffers {}, data {}, workspace {})",
                              human(total()), human(parameters), human(optimizer), human(activations), human(buffers),
                              human(data), human(workspace));
  if (device_only > 0) s += fmt::format(", and on the GPU only {}", human(device_only));
  if (layers.empty()) return s;
  s += "; largest layers:";
  for (int i = 0; i < std::min<int>(largest, static_cast<int>(layers.size())); ++i)
    s += fmt::format("{} {} {}", i ? "," : "", layers[i].name, human(layers[i].bytes));
  return s;
}

namespace {

// estimate_model_memory on a graph already built.
MemoryEstimate graph_memory(const LayerGraph& g, const Plan& plan, int rank, int threads, int optimizer_copies) {
  const LayoutBytes layout = layout_bytes(g);
  MemoryEstimate e;
  e.parameters = 2 * layout.params + layout.state;
  e.optimizer = static_cast<uint64_t>(optimizer_copies) * layout.params;
  uint64_t shared = 0;  // the largest shared scratch of the held layers
  for (int i = 0; i < static_cast<int>(g.layers.size()); ++i) {
    const Layer& layer = *g.layers[i];
    // Every rank holds every layer's parameters, gradients and optimizer state.
    const LayoutBytes own_layout = layout_bytes(layer);
    uint64_t bytes = (2 + static_cast<uint64_t>(optimizer_copies)) * own_layout.params + own_layout.state;
    const int capacity = Plan::slice_of(plan.ranks_of(layer.name()), rank, plan.global_batch).count;
    if (capacity > 0) {
      const uint64_t acts = activation_bytes(g, plan, i, capacity), own = layer.buffer_bytes(capacity, threads);
      e.activations += acts;
      e.buffers += own;
      bytes += acts + own;
      shared = std::max(shared, layer.shared_buffer_bytes(capacity, threads));
      if (i == g.input) e.workspace += acts;  // the batch staged for the input layer
    }
    if (bytes > 0) e.layers.push_back({layer.name(), bytes});
  }
  e.buffers += shared;
  sort_largest_first(e.layers);
  return e;
}

// One device model's GPU-only bytes (MemoryEstimate::device_only). A
// convolution's workspace is bounded by its explicit GEMM's column matrix
// (c kh kw x oh ow per sample): the deterministic algorithms burstpool picks
// need no more, and the transform ones (FFT, Winograd) are not deterministic.
uint64_t device_only_bytes(const LayerGraph& g, const Plan& plan, int rank, bool graphs, bool bf16) {
  uint64_t largest = 0, all = 0;
  for (const auto& layer : g.layers) {
    const int capacity = Plan::slice_of(plan.ranks_of(layer->name()), rank, plan.global_batch).count;
    if (layer->kind() != LayerKind::conv2d || capacity == 0) continue;
    const Shape in = layer->input_shapes()[0], out = layer->output_shape();
    const LayerAttrs& a = layer->attrs();
    const uint64_t columns = kFloat * capacity * static_cast<uint64_t>(in.c) * a.kh * a.kw * out.h * out.w;
    largest = std::max(largest, columns);
    all += columns;
  }
  return kCudaContextBytes + (graphs ? all : largest) + (bf16 ? layout_bytes(g).params : 0);
}

// graph_memory for a model of `job`, with its GPU-only bytes when the job runs on one.
MemoryEstimate job_model_memory(const JobConfig& job, const LayerGraph& g, const Plan& plan, int rank, int threads,
                                int optimizer_copies) {
  MemoryEstimate e = graph_memory(g, plan, rank, threads, optimizer_copies);
  if (job.device == "cuda") e.device_only = device_only_bytes(g, plan, rank, job.cuda_graphs, job.precision == "bf16");
  return e;
}

}  // namespace

MemoryEstimate estimate_model_memory(const ModelSpec& spec, const Plan& plan, int rank, int threads,
                                     int optimizer_copies) {
  return graph_memory(build_layer_graph(spec), plan, rank, threads, optimizer_copies);
}

MemoryEstimate estimate_job_memory(const JobConfig& job, const ModelSpec& spec, const Plan& plan, int rank,
                                   int world_size, int threads) {
  MemoryEstimate e;
  const LayerGraph g = build_layer_graph(spec);
  e.data = dataset_bytes(job, g);
  if (job.sync.strategy == "ssgd") {
    e.add(job_model_memory(job, g, plan, rank, threads, 1));
  } else {
    // Each learner: its replica, SGD velocity and sma momentum; the rank: z,
    // z_prev and the summed corrections (or shadow's averaging copies).
    const int learners =
        job.sync.learners > 0 ? job.sync.learners : job.sync.strategy == "sma" ? job.sync.max_learners : 1;
    e.add(job_model_memory(job, g, data_parallel_plan(spec, 1, job.batch_size), 0, threads, 2), learners);
    e.optimizer += 3 * layout_bytes(g).params;
  }
  if (!job.background.job_path.empty()) {
    // The calibration first trains the foreground data parallel (a planned
    // foreground only) and frees it, then builds the background job.
    MemoryEstimate reference;
    if (!job.plan_path.empty()) {
      reference = job_model_memory(job, g, data_parallel_plan_within(spec, world_size, job.batch_size), rank, threads, 1);
      reference.data = e.data;
    }
    const JobConfig bg = load_job(job.background.job_path);
    const ModelSpec bg_spec = load_job_model(bg);
    const LayerGraph bg_graph = build_layer_graph(bg_spec);
    const int bg_ranks = job.background.sync == "none" ? 1 : world_size;  // none: each rank the whole batch
    MemoryEstimate background = job_model_memory(bg, bg_graph, job_data_parallel_plan(bg, bg_spec, bg_ranks),
                                                 bg_ranks > 1 ? rank : 0, threads, 1);
    background.data = dataset_bytes(bg, bg_graph);
    e.add(background.total() >= reference.total() ? background : reference);
  }
  return e;
}

uint64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
}

uint64_t node_memory_available(double limit_gb, std::string* source) {
  if (limit_gb > 0) {
    if (source) *source = fmt::format("[job] memory_limit_gb = {:g}", limit_gb);
    return static_cast<uint64_t>(limit_gb * kGiB);
  }
  const uint64_t free = meminfo_bytes("MemAvailable"), room = cgroup_room();
  if (room > 0 && (free == 0 || room < free)) {
    if (source) *source = "the cgroup's memory limit less its usage";
    return room;
  }
  if (source) *source = "MemAvailable in /proc/meminfo";
  return free;
}

void require_memory(const JobConfig& job, const ModelSpec& spec, const Plan& plan, MPI_Comm comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const MemoryEstimate mine = estimate_job_memory(job, spec, plan, rank, size, omp_get_max_threads());

  MPI_Comm node;
  BP_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int node_rank = 0, node_size = 1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  unsigned long long host = mine.total(), node_host = 0, device = mine.device_total(), gpu_total = 0;
  BP_MPI_CHECK(MPI_Allreduce(&host, &node_host, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, node));
  // On a GPU, each device's ranks: the node's ranks that chose the same one (choose_device).
  const int devices = job.device == "cuda" ? cuda_device_count() : 0;
  if (devices > 0) {
    MPI_Comm sharing;
    BP_MPI_CHECK(MPI_Comm_split(node, node_rank % devices, node_rank, &sharing));
    BP_MPI_CHECK(MPI_Allreduce(&device, &gpu_total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, sharing));
    MPI_Comm_free(&sharing);
  }
  MPI_Comm_free(&node);

  std::string source;
  const uint64_t available = node_memory_available(job.memory_limit_gb, &source);
  int verdict = 0;  // 0 fits, 1 host memory, 2 device memory; the worst over all ranks decides
  std::string why;
  if (available > 0 && node_host > available) {
    verdict = 1;
    why = fmt::format("the {} rank(s) on {} need about {} together but {} is available ({}); rank {} needs {}",
                      node_size, world().host, human(node_host), human(available), source, rank, mine.describe());
  } else if (devices > 0) {
    const uint64_t device_free = cuda_free_bytes(world().local_rank);
    if (device_free > 0 && gpu_total > device_free) {
      verdict = 2;
      why = fmt::format("the ranks sharing this GPU need about {} of device memory but it has {} free; rank {} needs {} "
                        "there of {}",
                        human(gpu_total), human(device_free), rank, human(mine.device_total()), mine.describe());
    }
  }
  struct {
    int verdict, rank;
  } local{verdict, rank}, worst{};
  BP_MPI_CHECK(MPI_Allreduce(&local, &worst, 1, MPI_2INT, MPI_MAXLOC, comm));
  if (worst.verdict == 0) return;
  // The first failing rank's reason, so every rank throws the same line.
  int length = static_cast<int>(why.size());
  BP_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, worst.rank, comm));
  why.resize(length);
  BP_MPI_CHECK(MPI_Bcast(why.data(), length, MPI_CHAR, worst.rank, comm));
  throw Error(fmt::format("{}: the run does not fit in memory: {}. Lower [train] batch_size, use more ranks or a "
                          "smaller model; [job] memory_limit_gb overrides the memory assumed available",
                          job.file, why));
}

}  // namespace burstpool
