#include "burstpool/planner.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "burstpool/error.hpp"
#include "plan/at_once.hpp"
#include "plan/blocks.hpp"

namespace burstpool {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

CostModel::CostModel(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& o) : o_(o) {
  if (o.ranks < 1) throw Error(fmt::format("--ranks {} must be >= 1", o.ranks));
  if (o.global_batch < 1) throw Error(fmt::format("--global-batch {} must be >= 1", o.global_batch));
  if (!(o.amp_limit >= 1)) throw Error(fmt::format("--amp-limit {} must be >= 1", o.amp_limit));
  if (!(o.p2p.bandwidth_bytes_per_s > 0) || !(o.allreduce.bandwidth_bytes_per_s > 0) || o.p2p.latency_s < 0 ||
      o.allreduce.latency_s < 0)
    throw Error("the network model needs positive bandwidths and non-negative latencies");
  const std::vector<int> order = spec.topological_order();
  std::vector<int> position(order.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  profile_ = &profile;
  for (int idx : order) {
    const LayerSpec& l = spec.layers[idx];
    names_.push_back(l.name);
    std::vector<int> in;
    for (const std::string& p : l.inputs) in.push_back(position[spec.find(p)]);
    inputs_.push_back(in);
    const LayerProfile* found = nullptr;
    for (const LayerProfile& lp : profile.layers)
      if (lp.name == l.name) found = &lp;
    if (!found) throw Error(fmt::format("the profile has no layer '{}'", l.name));
    prof_.push_back(found);
  }
}

double CostModel::forward(int layer, int n) const {
  return profile_->seconds(prof_[layer]->forward_ms, (o_.global_batch + n - 1) / n);
}

double CostModel::backward(int layer, int n) const {
  return profile_->seconds(prof_[layer]->backward_ms, (o_.global_batch + n - 1) / n);
}

double CostModel::compute(int layer, int n) const { return forward(layer, n) + backward(layer, n); }

double CostModel::sync(int layer, int n) const {
  const double bytes = prof_[layer]->parameter_bytes;
  if (n == 1 || bytes == 0) return 0.0;
  return o_.allreduce.seconds(ring_bytes(bytes, n));
}

double CostModel::transfer(int producer, int from_n, int to_n) const {
  if (from_n == to_n) return 0.0;
  const double lo = std::min(from_n, to_n), hi = std::max(from_n, to_n);
  const double bytes = prof_[producer]->activation_bytes_per_sample * o_.global_batch * (1.0 / lo - 1.0 / hi);
  return 2.0 * o_.p2p.seconds(bytes);
}

double CostModel::transfer_apart(int producer, int from_n, int to_n) const {
  const double bytes = prof_[producer]->activation_bytes_per_sample * o_.global_batch / std::min(from_n, to_n);
  return 2.0 * o_.p2p.seconds(bytes);
}

double CostModel::transfer_between(int producer, int from_n, int to_first, int to_n) const {
  return to_first == 0 ? transfer(producer, from_n, to_n) : transfer_apart(producer, from_n, to_n);
}

bool CostModel::allowed(int layer, int n, double incoming_s) const {
  if (n > o_.global_batch) return false;
  if (!std::isfinite(o_.amp_limit)) return true;
  const double one = compute(layer, 1);
  if (o_.soft_limit && one < 300e-6) return true;
  double time = compute(layer, n);
  if (o_.amp_rule == PlannerOptions::AmpRule::layer_time && n > 1) time += sync(layer, n) + incoming_s;
  return n * time <= o_.amp_limit * one * (1 + 1e-12);
}

namespace {

// Per layer (topological position): its rank count and first rank; the
// layer runs on ranks first..first+n-1.
struct Assignment {
  std::vector<int> n, first;
};

enum class BlockMode { in_turn, at_once, outside };

// How a fork block's branches run under `a`: in turn (every branch layer on
// a prefix), at once (every non-empty branch's layers on one range; two
// ranges are the same or disjoint; two or more distinct ranges, one of them a
// prefix: the branches of one range run in turn there, the ranges at once),
// or outside the planner's plans.
BlockMode block_mode(const Block& b, const Assignment& a) {
  bool prefixes = true;
  for (const auto& branch : b.branches)
    for (int layer : branch) prefixes = prefixes && a.first[layer] == 0;
  if (prefixes) return BlockMode::in_turn;
  std::vector<std::pair<int, int>> ranges;
  for (const auto& branch : b.branches) {
    if (branch.empty()) continue;
    const int head = branch.front();
    for (int layer : branch)
      if (a.first[layer] != a.first[head] || a.n[layer] != a.n[head]) return BlockMode::outside;
    ranges.emplace_back(a.first[head], a.first[head] + a.n[head]);
  }
  std::sort(ranges.begin(), ranges.end());
  ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
  if (ranges.size() < 2 || ranges.front().first != 0) return BlockMode::outside;
  for (size_t k = 1; k < ranges.size(); ++k)
    if (ranges[k].first < ranges[k - 1].second) return BlockMode::outside;
  return BlockMode::at_once;
}

bool in_space(const std::vector<Block>& blocks, const Assignment& a) {
  for (const Block& b : blocks) {
    if (b.fork >= 0 && block_mode(b, a) == BlockMode::outside) return false;
    for (int layer : b.chain)
      if (a.first[layer] != 0) return false;
  }
  return true;
}

// The plan file's form of an assignment, in the model file's layer order.
Plan plan_of(const CostModel& cm, const Assignment& a, const ModelSpec& spec, const PlannerOptions& o) {
  Plan plan;
  plan.global_batch = o.global_batch;
  plan.ranks = o.ranks;
  plan.source = "planner";
  for (const LayerSpec& l : spec.layers) {
    int pos = 0;
    while (cm.names()[pos] != l.name) ++pos;
    RankSet set(a.n[pos]);
    for (int k = 0; k < a.n[pos]; ++k) set[k] = a.first[pos] + k;
    plan.layer_names.push_back(l.name);
    plan.layer_ranks.push_back(set);
  }
  return plan;
}

// Assignment -> predicted iteration time, walking the same blocks. A block
// in turn adds its branches' times; a block at once costs the slowest
// forward plus the slowest backward of its rank ranges (the branches of a
// range one after another, each with its transfers in and out, half in each
// phase; an identity branch runs beside them as its fork-to-join transfer).
// `a` must be in_space().
PlanResult evaluate(const CostModel& cm, const std::vector<Block>& blocks, const Assignment& a, const ModelSpec& spec,
                    const PlannerOptions& o) {
  PlanResult r;
  const std::vector<int>& n = a.n;
  r.layers.resize(cm.layers());
  // Records a layer with its incoming transfer time; returns its own time (G + Sync).
  auto record = [&](int layer, double incoming) {
    PlannedLayer& p = r.layers[layer];
    p.name = cm.names()[layer];
    p.ranks = n[layer];
    p.first_rank = a.first[layer];
    p.compute_s = cm.compute(layer, n[layer]);
    p.sync_s = cm.sync(layer, n[layer]);
    p.transfer_s = incoming;
    r.allowed = r.allowed && cm.allowed(layer, n[layer], incoming);
    const double one = cm.compute(layer, 1);
    p.amplification = one > 0 ? n[layer] * p.compute_s / one : 1.0;
    r.device_s += n[layer] * (p.compute_s + p.sync_s);
    return p.compute_s + p.sync_s;
  };
  double t = 0, into_join = 0;
  bool join_adds = true;  // the join's incoming transfers still to add (in turn), or counted in its block (at once)
  int prev = -1;
  for (const Block& b : blocks) {
    if (b.fork < 0) {
      for (int layer : b.chain) {
        const double in = prev < 0 ? into_join : cm.transfer(prev, n[prev], n[layer]);
        t += (prev >= 0 || join_adds ? in : 0.0) + record(layer, in);
        prev = layer;
      }
      continue;
    }
    const BlockMode mode = block_mode(b, a);
    BP_CHECK(mode != BlockMode::outside, "planner: the branches at '{}' are neither in turn nor at once",
             cm.names()[b.fork]);
    into_join = 0;
    // At once, by first rank: the forward and the backward time of the branches there
    // (transfers half in each); an identity branch's transfer runs beside them.
    std::map<int, std::pair<double, double>> range_time;
    double identity = 0;
    for (const auto& branch : b.branches) {
      int last = b.fork;
      double time = 0, forward = 0, backward = 0;
      for (int layer : branch) {
        const double in = last == b.fork ? cm.transfer_between(b.fork, n[b.fork], a.first[layer], n[layer])
                                         : cm.transfer(last, n[last], n[layer]);
        time += in + record(layer, in);
        forward += in / 2 + cm.forward(layer, n[layer]);
        backward += in / 2 + cm.backward(layer, n[layer]) + cm.sync(layer, n[layer]);
        last = layer;
      }
      const double out = cm.transfer_between(last, n[b.join], last == b.fork ? 0 : a.first[last], n[last]);
      into_join += out;
      if (mode == BlockMode::in_turn) t += time;
      if (branch.empty()) {
        identity = std::max(identity, out / 2);
        continue;
      }
      auto& [f, bw] = range_time[a.first[branch.front()]];
      f += forward + out / 2, bw += backward + out / 2;
    }
    if (mode == BlockMode::at_once) {
      double slowest_forward = identity, slowest_backward = identity;
      for (const auto& [first, fb] : range_time)
        slowest_forward = std::max(slowest_forward, fb.first), slowest_backward = std::max(slowest_backward, fb.second);
      t += slowest_forward + slowest_backward;
    }
    join_adds = mode == BlockMode::in_turn;
    prev = -1;  // the join starts the next chain block; its step counts into_join
  }
  r.iteration_s = t;
  r.plan = plan_of(cm, a, spec, o);
  return r;
}

}  // namespace

PlannerOptions::Branches branches_named(const std::string& name) {
  BP_CHECK(name == "auto" || name == "in-turn" || name == "at-once", "unknown branches '{}'", name);
  return name == "in-turn"   ? PlannerOptions::Branches::in_turn
         : name == "at-once" ? PlannerOptions::Branches::at_once
                             : PlannerOptions::Branches::cheaper;
}

PlannerOptions::AmpRule amp_rule_named(const std::string& name) {
  BP_CHECK(name == "compute" || name == "layer-time", "unknown amplification rule '{}'", name);
  return name == "layer-time" ? PlannerOptions::AmpRule::layer_time : PlannerOptions::AmpRule::compute;
}

namespace {

// The planner's dynamic program over the blocks of decompose(). A cost vector
// t holds, per state m (the rank count of the last layer costed), the least
// time to reach it; kInf marks states that cannot be reached. Chains extend
// it layer by layer; a fork block solves each branch for every fork state and
// combines them at the join (given the fork's and the join's counts the
// branches are independent, so each branch's best is exact). The arguments of
// every minimum are kept so that backtrack() recovers the assignment.
class Program {
 public:
  Program(const CostModel& cm, const std::vector<Block>& blocks, const PlannerOptions& o)
      : cm_(cm), blocks_(blocks), n_(o.ranks), layer_time_(o.amp_rule == PlannerOptions::AmpRule::layer_time),
        branches_(o.branches), allowed_(cm.layers()), forks_(blocks.size()), chain_args_(blocks.size()) {
    // The counts a layer may take (the rule with no incoming time: a bound for any).
    for (int layer = 0; layer < cm.layers(); ++layer)
      for (int n = 1; n <= n_; ++n)
        if (cm.allowed(layer, n)) allowed_[layer].push_back(n);
  }

  // The cost vector after the last block.
  std::vector<double> solve() {
    std::vector<double> t(n_ + 1, 0.0);  // before the input layer: any state, no cost
    t[0] = kInf;
    for (size_t bi = 0; bi < blocks_.size(); ++bi) {
      const Block& b = blocks_[bi];
      if (b.fork >= 0) {
        t = solve_fork(b, forks_[bi], t);
        continue;
      }
      // The chain's first layer is the input, or a join already costed with its fork block.
      t = run_chain(chain_rest(bi), bi > 0 ? b.chain.front() : -1, t, chain_args_[bi]);
    }
    return t;
  }

  // The ranks of every layer on the best path ending in `state`.
  Assignment backtrack(int state) const {
    Assignment a{std::vector<int>(cm_.layers(), 1), std::vector<int>(cm_.layers(), 0)};
    std::vector<int>& n = a.n;
    for (int bi = static_cast<int>(blocks_.size()) - 1; bi >= 0; --bi) {
      const Block& b = blocks_[bi];
      if (b.fork < 0) {
        const std::vector<int> rest = chain_rest(bi);
        for (int k = static_cast<int>(rest.size()) - 1; k >= 0; --k) {
          n[rest[k]] = state;
          state = chain_args_[bi][k][state];
        }
        if (bi > 0) n[b.chain.front()] = state;  // the join's state
        continue;
      }
      const ForkChoice& fc = forks_[bi];
      const int nj = state, nf = fc.fork_state[nj];
      n[b.join] = nj;
      state = nf;
      if (!fc.at_once[nj].count.empty()) {
        for (size_t br = 0; br < b.branches.size(); ++br)
          for (int layer : b.branches[br])
            a.n[layer] = fc.at_once[nj].count[br], a.first[layer] = fc.at_once[nj].first[br];
        continue;
      }
      for (size_t br = 0; br < b.branches.size(); ++br) {
        int s = fc.end_state[br][nf][nj];
        const auto& layers = b.branches[br];
        for (int k = static_cast<int>(layers.size()) - 1; k >= 0; --k) {
          n[layers[k]] = s;
          s = fc.args[br][nf][k][s];
        }
      }
    }
    return a;
  }

 private:
  // Per fork block: the best fork state for each join state, and per branch
  // the chosen end state and the chain arguments for each fork state.
  struct ForkChoice {
    std::vector<int> fork_state;                                   // [n_join]
    std::vector<Placement> at_once;                                // [n_join]: empty count: in turn
    std::vector<std::vector<std::vector<int>>> end_state;          // [branch][n_fork][n_join]
    std::vector<std::vector<std::vector<std::vector<int>>>> args;  // [branch][n_fork][layer k][n]
  };
  using Table = std::vector<std::vector<double>>;  // [n_fork][n_join]

  std::vector<int> chain_rest(size_t bi) const {
    std::vector<int> rest = blocks_[bi].chain;
    if (bi > 0) rest.erase(rest.begin());  // the join, costed with its fork block
    return rest;
  }

  // The states a cost vector can be in: at large N most counts are never allowed.
  std::vector<int> reachable(const std::vector<double>& t) const {
    std::vector<int> states;
    for (int m = 1; m <= n_; ++m)
      if (t[m] < kInf) states.push_back(m);
    return states;
  }

  // Extends `t` (the state of layer `prev`) through `layers`, recording each minimum's argument.
  std::vector<double> run_chain(const std::vector<int>& layers, int prev, std::vector<double> t,
                                std::vector<std::vector<int>>& args) const {
    for (int layer : layers) {
      std::vector<double> next(n_ + 1, kInf);
      std::vector<int> best(n_ + 1, 0);
      const std::vector<int> states = reachable(t);
      for (int n : allowed_[layer]) {
        const double own = cm_.compute(layer, n) + cm_.sync(layer, n);
        for (int m : states) {
          const double in = prev < 0 ? 0.0 : cm_.transfer(prev, m, n);
          if (layer_time_ && !cm_.allowed(layer, n, in)) continue;
          const double v = t[m] + in + own;
          if (v < next[n]) next[n] = v, best[n] = m;
        }
      }
      args.push_back(best);
      t = next;
      prev = layer;
    }
    return t;
  }

  int branch_end(const Block& b, size_t br) const { return b.branches[br].empty() ? b.fork : b.branches[br].back(); }

  // cost[n_fork][n_join] of one branch: the least over its end states of the
  // branch's time plus the transfer into the join.
  Table branch_costs(const Block& b, size_t br, ForkChoice& fc, const std::vector<double>& t) const {
    Table cost(n_ + 1, std::vector<double>(n_ + 1, kInf));
    const int end = branch_end(b, br);
    for (int nf : reachable(t)) {
      std::vector<double> start(n_ + 1, kInf);
      start[nf] = 0.0;
      const std::vector<double> out = run_chain(b.branches[br], b.fork, start, fc.args[br][nf]);
      const std::vector<int> ends = reachable(out);
      for (int nj : allowed_[b.join])
        for (int ne : ends) {
          const double v = out[ne] + cm_.transfer(end, ne, nj);
          if (v < cost[nf][nj]) cost[nf][nj] = v, fc.end_state[br][nf][nj] = ne;
        }
    }
    return cost;
  }

  // The cost vector at the join of fork block `b`, from the one at its fork.
  std::vector<double> solve_fork(const Block& b, ForkChoice& fc, const std::vector<double>& t) const {
    const size_t nb = b.branches.size();
    fc.end_state.assign(nb, std::vector<std::vector<int>>(n_ + 1, std::vector<int>(n_ + 1, 0)));
    fc.args.assign(nb, std::vector<std::vector<std::vector<int>>>(n_ + 1));
    std::vector<Table> cost;
    for (size_t br = 0; br < nb; ++br) cost.push_back(branch_costs(b, br, fc, t));
    std::vector<double> next(n_ + 1, kInf);
    fc.fork_state.assign(n_ + 1, 0);
    fc.at_once.assign(n_ + 1, Placement{});
    const BlockAtOnce at_once(cm_, b, n_, layer_time_);
    const std::vector<int> forks_reached = reachable(t);
    const bool forced = branches_ == PlannerOptions::Branches::at_once;
    std::vector<double> once_cost(n_ + 1, kInf);  // per join state: the best at once, and its fork state
    std::vector<int> once_fork(n_ + 1, 0);
    for (int nj : allowed_[b.join]) {
      const double own = cm_.compute(b.join, nj) + cm_.sync(b.join, nj);
      for (int nf : forks_reached) {
        double branches = 0, into_join = 0;
        for (size_t br = 0; br < nb; ++br) {
          branches += cost[br][nf][nj];
          if (cost[br][nf][nj] < kInf) into_join += cm_.transfer(branch_end(b, br), fc.end_state[br][nf][nj], nj);
        }
        if (!layer_time_ || cm_.allowed(b.join, nj, into_join)) {
          const double v = t[nf] + branches + own;
          if (v < next[nj]) next[nj] = v, fc.fork_state[nj] = nf;
        }
        if (branches_ == PlannerOptions::Branches::in_turn) continue;
        // At once costs at least its slowest branch's layers: skip what cannot win.
        const double to_beat = forced ? once_cost[nj] : std::min(next[nj], once_cost[nj]);
        if (t[nf] + at_once.lower_bound() + own >= to_beat) continue;
        Placement once = at_once.best(nf, nj, to_beat - t[nf] - own);
        if (once.count.empty() || (layer_time_ && !cm_.allowed(b.join, nj, once.into_join))) continue;
        const double v = t[nf] + once.time + own;
        if (v < once_cost[nj]) once_cost[nj] = v, once_fork[nj] = nf, fc.at_once[nj] = std::move(once);
      }
      // In turn wins ties; forced, at once wins wherever it is possible.
      if (forced ? once_cost[nj] < kInf : once_cost[nj] < next[nj])
        next[nj] = once_cost[nj], fc.fork_state[nj] = once_fork[nj];
      else
        fc.at_once[nj] = Placement{};
    }
    return next;
  }

  const CostModel& cm_;
  const std::vector<Block>& blocks_;
  const int n_;  // ranks
  const bool layer_time_;
  const PlannerOptions::Branches branches_;  // in turn only, the cheaper, or at once wherever possible
  std::vector<std::vector<int>> allowed_;
  std::vector<ForkChoice> forks_;
  std::vector<std::vector<std::vector<int>>> chain_args_;
};

}  // namespace

PlanResult plan_model(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& o) {
  const CostModel cm(spec, profile, o);
  const std::vector<Block> blocks = decompose(cm, spec.source);
  Program program(cm, blocks, o);
  const std::vector<double> t = program.solve();
  const int final_state = static_cast<int>(std::min_element(t.begin() + 1, t.end()) - t.begin());
  if (t[final_state] == kInf) throw Error("no plan satisfies the amplification limit (this cannot happen with n = 1 allowed)");
  PlanResult result = evaluate(cm, blocks, program.backtrack(final_state), spec, o);
  // The program's own optimum must be what its assignment costs when walked.
  BP_CHECK(std::fabs(result.iteration_s - t[final_state]) <= 1e-9 * std::max(1e-9, t[final_state]),
           "planner inconsistency: program value {} vs assignment cost {}", t[final_state], result.iteration_s);
  return result;
}

PlanResult plan_cost(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& o, const Plan& plan) {
  const CostModel cm(spec, profile, o);
  const std::vector<Block> blocks = decompose(cm, spec.source);
  Assignment a;
  for (const std::string& name : cm.names()) {
    const RankSet& set = plan.ranks_of(name);
    for (size_t k = 1; k < set.size(); ++k)
      if (set[k] != set[0] + static_cast<int>(k))
        throw Error(fmt::format("{}: layer '{}' does not run on a range of consecutive ranks", plan.source, name));
    a.n.push_back(static_cast<int>(set.size()));
    a.first.push_back(set.empty() ? 0 : set[0]);
  }
  if (!in_space(blocks, a))
    throw Error(fmt::format("{}: the plan is not one the planner costs: every layer on ranks 0..n-1, except the "
                            "branches of a fork that run at once (each on one range, disjoint, one from rank 0)",
                            plan.source));
  return evaluate(cm, blocks, a, spec, o);
}

PlanResult plan_exhaustive(const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& o) {
  const CostModel cm(spec, profile, o);
  const std::vector<Block> blocks = decompose(cm, spec.source);
  const int L = cm.layers();
  std::vector<bool> in_branch(L, false);
  for (const Block& b : blocks)
    for (const auto& branch : b.branches)
      for (int layer : branch) in_branch[layer] = o.branches != PlannerOptions::Branches::in_turn;
  Assignment a{std::vector<int>(L, 1), std::vector<int>(L, 0)};
  PlanResult best;
  best.iteration_s = kInf;
  // Every count for every layer, and every first rank for a branch's layers.
  std::function<void(int)> visit = [&](int layer) {
    if (layer == L) {
      if (!in_space(blocks, a)) return;
      PlanResult r = evaluate(cm, blocks, a, spec, o);
      if (r.allowed && r.iteration_s < best.iteration_s) best = r;
      return;
    }
    for (int k = 1; k <= o.ranks; ++k)
      for (int first = 0; first <= (in_branch[layer] ? o.ranks - k : 0); ++first)
        if (cm.allowed(layer, k)) {
          a.n[layer] = k, a.first[layer] = first;
          visit(layer + 1);
        }
  };
  visit(0);
  return best;
}

}  // namespace burstpool
