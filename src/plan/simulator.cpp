#include "burstpool/simulator.hpp"

#include <algorithm>
#include <map>

#include "comm/exchange.hpp"
#include "burstpool/cluster_throughput.hpp"
#include "burstpool/error.hpp"
#include "burstpool/layer.hpp"

namespace burstpool {

namespace {

// One training step of a plan, replayed on per-rank clocks: layers in
// topological order forward and in reverse backward, slices exchanged
// between rank sets as the executor moves them over MPI (sent as soon as
// they are made; a piece travels once its sender has made it and its
// receiver has asked for it; activations are waited for before the
// consumer's forward, gradients before the producer's backward), gradient
// allreduces gathered into buckets as the executor's gradient sync gathers
// them (a rank set's layers join its open bucket while their parameters are
// contiguous and it stays within the bucket size; a full bucket starts at
// once, the rest when backward ends) and queued per rank set beside the
// backward pass, and a blocking reduction for each batch-norm layer.
// Branches on disjoint rank sets therefore overlap, as they do in the
// executor.
class StepSimulator {
 public:
  StepSimulator(const ModelSpec& spec, const ModelProfile& profile, const Plan& plan, const LinkModel& p2p,
                const LinkModel& allreduce, int cores, bool timeline, double bucket_bytes)
      : spec_(spec), profile_(profile), plan_(plan), p2p_(p2p), allreduce_(allreduce), cores_(cores),
        timeline_(timeline), bucket_bytes_(bucket_bytes), ranks_(plan.ranks), batch_(plan.global_batch),
        clock_(ranks_, 0.0), busy_(ranks_, 0.0), reduced_(ranks_, 0.0), slack_(ranks_, 0.0),
        core_busy_(cores > 0 ? std::min(cores, ranks_) : ranks_, 0.0), work_(ranks_) {
    for (const LayerProfile& l : profile.layers) prof_[l.name] = &l;
    double offset = 0;  // the model's flat parameters: layer after layer, in the spec's order
    for (const LayerSpec& l : spec.layers) {
      parameter_offset_[l.name] = offset;
      offset += layer_profile(l.name).parameter_bytes;
    }
  }

  Simulation run() {
    const std::vector<int> order = spec_.topological_order();
    for (int idx : order) forward(spec_.layers[idx]);
    for (auto it = order.rbegin(); it != order.rend(); ++it) backward(spec_.layers[*it]);
    for (auto& [set, bucket] : open_) start_bucket(set, bucket);  // the executor's finish(): the buckets left
    return result();
  }

 private:
  const LayerProfile& layer_profile(const std::string& name) const {
    auto it = prof_.find(name);
    if (it == prof_.end()) throw Error(fmt::format("the profile has no layer '{}'", name));
    return *it->second;
  }

  template <class Name>
  void event(int r, Track track, const Name& name, double from, double to, bool is_busy) {
    if (timeline_ && to > from) events_.push_back({r, track, std::string(name()), from, to - from, is_busy});
  }

  double message(double bytes) const { return p2p_.seconds(bytes); }

  // When each rank's last piece of a slice exchange arrives: pieces go from
  // `from`'s slicing to `to`'s, each leaving when its sender made it
  // (sent_at) and its receiver asked for it (now), a message time later.
  // Ranks that receive nothing: 0.
  std::vector<double> arrivals(const RankSet& from, const RankSet& to, double bytes_per_sample,
                               const std::vector<double>& sent_at) const {
    std::vector<double> done(ranks_, 0.0);
    for (const Piece& piece : overlap_pieces(from, to, batch_)) {
      if (piece.from == piece.to) continue;
      const double end = std::max(sent_at[piece.from], clock_[piece.to]) + message(bytes_per_sample * piece.count);
      done[piece.to] = std::max(done[piece.to], end);
    }
    return done;
  }

  // Ranks in `set` wait until `until` (the pieces they need have arrived).
  void wait_for(const RankSet& set, const std::vector<double>& until, const std::string& what) {
    for (int r : set) {
      if (until[r] <= clock_[r]) continue;
      event(r, Track::transfers, [&] { return what; }, clock_[r], until[r], true);
      clock_[r] = until[r];
    }
  }

