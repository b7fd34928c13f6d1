#include "burstpool/simulator.hpp"

#include <algorithm>
#include <map>

#include "../comm/exchange.hpp"
#include "burstpool/error.hpp"

namespace burstpool {

Simulation simulate(const ModelSpec& spec, const ModelProfile& profile, const Plan& plan, const LinkModel& p2p,
                    const LinkModel& allreduce, int cores) {
  validate_plan(plan, spec, plan.ranks);
  const int R = plan.ranks, B = plan.global_batch;
  const std::vector<int> order = spec.topological_order();
  std::map<std::string, const LayerProfile*> prof;
  for (const LayerProfile& l : profile.layers) prof[l.name] = &l;
  auto layer_profile = [&](const std::string& name) {
    auto it = prof.find(name);
    if (it == prof.end()) throw Error(fmt::format("the profile has no layer '{}'", name));
    return it->second;
  };
  std::vector<double> clock(R, 0.0), busy(R, 0.0), reduced(R, 0.0);
  std::map<RankSet, double> group_free;  // when each group's previous allreduce ends

  auto message = [&](double bytes) { return p2p.latency_s + bytes / p2p.bandwidth_bytes_per_s; };
  // Pieces of an edge complete when both sides are ready; each side then waits for all of its pieces.
  auto exchange = [&](const RankSet& from, const RankSet& to, double bytes_per_sample) {
    std::vector<double> done = clock;
    for (const Piece& piece : overlap_pieces(from, to, B)) {
      if (piece.from == piece.to) continue;
      const double end = std::max(clock[piece.from], clock[piece.to]) + message(bytes_per_sample * piece.count);
      done[piece.from] = std::max(done[piece.from], end);
      done[piece.to] = std::max(done[piece.to], end);
    }
    clock = done;
  };
  auto group_wait = [&](const RankSet& set) {  // a blocking reduction of a few values (batch norm)
    if (set.size() < 2) return;
    double t = 0;
    for (int r : set) t = std::max(t, clock[r]);
    for (int r : set) clock[r] = t + allreduce.latency_s;
  };
  // How many of the set's ranks are placed on rank r's core (rank r on core r mod cores).
  auto sharing = [&](const RankSet& set, int r) {
    if (cores <= 0) return 1.0;
    return static_cast<double>(std::count_if(set.begin(), set.end(), [&](int s) { return s % cores == r % cores; }));
  };
  auto compute = [&](const RankSet& set, const LayerProfile& lp, bool forward) {
    for (int r : set) {
      const double s = sharing(set, r) * profile.seconds(forward ? lp.forward_ms : lp.backward_ms,
                                                 Plan::slice_of(set, r, B).count);
      clock[r] += s;
      busy[r] += s;
    }
  };

  for (int idx : order) {
    const LayerSpec& l = spec.layers[idx];
    const RankSet& set = plan.ranks_of(l.name);
    for (const std::string& in : l.inputs) {
      const RankSet& from = plan.ranks_of(in);
      if (from != set) exchange(from, set, layer_profile(in)->activation_bytes_per_sample);
    }
    compute(set, *layer_profile(l.name), true);
    if (l.type == "batchnorm2d") group_wait(set);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const LayerSpec& l = spec.layers[*it];
    const RankSet& set = plan.ranks_of(l.name);
    const LayerProfile& lp = *layer_profile(l.name);
    compute(set, lp, false);
    if (l.type == "batchnorm2d") group_wait(set);
    if (lp.parameter_bytes > 0 && set.size() > 1) {
      double start = group_free[set];
      for (int r : set) start = std::max(start, clock[r]);
      const double n = static_cast<double>(set.size());
      const double end = start + allreduce.latency_s + 2 * (n - 1) / n * lp.parameter_bytes / allreduce.bandwidth_bytes_per_s;
      group_free[set] = end;
      for (int r : set) reduced[r] = std::max(reduced[r], end);
    }
    for (const std::string& in : l.inputs) {
      const RankSet& to = plan.ranks_of(in);
      if (to != set && spec.layers[spec.find(in)].type != "input") exchange(set, to, layer_profile(in)->activation_bytes_per_sample);
    }
  }
  Simulation sim;
  for (int r = 0; r < R; ++r) sim.iteration_s = std::max(sim.iteration_s, std::max(clock[r], reduced[r]));
  sim.busy_s = busy;
  for (int r = 0; r < R; ++r) sim.idle_s.push_back(sim.iteration_s - busy[r]);
  return sim;
}

BackgroundPrediction predict_background(const Simulation& fg, const ModelSpec& spec, const ModelProfile& profile,
                                        int ranks, int global_batch, const LinkModel& p2p, const LinkModel& allreduce) {
  if (global_batch < ranks)
    throw Error(fmt::format("background batch {} is smaller than the {} ranks it would run on", global_batch, ranks));
  const Simulation alone =
      simulate(spec, profile, data_parallel_plan(spec, ranks, global_batch), p2p, allreduce);
  BackgroundPrediction b;
  b.alone_samples_per_second = global_batch / alone.iteration_s;
  double idle = 0;
  for (double s : fg.idle_s) idle += s;
  b.idle_share = idle / (ranks * fg.iteration_s);
  b.shared_samples_per_second = b.idle_share * b.alone_samples_per_second;
  b.cluster_throughput = 1.0 + b.idle_share;
  return b;
}

}  // namespace burstpool
