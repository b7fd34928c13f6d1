#include "burstpool/auto_plan.hpp"

#include <mpi.h>

#include <algorithm>
#include <filesystem>

#include "burstpool/error.hpp"
#include "burstpool/planner.hpp"
#include "burstpool/profile.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/session.hpp"
#include "burstpool/simulator.hpp"

namespace burstpool {
namespace {

namespace fs = std::filesystem;

// A name part safe in any file system: letters, digits, '.', '-', '_'.
std::string safe(const std::string& text) {
  std::string out = text;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  return out;
}

// Per-rank batches a plan can give a layer, 1 .. the global batch: powers of
// two, up to 128 (the cost model extends the largest one's per-sample time).
std::vector<int> profile_batches(int global_batch) {
  std::vector<int> batches;
  for (int b = 1; b <= std::min(global_batch, 128); b *= 2) batches.push_back(b);
  return batches;
}

// Rank 0: the cached layer profile, or a new one measured and cached.
ModelProfile layer_profile(const JobConfig& job, const ModelSpec& spec, int threads, const std::string& file) {
  if (fs::exists(file)) {
    try {
      ModelProfile p = load_profile(file, spec);
      if (p.threads == threads && p.device == job.device) {
        fmt::print("plan auto: layer profile from {}\n", file);
        return p;
      }
      fmt::print(stderr, "burstpool: warning: {} was measured with {} thread(s) on {}, not {} on {}; measuring again\n",
                 file, p.threads, p.device, threads, job.device);
    } catch (const Error& e) {
      fmt::print(stderr, "burstpool: warning: cached profile refused: {}; measuring again\n", e.what());
    }
  }
  ProfileOptions o;
  o.batches = profile_batches(job.batch_size);
  o.warmup = 1;
  o.repeats = 3;
  o.device = job.device;
  o.threads = threads;
  fmt::print("plan auto: measuring the layer profile of '{}' at batches {} (once: cached in {})\n", spec.name,
             fmt::join(o.batches, ","), file);
  std::fflush(stdout);
  ModelProfile p = profile_model(spec, o);
  save_profile(p, file);
  return p;
}

// Collective: rank 0's link models, on every rank (the measured allreduce
// points too).
std::pair<LinkModel, LinkModel> broadcast_links(const NetworkProfile& net) {
  double links[5] = {net.p2p.latency_s, net.p2p.bandwidth_bytes_per_s, net.allreduce.latency_s,
                     net.allreduce.bandwidth_bytes_per_s, net.allreduce.core_seconds_per_byte};
  BP_MPI_CHECK(MPI_Bcast(links, 5, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  std::vector<std::pair<double, double>> points = net.allreduce.measured;
  int count = static_cast<int>(points.size());
  BP_MPI_CHECK(MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD));
  points.resize(count);
  BP_MPI_CHECK(MPI_Bcast(points.data(), 2 * count, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  LinkModel allreduce{links[2], links[3], links[4]};
  allreduce.measured = std::move(points);
  return {{links[0], links[1]}, allreduce};
}

// Rank 0: the cached network profile in `file`, if it is for `world_size`
// ranks and measured sums of `required_bytes` (else why not, on stderr).
bool cached_network(const std::string& file, int world_size, double required_bytes, NetworkProfile& net) {
  if (!fs::exists(file)) return false;
  try {
    net = load_network(file);
  } catch (const Error& e) {
    fmt::print(stderr, "burstpool: warning: cached network profile refused: {}; measuring again\n", e.what());
    return false;
  }
  if (net.ranks != world_size)
    fmt::print(stderr, "burstpool: warning: {} is for {} ranks; measuring again\n", file, net.ranks);
  else if (net.largest_bytes < required_bytes)
    fmt::print("plan auto: {} measured sums up to {:.3g} MB, this job makes sums of {:.3g} MB; measuring again\n",
               file, net.largest_bytes / 1e6, required_bytes / 1e6);
  else
    return true;
  return false;
}

// Collective: the cached network profile (rank 0 reads it), or one measured
// by every rank up to the job's largest sum and cached by rank 0. Every rank
// returns rank 0's models.
std::pair<LinkModel, LinkModel> network(const std::string& file, int world_size, double bucket_bytes,
                                        double largest_sum) {
  const bool root = world().rank == 0;
  NetworkProfile net;
  int cached = root && cached_network(file, world_size, largest_sum, net);
  BP_MPI_CHECK(MPI_Bcast(&cached, 1, MPI_INT, 0, MPI_COMM_WORLD));
  if (cached && root) fmt::print("plan auto: network profile from {}: {}\n", file, network_summary(net));
  if (!cached) {
    if (root) fmt::print("plan auto: measuring the network between {} ranks (once: cached in {})\n", world_size, file);
    std::fflush(stdout);
    NetworkOptions options;
    options.max_bytes = std::max(16.0 * (1 << 20), largest_sum);
    options.required_bytes = largest_sum;
    options.repeats = 3;
    options.seconds_per_size = 1;
    options.core_bytes = bucket_bytes;  // the size of the sums the job makes
    net = profile_network(options);
    if (root) {
      save_network(net, file);
      fmt::print("plan auto: network: {}\n", network_summary(net));
    }
  }
  return broadcast_links(net);
}

// Collective: the job's links, from the network profile of its ranks' hosts
// in the profile cache (one rank: a link that costs nothing).
std::pair<LinkModel, LinkModel> job_links(const JobConfig& job, double largest_sum) {
  const WorldInfo& w = world();
  if (w.size == 1) return {{1e-6, 1e10}, {1e-6, 1e10}};
  std::string hosts;
  for (const auto& [host, count] : world_hosts()) hosts += fmt::format("{}x{}_", safe(host), count);
  return network(
      fmt::format("{}/network-{}ranks-{:016x}.json", job.profile_cache, w.size, std::hash<std::string>{}(hosts)),
      w.size, static_cast<double>(job.bucket_bytes), largest_sum);
}

std::string plan_file(const JobConfig& job, const std::string& cache, int ranks) {
  if (job.metrics_path.empty()) return fmt::format("{}/{}-{}ranks.plan.json", cache, safe(job.name), ranks);
  std::string stem = job.metrics_path;
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0) stem.resize(stem.size() - 5);
  return stem + ".plan.json";
}

// The planner's predicted steps; with a background job, both plans
// simulated for the core time they leave free, on `cores` shared cores
// (simulate's cores; 0: one per rank).
AutoCandidates candidates(const JobConfig& job, const ModelSpec& spec, const ModelProfile& profile,
                          const PlanResult& plan, const PlanResult& dp, const LinkModel& p2p,
                          const LinkModel& allreduce, bool background, int cores) {
  AutoCandidates c{plan.iteration_s, dp.iteration_s};
  if (!background) return c;
  const double bucket = static_cast<double>(job.bucket_bytes);
  const Simulation with_plan = simulate(spec, profile, plan.plan, p2p, allreduce, cores, false, bucket);
  const Simulation with_dp = simulate(spec, profile, dp.plan, p2p, allreduce, cores, false, bucket);
  c.plan_cluster = cluster_throughput_bound(with_plan, with_dp);
  c.data_parallel_cluster = cluster_throughput_bound(with_dp, with_dp);
  return c;
}

// Collective. The cores the ranks share when all of them run on this one
// node and they (times their threads) outnumber the cores they may use
// together, for simulate's `cores`; else 0 (a core per rank). Only a
// background job's candidates are simulated. A rank idle while its
// core-mate computes frees nothing a background could use: a plan that
// idles half the ranks frees no core when their cores run the other half.
int shared_cores(int threads) {
  const WorldInfo& w = world();
  const int node_cpus = node_cores();  // collective: before any return
  if (w.size != w.local_size || w.size * threads <= node_cpus) return 0;
  if (w.rank == 0)
    fmt::print("plan auto: {} ranks, {} thread{} each, share {} cores: a background's room is simulated per core\n",
               w.size, threads, threads == 1 ? "" : "s", node_cpus);
  return std::max(1, node_cpus / threads);
}

}  // namespace

double largest_sum_bytes(const ModelProfile& profile, double bucket_bytes) {
  double total = 0, largest_layer = 0;
  for (const LayerProfile& l : profile.layers) {
    total += l.parameter_bytes;
    largest_layer = std::max(largest_layer, l.parameter_bytes);
  }
  return std::max(std::min(bucket_bytes, total), largest_layer);
}

std::string data_parallel_instead(const AutoCandidates& c, bool background, double min_gain) {
  if (!background) {
    if (c.plan_step_s <= (1 - min_gain) * c.data_parallel_step_s) return "";
    return fmt::format("the plan under the amplification limit ({:.2f} ms) is not predicted at least {:.0f}% faster "
                       "than data parallel ({:.2f} ms; [parallel] auto_min_gain) and no [background] job uses the "
                       "rank time it frees",
                       1e3 * c.plan_step_s, 100 * min_gain, 1e3 * c.data_parallel_step_s);
  }
  if (c.plan_cluster >= (1 + min_gain) * c.data_parallel_cluster) return "";
  return fmt::format("beside the [background] job, the plan under the amplification limit is predicted to give at "
                     "most {:.2f}x data parallel's throughput alone (foreground and background together), data "
                     "parallel beside it {:.2f}x: not at least {:.0f}% more ([parallel] auto_min_gain)",
                     c.plan_cluster, c.data_parallel_cluster, 100 * min_gain);
}

AutoPlan auto_plan(const JobConfig& job, const ModelSpec& spec, int threads) {
  const WorldInfo& w = world();
  const std::string cache = job.profile_cache;
  int made = 1;
  if (w.rank == 0) {
    std::error_code error;
    fs::create_directories(cache, error);
    made = !error && fs::is_directory(cache);
  }
  BP_MPI_CHECK(MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD));
  if (!made)
    throw Error(fmt::format("{}: [parallel] profile_cache: cannot create the folder {}", job.file, cache));
  ModelProfile profile;  // rank 0's
  double largest_sum = 0;
  if (w.rank == 0) {
    profile = layer_profile(job, spec, threads,
                            fmt::format("{}/{}-{}-{}-{}threads-{}.json", cache, safe(spec.name), model_fingerprint(spec),
                                        safe(job.device), threads, safe(w.host)));
    largest_sum = largest_sum_bytes(profile, static_cast<double>(job.bucket_bytes));
  }
  BP_MPI_CHECK(MPI_Bcast(&largest_sum, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  const auto [p2p, allreduce] = job_links(job, largest_sum);
  const bool background = !job.background.job_path.empty();
  const int cores = background ? shared_cores(threads) : 0;
  std::vector<int> counts(spec.layers.size(), 1), firsts(spec.layers.size(), 0);
  double times[2] = {0, 0};
  AutoPlan result;
  result.path = plan_file(job, cache, w.size);
  if (w.rank == 0) {
    PlannerOptions o;
    o.ranks = w.size;
    o.global_batch = job.batch_size;
    o.amp_limit = job.amp_limit;
    o.amp_rule = amp_rule_named(job.amp_rule);
    // Branches at once need slices sent as soon as they are made: the CPU's and the twin's MPI transport.
    o.branches = job.device == "cuda" ? PlannerOptions::Branches::in_turn : branches_named(job.branches);
    o.p2p = p2p;
    o.allreduce = allreduce;
    const PlanResult best = plan_model(spec, profile, o);
    const PlanResult dp =
        plan_cost(spec, profile, o, data_parallel_plan(spec, std::min(w.size, job.batch_size), job.batch_size));
    const std::string why =
        best.plan.layer_ranks == dp.plan.layer_ranks
            ? std::string()
            : data_parallel_instead(candidates(job, spec, profile, best, dp, p2p, allreduce, background, cores),
                                    background, job.auto_min_gain);
    if (!why.empty()) fmt::print("plan auto: {}: data parallel\n", why);
    const PlanResult& planned = why.empty() ? best : dp;
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      counts[i] = static_cast<int>(planned.plan.layer_ranks[i].size());
      firsts[i] = planned.plan.layer_ranks[i].front();
    }
    times[0] = planned.iteration_s;
    times[1] = dp.iteration_s;
    save_plan(planned.plan, result.path);
  }
  BP_MPI_CHECK(MPI_Bcast(counts.data(), static_cast<int>(counts.size()), MPI_INT, 0, MPI_COMM_WORLD));
  BP_MPI_CHECK(MPI_Bcast(firsts.data(), static_cast<int>(firsts.size()), MPI_INT, 0, MPI_COMM_WORLD));
  BP_MPI_CHECK(MPI_Bcast(times, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  result.plan = job_data_parallel_plan(job, spec, w.size);
  result.plan.source = result.path;
  for (size_t i = 0; i < counts.size(); ++i) {
    RankSet& set = result.plan.layer_ranks[i];
    set.resize(counts[i]);
    for (int k = 0; k < counts[i]; ++k) set[k] = firsts[i] + k;
  }
  result.predicted_step_s = times[0];
  result.data_parallel_step_s = times[1];
  if (w.rank == 0) {
    const long fewer = std::count_if(counts.begin(), counts.end(), [&](int n) { return n < w.size; });
    fmt::print("plan auto: {} of {} layers on fewer than {} ranks; predicted step {:.2f} ms (data parallel {:.2f} ms); "
               "amplification limit {} ({} rule); plan in {}\n",
               fewer, counts.size(), w.size, 1e3 * times[0], 1e3 * times[1], job.amp_limit, job.amp_rule, result.path);
  }
  return result;
}

}  // namespace burstpool