  // A blocking reduction of a few values (batch norm).
  void group_wait(const RankSet& set) {
    if (set.size() < 2) return;
    double t = 0;
    for (int r : set) t = std::max(t, clock_[r]);
    for (int r : set) {
      event(r, Track::gradient_sync, [] { return "batch-norm sums"; }, clock_[r], t + allreduce_.latency_s, true);
      clock_[r] = t + allreduce_.latency_s;
    }
  }

  // The core rank r runs on: r mod cores, or its own.
  size_t core_of(int r) const { return static_cast<size_t>(r) % core_busy_.size(); }

  // How many of the set's ranks are placed on rank r's core.
  double sharing(const RankSet& set, int r) const {
    return static_cast<double>(std::count_if(set.begin(), set.end(), [&](int s) { return core_of(s) == core_of(r); }));
  }

  void compute(const RankSet& set, const LayerProfile& lp, bool forward) {
    const std::vector<double>& ms = forward ? lp.forward_ms : lp.backward_ms;
    for (int r : set) {
      const int count = Plan::slice_of(set, r, batch_).count;
      const double alone = profile_.seconds(ms, count);
      core_busy_[core_of(r)] += alone;
      const double s = sharing(set, r) * alone;
      work_[r].emplace_back(clock_[r], clock_[r] + s);
      event(r, Track::main, [&] { return fmt::format("{} {}", forward ? "forward" : "backward", lp.name); },
            clock_[r], clock_[r] + s, true);
      clock_[r] += s;
      busy_[r] += s;
      slack_[r] += s * (1.0 - utilisation(profile_, ms, count));
    }
  }

  void forward(const LayerSpec& l) {
    const RankSet& set = plan_.ranks_of(l.name);
    for (const std::string& in : l.inputs) {
      const RankSet& from = plan_.ranks_of(in);
      if (from != set)
        wait_for(set, arrivals(from, set, layer_profile(in).activation_bytes_per_sample, made_[in]),
                 "inputs of " + l.name);
    }
    compute(set, layer_profile(l.name), true);
    if (layer_kind(l.type) == LayerKind::batchnorm2d) group_wait(set);
    made_[l.name] = clock_;  // its activations, sent from here
  }

  // Gradients gathered for one allreduce: parameter bytes [lo, hi) of the
  // model's flat buffer, and the first and last layer in it (for the timeline).
  struct Bucket {
    double lo = 0, hi = 0;
    std::string first, last;
  };

  // Layer l's gradients are ready on `set`: as GradientSync::layer_ready, they
  // join the set's open bucket where they end where it begins and it stays
  // within the bucket size; else the open one starts and they open a new one.
  // A bucket that reaches the size starts at once.
  void gradients_ready(const LayerSpec& l, const RankSet& set, double bytes) {
    Bucket& bucket = open_[set];
    const double offset = parameter_offset_.at(l.name);
    const bool joins = bucket.hi > bucket.lo && offset + bytes == bucket.lo && bucket.hi - offset <= bucket_bytes_;
    if (!joins) {
      start_bucket(set, bucket);
      bucket.hi = offset + bytes;
      bucket.first = l.name;
    }
    bucket.lo = offset;
    bucket.last = l.name;
    if (bucket.hi - bucket.lo >= bucket_bytes_) start_bucket(set, bucket);
  }

  // The bucket's allreduce, queued behind the set's previous one; empties it.
  void start_bucket(const RankSet& set, Bucket& bucket) {
    const double bytes = bucket.hi - bucket.lo;
    if (bytes <= 0) return;
    const std::string name = bucket.first == bucket.last ? bucket.first : bucket.first + ".." + bucket.last;
    bucket = Bucket{};
    double start = group_free_[set];
    for (int r : set) start = std::max(start, clock_[r]);
    const double n = static_cast<double>(set.size());
    const double end = start + allreduce_.seconds(ring_bytes(bytes, n));
    group_free_[set] = end;
    // On a CPU the sum's copies and additions run on the rank's own core,
    // inside its progress calls between layers: they delay what it computes
    // next by the core time the link model measured.
    const double core = allreduce_.core_seconds_per_byte * ring_bytes(bytes, n);
    for (int r : set) {
      reduced_[r] = std::max(reduced_[r], end);
      event(r, Track::gradient_sync, [&] { return "allreduce " + name; }, start, end, false);
      if (core <= 0) continue;
      event(r, Track::main, [&] { return "allreduce sums " + name; }, clock_[r], clock_[r] + core, true);
      work_[r].emplace_back(clock_[r], clock_[r] + core);
      clock_[r] += core;
      busy_[r] += core;
      core_busy_[core_of(r)] += core;
    }
  }

