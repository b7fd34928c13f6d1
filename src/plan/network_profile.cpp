// The network profile: ping-pong and allreduce times measured by every rank
// together, fitted to latency + bytes / bandwidth, and its file.
//
// Bounded in time on any link: each message size gets a time budget (its
// repeats stop early once it is spent), the sweep stops growing once the next
// size would not fit its budget, and a single message that does not complete
// within the deadline ends the run with an error naming the size and the
// likely cause, instead of a silent wait on a stalled link.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "burstpool/error.hpp"
#include "burstpool/json_io.hpp"
#include "burstpool/profile.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmup = 2;  // untimed operations before each size's timed ones


std::string size_text(double bytes) {
  if (bytes >= 1 << 20) return fmt::format("{:g} MiB", bytes / (1 << 20));
  if (bytes >= 1 << 10) return fmt::format("{:g} KiB", bytes / (1 << 10));
  return fmt::format("{:g} B", bytes);
}

// Waits for `requests` by polling, so that a message that never arrives
// becomes an error after `deadline_s` rather than a wait without end.
void wait_within(std::vector<MPI_Request>& requests, double deadline_s, const std::string& what) {
  const auto t0 = Clock::now();
  int done = 0;
  while (true) {
    BP_MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (seconds_since(t0) > deadline_s)
      throw Error(fmt::format(
          "network profile: {} did not complete within {:g} s: the link is stalled or far slower than "
          "expected (a tc tbf link whose burst is below the MTU stalls every full-size packet); "
          "--deadline sets the limit",
          what, deadline_s));
  }
}

// One timed operation of a size's series, repeated collectively on `comm`:
// `kWarmup` untimed, then up to `repeats` timed while the size's budget lasts
// (at least one). Rank 0 of `comm` decides when to stop, so every member runs
// the same number. Returns this rank's times (callers keep rank 0's).
template <class Op>
std::vector<double> timed_series(MPI_Comm comm, int repeats, double budget_s, Op&& op) {
  std::vector<double> times;
  const auto start = Clock::now();
  for (int r = 0;; ++r) {
    BP_MPI_CHECK(MPI_Barrier(comm));
    const auto t0 = Clock::now();
    op();
    if (r >= kWarmup) times.push_back(seconds_since(t0));
    // Past the warm-up at least one timed run, however long the warm-up took.
    int more = times.empty() || (static_cast<int>(times.size()) < repeats && seconds_since(start) < budget_s);
    BP_MPI_CHECK(MPI_Bcast(&more, 1, MPI_INT, 0, comm));
    if (!more) return times;
  }
}

// Median one-way time of a `bytes` message between ranks 0 and 1 (a ping-pong
// on `pair`, their communicator; MPI_COMM_NULL elsewhere), as rank 0 saw it,
// on every rank.
double measure_p2p(MPI_Comm pair, std::vector<float>& buffer, double bytes, const NetworkOptions& options) {
  double one_way = 0;
  if (pair != MPI_COMM_NULL) {
    const int me = world().rank, peer = 1 - me, count = static_cast<int>(bytes / 4);
    auto ping_pong = [&] {
      std::vector<MPI_Request> req(1);
      for (int leg = 0; leg < 2; ++leg) {
        if ((leg == 0) == (me == 0))
          BP_MPI_CHECK(MPI_Isend(buffer.data(), count, MPI_FLOAT, peer, leg, pair, &req[0]));
        else
          BP_MPI_CHECK(MPI_Irecv(buffer.data(), count, MPI_FLOAT, peer, leg, pair, &req[0]));
        wait_within(req, options.deadline_s, fmt::format("a {} message between ranks 0 and 1", size_text(bytes)));
      }
    };
    one_way = median(timed_series(pair, options.repeats, options.seconds_per_size / 2, ping_pong)) / 2;
  }
  BP_MPI_CHECK(MPI_Bcast(&one_way, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return one_way;
}

// Median time of an in-place MPI_Iallreduce of `bytes` over ranks 0..group-1,
// as their rank 0 saw it, on every rank.
double measure_allreduce(int group, std::vector<float>& buffer, double bytes, const NetworkOptions& options) {
  const WorldInfo& w = world();
  MPI_Comm comm;
  BP_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, w.rank < group ? 0 : MPI_UNDEFINED, w.rank, &comm));
  double t = 0;
  if (comm != MPI_COMM_NULL) {
    const int count = static_cast<int>(bytes / 4);
    auto sum = [&] {
      std::vector<MPI_Request> req(1);
      BP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, comm, &req[0]));
      wait_within(req, options.deadline_s, fmt::format("an allreduce of {} over {} ranks", size_text(bytes), group));
    };
    t = median(timed_series(comm, options.repeats, options.seconds_per_size / (2 * (w.size - 1)), sum));
    MPI_Comm_free(&comm);
  }
  BP_MPI_CHECK(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return t;
}

