#include "burstpool/simulator.hpp"

#include <algorithm>
#include <map>

#include "comm/exchange.hpp"
#include "burstpool/cluster_throughput.hpp"
#include "burstpool/error.hpp"
#include "burstpool/layer.hpp"

namespace burstpool {

Simulation simulate(const ModelSpec& spec, const ModelProfile& profile, const Plan& plan, const LinkModel& p2p,
                    const LinkModel& allreduce, int cores, bool timeline) {
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
  std::vector<double> clock(R, 0.0), busy(R, 0.0), reduced(R, 0.0), slack(R, 0.0);
  std::map<RankSet, double> group_free;  // when each group's previous allreduce ends

  auto message = [&](double bytes) { return p2p.latency_s + bytes / p2p.bandwidth_bytes_per_s; };
  // Pieces of an edge complete when both sides are ready; each side then waits for all of its pieces.
  std::vector<TraceEvent> events;
  auto event = [&](int r, Track track, const auto& name, double from, double to, bool is_busy) {
    if (timeline && to > from) events.push_back({r, track, std::string(name()), from, to - from, is_busy});
  };
  auto exchange = [&](const RankSet& from, const RankSet& to, double bytes_per_sample, const std::string& what) {
    std::vector<double> done = clock;
    for (const Piece& piece : overlap_pieces(from, to, B)) {
      if (piece.from == piece.to) continue;
      const double end = std::max(clock[piece.from], clock[piece.to]) + message(bytes_per_sample * piece.count);
      done[piece.from] = std::max(done[piece.from], end);
      done[piece.to] = std::max(done[piece.to], end);
    }
    for (int r = 0; r < R; ++r) event(r, Track::transfers, [&] { return what; }, clock[r], done[r], true);
    clock = done;
  };
  auto group_wait = [&](const RankSet& set) {  // a blocking reduction of a few values (batch norm)
    if (set.size() < 2) return;
    double t = 0;
    for (int r : set) t = std::max(t, clock[r]);
    for (int r : set) {
      event(r, Track::gradient_sync, [] { return "batch-norm sums"; }, clock[r], t + allreduce.latency_s, true);
      clock[r] = t + allreduce.latency_s;
    }
  };
  // How many of the set's ranks are placed on rank r's core (rank r on core r mod cores).
  auto sharing = [&](const RankSet& set, int r) {
    if (cores <= 0) return 1.0;
    return static_cast<double>(std::count_if(set.begin(), set.end(), [&](int s) { return s % cores == r % cores; }));
  };
  auto compute = [&](const RankSet& set, const LayerProfile& lp, bool forward) {
    const std::vector<double>& ms = forward ? lp.forward_ms : lp.backward_ms;
    for (int r : set) {
      const int count = Plan::slice_of(set, r, B).count;
      const double s = sharing(set, r) * profile.seconds(ms, count);
      event(r, Track::main, [&] { return fmt::format("{} {}", forward ? "forward" : "backward", lp.name); }, clock[r],
            clock[r] + s, true);
      clock[r] += s;
      busy[r] += s;
      slack[r] += s * (1.0 - utilisation(profile, ms, count));
    }
  };

  for (int idx : order) {
    const LayerSpec& l = spec.layers[idx];
    const RankSet& set = plan.ranks_of(l.name);
    for (const std::string& in : l.inputs) {
      const RankSet& from = plan.ranks_of(in);
      if (from != set) exchange(from, set, layer_profile(in)->activation_bytes_per_sample, "inputs of " + l.name);
    }
    compute(set, *layer_profile(l.name), true);
    if (layer_kind(l.type) == LayerKind::batchnorm2d) group_wait(set);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const LayerSpec& l = spec.layers[*it];
    const RankSet& set = plan.ranks_of(l.name);
    const LayerProfile& lp = *layer_profile(l.name);
    compute(set, lp, false);
    if (layer_kind(l.type) == LayerKind::batchnorm2d) group_wait(set);
    if (lp.parameter_bytes > 0 && set.size() > 1) {
      double start = group_free[set];
      for (int r : set) start = std::max(start, clock[r]);
      const double n = static_cast<double>(set.size());
      const double end = start + allreduce.latency_s + 2 * (n - 1) / n * lp.parameter_bytes / allreduce.bandwidth_bytes_per_s;
      group_free[set] = end;
      for (int r : set) {
        reduced[r] = std::max(reduced[r], end);
        event(r, Track::gradient_sync, [&] { return "allreduce " + l.name; }, start, end, false);
      }
    }
    for (const std::string& in : l.inputs) {
      const RankSet& to = plan.ranks_of(in);
      if (to != set && layer_kind(spec.layers[spec.find(in)].type) != LayerKind::input)
        exchange(set, to, layer_profile(in)->activation_bytes_per_sample, "gradients of " + in);
    }
  }
  Simulation sim;
  for (int r = 0; r < R; ++r) sim.iteration_s = std::max(sim.iteration_s, std::max(clock[r], reduced[r]));
  sim.busy_s = busy;
  sim.slack_s = slack;
  for (int r = 0; r < R; ++r) sim.idle_s.push_back(sim.iteration_s - busy[r]);
  for (int r = 0; timeline && r < R; ++r) {
    event(r, Track::gradient_sync, [] { return "allreduce wait"; }, clock[r], reduced[r], true);
    std::vector<TraceEvent> gaps = idle_gaps(events, r, 0, sim.iteration_s);
    events.insert(events.end(), gaps.begin(), gaps.end());
    event(r, Track::main, [] { return "step"; }, 0, sim.iteration_s, false);
  }
  sim.events = std::move(events);
  return sim;
}

double utilisation(const ModelProfile& profile, const std::vector<double>& ms, int batch) {
  const int largest = profile.batches.back();
  if (batch <= 0 || batch >= largest) return 1.0;
  const double here = profile.seconds(ms, batch) / batch, best = profile.seconds(ms, largest) / largest;
  return here > 0 ? std::clamp(best / here, 0.0, 1.0) : 1.0;
}

BackgroundPrediction predict_background(const ForegroundRun& fg, const BackgroundRun& bg, const PackingModel& packing,
                                        const LinkModel& p2p, const LinkModel& allreduce) {
  const int R = static_cast<int>(fg.own_plan.idle_s.size());
  BackgroundPrediction b;
  if (bg.independent) {  // a replica per rank, no network: R times one rank's rate alone
    const Simulation one = simulate(*bg.spec, *bg.profile, data_parallel_plan(*bg.spec, 1, bg.batch), p2p, allreduce);
    b.alone_samples_per_second = R * bg.batch / one.iteration_s;
  } else {
    if (bg.batch < R)
      throw Error(fmt::format("background batch {} is smaller than the {} ranks it would run on", bg.batch, R));
    const Simulation alone = simulate(*bg.spec, *bg.profile, data_parallel_plan(*bg.spec, R, bg.batch), p2p, allreduce);
    b.alone_samples_per_second = bg.batch / alone.iteration_s;
  }
  // The mean over ranks of what each rank leaves, for both kinds of
  // background: the packing model is fitted to mean shares, and a
  // data-parallel background with per-rank statistics, meeting its peers once
  // a step, measured so (perf/results/multiplex.md: the split plan's ranks
  // idle 44% and 32% of the step, and the background's share followed their mean).
  const Simulation& s = fg.own_plan;
  double idle = 0, slack = 0;
  for (int r = 0; r < R; ++r) idle += s.idle_s[r] / s.iteration_s, slack += s.slack_s[r] / s.iteration_s;
  b.idle_share = idle / R;
  b.slack_share = slack / R;
  b.shared_samples_per_second = background_share(packing, b.idle_share, b.slack_share) * b.alone_samples_per_second;
  b.foreground_slowdown = packing.foreground_slowdown;
  b.foreground_alone_samples_per_second = fg.global_batch / s.iteration_s;
  b.foreground_shared_samples_per_second = b.foreground_alone_samples_per_second / b.foreground_slowdown;
  b.foreground_data_parallel_samples_per_second = fg.global_batch / fg.data_parallel.iteration_s;
  b.cluster_throughput_vs_data_parallel =
      cluster_throughput(b.foreground_shared_samples_per_second, b.foreground_data_parallel_samples_per_second,
                         b.shared_samples_per_second, b.alone_samples_per_second);
  b.cluster_throughput_vs_own_plan =
      cluster_throughput(b.foreground_shared_samples_per_second, b.foreground_alone_samples_per_second,
                         b.shared_samples_per_second, b.alone_samples_per_second);
  return b;
}

}  // namespace burstpool