  // The lengths of the stretches of [0, step] that `work` (one core's ranks',
  // overlapping or not) leaves free, the one ending the step joined to the
  // one starting it (the next step's), and listed last.
  static std::vector<double> gaps_between(const std::vector<std::pair<double, double>>& work, double step) {
    const std::vector<std::pair<double, double>> free = uncovered(work, 0, step);
    std::vector<double> gaps;
    for (const auto& [start, end] : free) gaps.push_back(end - start);
    if (gaps.size() > 1 && free.front().first <= 0 && free.back().second >= step)
      gaps.back() += gaps.front(), gaps.erase(gaps.begin());
    return gaps;
  }

  void backward(const LayerSpec& l) {
    const RankSet& set = plan_.ranks_of(l.name);
    const LayerProfile& lp = layer_profile(l.name);
    // Its output gradient's pieces have arrived (the executor adds them, and
    // those its consumers on its own ranks keep, when it needs them).
    wait_for(set, gradient_due(l.name), "gradients of " + l.name);
    compute(set, lp, false);
    if (layer_kind(l.type) == LayerKind::batchnorm2d) group_wait(set);
    if (lp.parameter_bytes > 0 && set.size() > 1) gradients_ready(l, set, lp.parameter_bytes);
    for (const std::string& in : l.inputs) {
      const RankSet& to = plan_.ranks_of(in);
      if (to == set || layer_kind(spec_.layers[spec_.find(in)].type) == LayerKind::input) continue;
      const std::vector<double> arrive = arrivals(set, to, layer_profile(in).activation_bytes_per_sample, clock_);
      std::vector<double>& due = gradient_due(in);
      for (int r = 0; r < ranks_; ++r) due[r] = std::max(due[r], arrive[r]);
    }
  }

  std::vector<double>& gradient_due(const std::string& layer) {
    auto it = gradient_due_.try_emplace(layer, ranks_, 0.0).first;
    return it->second;
  }

  Simulation result() {
    Simulation sim;
    for (int r = 0; r < ranks_; ++r) sim.iteration_s = std::max(sim.iteration_s, std::max(clock_[r], reduced_[r]));
    sim.busy_s = busy_;
    sim.slack_s = slack_;
    sim.core_busy_s = core_busy_;
    for (int r = 0; r < ranks_; ++r) sim.idle_s.push_back(sim.iteration_s - busy_[r]);
    // A core is free only while none of its ranks works on it.
    std::vector<std::vector<std::pair<double, double>>> core_work(core_busy_.size());
    for (int r = 0; r < ranks_; ++r) {
      std::vector<std::pair<double, double>>& on_core = core_work[core_of(r)];
      on_core.insert(on_core.end(), work_[r].begin(), work_[r].end());
    }
    for (const auto& work : core_work) sim.idle_gaps_s.push_back(gaps_between(work, sim.iteration_s));
    for (int r = 0; timeline_ && r < ranks_; ++r) {
      event(r, Track::gradient_sync, [] { return "allreduce wait"; }, clock_[r], reduced_[r], true);
      std::vector<TraceEvent> gaps = idle_gaps(events_, r, 0, sim.iteration_s);
      events_.insert(events_.end(), gaps.begin(), gaps.end());
      event(r, Track::main, [] { return "step"; }, 0, sim.iteration_s, false);
    }
    sim.events = std::move(events_);
    return sim;
  }