// A fixed slice of arithmetic: a dependent chain in registers, with no memory
// traffic, so that only core time taken by something else can slow it. About
// 0.5-1 ms on a current core: a layer's length, and the executor's progress
// helper's default cadence ([parallel] progress_us), so MPI is called about
// as often as in training (each call on a TCP link costs core time itself).
constexpr int kSliceOps = 400000;
void arithmetic_slice() {
  static volatile float sink = 0;
  float x = sink + 1.0f;
  for (int i = 0; i < kSliceOps; ++i) x = x * 0.9999999f + 1e-7f;
  sink = x;
}

// Seconds one slice takes on this core with nothing in flight: the fastest
// of eight (what the core gives undisturbed).
double slice_seconds() {
  double best = 1e30;
  for (int run = 0; run < 8; ++run) {
    const auto t0 = Clock::now();
    arithmetic_slice();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

// Core seconds per byte moved that an allreduce of `bytes` over every rank
// takes from a thread that computes in slices and calls MPI_Test between
// them, as the executor's backward pass calls MPI_Testall between layers:
// MPI's copies and sums run inside those calls, so the slices made while the
// sum was in flight took longer than they take alone by the core time it
// took. Median of `repeats`, rank 0's, on every rank; 0 when the sum took
// nothing measurable.
double measure_core_cost(std::vector<float>& buffer, double bytes, int repeats, const NetworkOptions& options) {
  const WorldInfo& w = world();
  const int count = static_cast<int>(bytes / 4);
  std::vector<double> per_byte;
  for (int r = 0; r < repeats; ++r) {
    const double alone = slice_seconds();
    BP_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Request request;
    const auto t0 = Clock::now();
    BP_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request));
    long slices = 0;
    for (int done = 0; !done; ++slices) {
      arithmetic_slice();
      BP_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (!done && seconds_since(t0) > options.deadline_s)
        throw Error(fmt::format("network profile: an allreduce of {} beside computation did not complete within {:g} "
                                "s; --deadline sets the limit",
                                size_text(bytes), options.deadline_s));
    }
    const double taken = std::max(0.0, seconds_since(t0) - slices * alone);
    per_byte.push_back(taken / ring_bytes(bytes, w.size));
  }
  double cost = median(per_byte);
  BP_MPI_CHECK(MPI_Bcast(&cost, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return cost;
}

// The size the core cost is measured at: options.core_bytes, or less where
// the allreduce fit says its `repeats` would not fit one size's budget (at
// least 4 B), in whole floats.
double core_cost_bytes(const LinkModel& allreduce, int ranks, int repeats, const NetworkOptions& options) {
  const double fits =
      (options.seconds_per_size / repeats - allreduce.latency_s) * allreduce.bandwidth_bytes_per_s / ring_bytes(1, ranks);
  return 4 * std::floor(std::max(4.0, std::min(options.core_bytes, fits)) / 4);
}

// The file's measured times ("samples"; none in a file written by hand),
// each with its kind, group, size and time; errors name the entry.
std::vector<NetworkSample> load_samples(const nlohmann::json& j, const std::string& path) {
  std::vector<NetworkSample> samples;
  if (!j.contains("samples")) return samples;
  if (!j["samples"].is_array()) throw Error(fmt::format("{}: samples is not a list", path));
  for (size_t i = 0; i < j["samples"].size(); ++i) {
    const nlohmann::json& s = j["samples"][i];
    const bool ok = s.is_object() && s.contains("kind") && s["kind"].is_string() && s.contains("group") &&
                    s["group"].is_number_integer() && s.contains("bytes") && s["bytes"].is_number() &&
                    s.contains("seconds") && s["seconds"].is_number() && s["bytes"] > 0 && s["seconds"] >= 0;
    if (!ok)
      throw Error(fmt::format("{}: samples[{}] needs a kind, a group, bytes > 0 and seconds >= 0", path, i));
    samples.push_back({s["kind"], s["group"], s["bytes"], s["seconds"]});
  }
  return samples;
}

LinkModel link_from_fit(std::pair<double, double> fit) {
  LinkModel l;
  l.latency_s = std::max(0.0, fit.first);
  l.bandwidth_bytes_per_s = fit.second > 0 ? 1.0 / fit.second : 0.0;
  return l;
}

}  // namespace

double LinkModel::seconds(double bytes) const {
  const double line_rate = 1.0 / bandwidth_bytes_per_s;
  if (measured.size() < 2) return latency_s + bytes * line_rate;
  if (bytes <= measured.front().first) return measured.front().second;
  const auto above = std::lower_bound(measured.begin(), measured.end(), std::make_pair(bytes, 0.0));
  if (above == measured.end()) {
    const auto& [x1, t1] = measured.back();
    const auto& [x0, t0] = measured[measured.size() - 2];
    return t1 + (bytes - x1) * std::max(line_rate, (t1 - t0) / (x1 - x0));
  }
  const auto& [x1, t1] = *above;
  const auto& [x0, t0] = *(above - 1);
  return t0 + (bytes - x0) * (t1 - t0) / (x1 - x0);
}

std::vector<std::pair<double, double>> measured_curve(const std::vector<NetworkSample>& samples,
                                                      const std::string& kind, int group) {
  std::vector<std::pair<double, double>> points;
  for (const NetworkSample& s : samples)
    if (s.kind == kind && s.group == group)
      points.emplace_back(kind == "allreduce" ? ring_bytes(s.bytes, group) : s.bytes, s.seconds);
  std::sort(points.begin(), points.end());
  // One point per size (the first), and times that never fall as the size grows.
  points.erase(std::unique(points.begin(), points.end(), [](auto& a, auto& b) { return a.first == b.first; }),
               points.end());
  for (size_t i = 1; i < points.size(); ++i) points[i].second = std::max(points[i].second, points[i - 1].second);
  return points;
}

double next_sweep_size(double bytes, double max_bytes) {
  if (4 * bytes <= max_bytes) return 4 * bytes;
  const double last = 4 * std::floor(max_bytes / 4);  // whole floats
  return bytes < last ? last : 0;
}

double next_size_seconds(double next_bytes, double bytes, double seconds, double previous_bytes,
                         double previous_seconds) {
  const double per_byte =
      previous_bytes > 0 ? std::max(0.0, (seconds - previous_seconds) / (bytes - previous_bytes)) : 0.0;
  return seconds + per_byte * (next_bytes - bytes);
}

NetworkProfile profile_network(const NetworkOptions& options) {
  const WorldInfo& w = world();
  if (w.size < 2) throw Error("profile --network needs at least 2 ranks (run it under mpirun)");
  if (options.repeats < 1 || options.seconds_per_size <= 0 || options.deadline_s <= 0 || !(options.max_bytes >= 4) ||
      !(options.core_bytes >= 4))
    throw Error("network profile: repeats, seconds per size and deadline must be positive, the sizes >= 4 B");
  const auto start = Clock::now();
  NetworkProfile net;
  net.ranks = w.size;
  std::vector<float> buffer(static_cast<size_t>(options.max_bytes / 4) + 1, 1.0f);
  std::vector<double> px, pt, ax, at;
  MPI_Comm pair;
  BP_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, w.rank < 2 ? 0 : MPI_UNDEFINED, w.rank, &pair));
  double previous_bytes = 0, previous_slowest = 0;
  for (double bytes = 4, next_bytes = 0; bytes > 0; bytes = next_bytes) {
    const double one_way = measure_p2p(pair, buffer, bytes, options);
    net.samples.push_back({"p2p", 2, bytes, one_way});
    px.push_back(bytes);
    pt.push_back(one_way);
    double slowest = 2 * one_way;  // the size's slowest operation
    std::string line = fmt::format("network: {:>8}: point to point {:.3g} ms", size_text(bytes), 1e3 * one_way);
    for (int group = 2; group <= w.size; ++group) {
      const double t = measure_allreduce(group, buffer, bytes, options);
      net.samples.push_back({"allreduce", group, bytes, t});
      ax.push_back(ring_bytes(bytes, group));
      at.push_back(t);
      slowest = std::max(slowest, t);
      if (group == w.size) line += fmt::format(", allreduce over {} ranks {:.3g} ms", group, 1e3 * t);
    }
    net.largest_bytes = bytes;
    if (options.progress) options.progress(line);
    // Stop where the next size's warm-up and one timed run of each operation
    // would already overrun its budget.
    next_bytes = next_sweep_size(bytes, options.max_bytes);
    const double next = next_size_seconds(next_bytes, bytes, slowest, previous_bytes, previous_slowest);
    previous_bytes = bytes, previous_slowest = slowest;
    if (next_bytes > options.required_bytes && (kWarmup + 1) * w.size * next > options.seconds_per_size) {
      if (options.progress)
        options.progress(fmt::format("network: stopped at {}: a {} message would overrun {:g} s per size",
                                     size_text(bytes), size_text(next_bytes), options.seconds_per_size));
      break;
    }
  }
  if (pair != MPI_COMM_NULL) MPI_Comm_free(&pair);
  net.p2p = link_from_fit(fit_line(px, pt));
  net.allreduce = link_from_fit(fit_line(ax, at));
  net.allreduce.measured = measured_curve(net.samples, "allreduce", w.size);
  if (!(net.p2p.bandwidth_bytes_per_s > 0) || !(net.allreduce.bandwidth_bytes_per_s > 0))
    throw Error(fmt::format("network profile: the times did not grow with the message size up to {} (the largest "
                            "whose operations fit {:g} s each), so no bandwidth can be fitted: ranks spinning in MPI "
                            "on shared cores wait a scheduler tick per message (OMPI_MCA_mpi_yield_when_idle=1 makes "
                            "them yield), or the sizes need more time (profile --network --seconds-per-size)",
                            size_text(net.largest_bytes), options.seconds_per_size));
  constexpr int kCoreRepeats = 3;
  const double core_bytes = core_cost_bytes(net.allreduce, w.size, kCoreRepeats, options);
  if (buffer.size() * 4 < core_bytes) buffer.resize(static_cast<size_t>(core_bytes / 4), 1.0f);
  net.allreduce.core_seconds_per_byte = measure_core_cost(buffer, core_bytes, kCoreRepeats, options);
  if (options.progress)
    options.progress(fmt::format("network: an allreduce of {} took {:.3g} ms of a computing rank's core",
                                 size_text(core_bytes),
                                 1e3 * net.allreduce.core_seconds_per_byte * ring_bytes(core_bytes, w.size)));
  net.seconds = seconds_since(start);
  BP_MPI_CHECK(MPI_Bcast(&net.seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  return net;
}

std::string network_summary(const NetworkProfile& net) {
  return fmt::format(
      "point to point {:.1f} us + bytes / {:.3g} GB/s; allreduce {:.1f} us + 2(n-1)/n bytes / {:.3g} GB/s, "
      "taking {:.3g} ms of the rank's core per MB moved ({} ranks, messages up to {}, measured in {:.1f} s)",
      1e6 * net.p2p.latency_s, net.p2p.bandwidth_bytes_per_s / 1e9, 1e6 * net.allreduce.latency_s,
      net.allreduce.bandwidth_bytes_per_s / 1e9, 1e9 * net.allreduce.core_seconds_per_byte, net.ranks,
      size_text(net.largest_bytes), net.seconds);
}

void save_network(const NetworkProfile& net, const std::string& path) {
  nlohmann::json samples = nlohmann::json::array();
  for (const NetworkSample& s : net.samples)
    samples.push_back({{"kind", s.kind}, {"group", s.group}, {"bytes", s.bytes}, {"seconds", s.seconds}});
  write_json(path, {{"format", "burstpool-network"},
                    {"ranks", net.ranks},
                    {"p2p", {{"latency_s", net.p2p.latency_s}, {"bandwidth_bytes_per_s", net.p2p.bandwidth_bytes_per_s}}},
                    {"allreduce",
                     {{"latency_s", net.allreduce.latency_s},
                      {"bandwidth_bytes_per_s", net.allreduce.bandwidth_bytes_per_s},
                      {"core_seconds_per_byte", net.allreduce.core_seconds_per_byte}}},
                    {"largest_bytes", net.largest_bytes},
                    {"seconds", net.seconds},
                    {"samples", samples}});
}

NetworkProfile load_network(const std::string& path) {
  const nlohmann::json j = read_json(path, "network");
  NetworkProfile net;
  auto number = [&](const char* section, const char* key) {
    if (!j.contains(section) || !j[section].is_object() || !j[section].contains(key) || !j[section][key].is_number())
      throw Error(fmt::format("{}: missing number {}.{}", path, section, key));
    const double v = j[section][key];
    if (v < 0) throw Error(fmt::format("{}: {}.{} = {} is negative", path, section, key, v));
    return v;
  };
  net.p2p = {number("p2p", "latency_s"), number("p2p", "bandwidth_bytes_per_s")};
  net.allreduce = {number("allreduce", "latency_s"), number("allreduce", "bandwidth_bytes_per_s")};
  // Profiles written before the core cost was measured have none: 0, sums cost no core time.
  if (j["allreduce"].contains("core_seconds_per_byte"))
    net.allreduce.core_seconds_per_byte = number("allreduce", "core_seconds_per_byte");
  if (net.p2p.bandwidth_bytes_per_s == 0 || net.allreduce.bandwidth_bytes_per_s == 0)
    throw Error(fmt::format("{}: a bandwidth of 0 bytes/s cannot be planned with", path));
  net.ranks = j.value("ranks", 0);
  net.largest_bytes = j.value("largest_bytes", 0.0);
  net.seconds = j.value("seconds", 0.0);
  net.samples = load_samples(j, path);
  net.allreduce.measured = measured_curve(net.samples, "allreduce", net.ranks);
  return net;
}

}  // namespace burstpool