  const ModelSpec& spec_;
  const ModelProfile& profile_;
  const Plan& plan_;
  const LinkModel& p2p_;
  const LinkModel& allreduce_;
  const int cores_;
  const bool timeline_;
  const double bucket_bytes_;
  const int ranks_, batch_;
  std::map<std::string, const LayerProfile*> prof_;
  std::vector<double> clock_, busy_, reduced_, slack_;  // per rank
  std::vector<double> core_busy_;                       // per core (Simulation::core_busy_s)
  std::vector<std::vector<std::pair<double, double>>> work_;  // per rank: when its core worked
  std::map<RankSet, double> group_free_;                // when each group's previous allreduce ends
  std::map<RankSet, Bucket> open_;                      // each group's bucket being gathered
  std::map<std::string, double> parameter_offset_;      // per layer: where its parameters begin, in bytes
  std::map<std::string, std::vector<double>> made_;     // per layer and rank: when its forward ended
  std::map<std::string, std::vector<double>> gradient_due_;  // per layer and rank: its gradient pieces arrive
  std::vector<TraceEvent> events_;
};

}  // namespace

Simulation simulate(const ModelSpec& spec, const ModelProfile& profile, const Plan& plan, const LinkModel& p2p,
                    const LinkModel& allreduce, int cores, bool timeline, double bucket_bytes) {
  validate_plan(plan, spec, plan.ranks);
  if (!(bucket_bytes > 0)) throw Error(fmt::format("simulate: the bucket size {} is not positive", bucket_bytes));
  return StepSimulator(spec, profile, plan, p2p, allreduce, cores, timeline, bucket_bytes).run();
}

double utilisation(const ModelProfile& profile, const std::vector<double>& ms, int batch) {
  const int largest = profile.batches.back();
  if (batch <= 0 || batch >= largest) return 1.0;
  const double here = profile.seconds(ms, batch) / batch, best = profile.seconds(ms, largest) / largest;
  return here > 0 ? std::clamp(best / here, 0.0, 1.0) : 1.0;
}

double idle_share(const Simulation& sim) {
  if (sim.idle_s.empty() || !(sim.iteration_s > 0)) return 0;
  double sum = 0;
  for (double idle : sim.idle_s) sum += idle / sim.iteration_s;
  return sum / static_cast<double>(sim.idle_s.size());
}

double free_core_share(const Simulation& sim) {
  if (sim.core_busy_s.empty() || !(sim.iteration_s > 0)) return 0;
  double sum = 0;
  for (double busy : sim.core_busy_s) sum += std::clamp(1 - busy / sim.iteration_s, 0.0, 1.0);
  return sum / static_cast<double>(sim.core_busy_s.size());
}

double cluster_throughput_bound(const Simulation& fg, const Simulation& data_parallel) {
  if (!(fg.iteration_s > 0)) throw Error("cluster_throughput_bound: the foreground's simulated step is not positive");
  return cluster_throughput(1 / fg.iteration_s, 1 / data_parallel.iteration_s, free_core_share(fg), 1);
}

BackgroundPrediction predict_background(const ForegroundRun& fg, const BackgroundRun& bg, const PackingModel& packing,
                                        const LinkModel& p2p, const LinkModel& allreduce) {
  const Simulation& s = fg.own_plan;
  const int R = static_cast<int>(s.idle_s.size());
  // The background runs on the foreground's ranks and so on its cores
  // (core_busy_s: min(cores, ranks) of them): with fewer cores than ranks,
  // those cores' worth alone.
  const int cores = s.core_busy_s.empty() ? R : static_cast<int>(s.core_busy_s.size());
  BackgroundPrediction b;
  if (bg.independent) {  // a replica per rank, no network: one rank's rate alone on each core
    const Simulation one = simulate(*bg.spec, *bg.profile, data_parallel_plan(*bg.spec, 1, bg.batch), p2p, allreduce);
    b.alone_samples_per_second = cores * bg.batch / one.iteration_s;
  } else {
    if (bg.batch < R)
      throw Error(fmt::format("background batch {} is smaller than the {} ranks it would run on", bg.batch, R));
    const Simulation alone = simulate(*bg.spec, *bg.profile, data_parallel_plan(*bg.spec, R, bg.batch), p2p, allreduce,
                                      cores < R ? cores : 0);
    b.alone_samples_per_second = bg.batch / alone.iteration_s;
  }
  // The mean over cores of what each core leaves (over ranks with a core
  // each), for both kinds of background: the packing model is fitted to mean
  // shares, and a data-parallel background with per-rank statistics, meeting
  // its peers once a step, measured so (perf/results/multiplex.md: the split
  // plan's ranks idle 44% and 32% of the step, and the background's share
  // followed their mean).
  double slack = 0;
  for (int r = 0; r < R; ++r) slack += s.slack_s[r] / s.iteration_s;
  b.idle_share = idle_share(s);
  b.usable_idle_share = usable_idle_share(s.idle_gaps_s, s.iteration_s, packing.gap_cost_s);
  b.slack_share = slack / R;
  b.shared_samples_per_second =
      background_share(packing, b.usable_idle_share, b.slack_share) * b.alone_samples_per_second;
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
