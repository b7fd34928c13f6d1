// burstpool plan MODEL --profile P (--network NET | --bandwidth GBPS --latency US) --ranks N
//                      --global-batch B [--amp-limit A|none] [--soft-limit] [--amp-rule compute|layer-time]
//                      [--branches auto|in-turn|at-once] [--out PLAN.json]
// burstpool plan --data-parallel MODEL --ranks N --global-batch B --out PLAN.json
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "burstpool/error.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/plan.hpp"
#include "burstpool/planner.hpp"
#include "burstpool/profile.hpp"
#include "burstpool/json_io.hpp"
#include "commands.hpp"
#include "network_args.hpp"

namespace burstpool::cli {

namespace {
struct PlanArgs {
  std::string model, out, profile, summary, amp = "2";
  bool data_parallel = false, soft = false;
  std::string rule = "compute";  // --amp-rule
  std::string branches = "auto";  // --branches
  int ranks = 0, batch = 0;
  NetworkArgs network;
};

void print_plan(const PlanResult& r, double amp, const std::string& rule) {
  fmt::print("{:<18} {:>9} {:>12} {:>11} {:>12} {:>8}\n", "layer", "ranks", "compute ms", "sync ms", "transfer ms",
             "amplif.");
  for (const PlannedLayer& l : r.layers)
    fmt::print("{:<18} {:>9} {:>12.3f} {:>11.3f} {:>12.3f} {:>8.2f}\n", l.name,
               l.first_rank == 0 ? fmt::format("{}", l.ranks) : rank_ranges(r.plan.ranks_of(l.name)),
               1e3 * l.compute_s, 1e3 * l.sync_s, 1e3 * l.transfer_s, l.amplification);
  fmt::print("predicted iteration {:.3f} ms, device-time {:.3f} rank-ms per step (amplification limit {}{})\n",
             1e3 * r.iteration_s, 1e3 * r.device_s, std::isfinite(amp) ? fmt::format("{}", amp) : "none",
             std::isfinite(amp) ? ", " + rule + " rule" : "");
}

void write_data_parallel(const PlanArgs& args, const ModelSpec& spec) {
  if (args.out.empty()) throw Error("--data-parallel needs --out");
  save_plan(data_parallel_plan_within(spec, args.ranks, args.batch), args.out);
  fmt::print("wrote {}: {} layers on ranks 0..{}, global batch {}{}\n", args.out, spec.layers.size(),
             std::min(args.ranks, args.batch) - 1, args.batch,
             args.batch < args.ranks ? fmt::format(" (a batch of {} leaves ranks {}..{} without work)", args.batch,
                                                   args.batch, args.ranks - 1)
                                     : "");
}

PlannerOptions planner_options(const PlanArgs& args) {
  PlannerOptions o;
  o.ranks = args.ranks;
  o.global_batch = args.batch;
  float amp = 0;
  if (args.amp == "none")
    o.amp_limit = INFINITY;
  else if (parse_float(args.amp, amp))
    o.amp_limit = amp;
  else
    throw Error(fmt::format("--amp-limit '{}' is not a number or 'none'", args.amp));
  if (!(o.amp_limit >= 1)) throw Error(fmt::format("--amp-limit {} must be >= 1", args.amp));
  o.soft_limit = args.soft;
  o.amp_rule = amp_rule_named(args.rule);
  o.branches = branches_named(args.branches);
  std::tie(o.p2p, o.allreduce) = args.network.resolve("plan");
  return o;
}

// --summary: the plan's predicted times beside data parallel's, per layer.
void write_summary(const PlanArgs& args, const ModelSpec& spec, const ModelProfile& profile, const PlannerOptions& o,
                   const PlanResult& r, double took) {
  // Data parallel can use at most one rank per sample.
  const PlanResult dp =
      plan_cost(spec, profile, o, data_parallel_plan(spec, std::min(o.ranks, o.global_batch), o.global_batch));
  std::vector<int> counts;
  nlohmann::json layers = nlohmann::json::array();
  for (const PlannedLayer& l : r.layers) {
    counts.push_back(l.ranks);
    layers.push_back({{"name", l.name}, {"ranks", l.ranks}, {"first_rank", l.first_rank}, {"compute_s", l.compute_s}, {"sync_s", l.sync_s},
                      {"transfer_s", l.transfer_s}, {"amplification", l.amplification}});
  }
  write_json(args.summary,
             {{"model", spec.name}, {"ranks", o.ranks}, {"global_batch", o.global_batch},
              {"amp_limit", std::isfinite(o.amp_limit) ? nlohmann::json(o.amp_limit) : nlohmann::json("none")},
              {"iteration_s", r.iteration_s}, {"device_s", r.device_s},
              {"data_parallel_iteration_s", dp.iteration_s}, {"data_parallel_device_s", dp.device_s},
              {"amp_rule", args.rule}, {"branches", args.branches}, {"layer_ranks", counts}, {"layers", layers}, {"planning_seconds", took},
              {"profile_device", profile.device}, {"profile_threads", profile.threads}});
}

void run_plan(const PlanArgs& args) {
  if (args.ranks < 1) throw Error(fmt::format("--ranks {} must be >= 1", args.ranks));
  if (args.batch < 1) throw Error(fmt::format("--global-batch {} must be >= 1", args.batch));
  ModelSpec spec = load_model_spec(args.model);
  if (args.data_parallel) return write_data_parallel(args, spec);
  if (args.profile.empty()) throw Error("plan needs --profile (or --data-parallel)");
  const PlannerOptions o = planner_options(args);
  ModelProfile profile = load_profile(args.profile, spec);
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r = plan_model(spec, profile, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_plan(r, o.amp_limit, args.rule);
  fmt::print("planned {} layers for {} ranks in {:.3f} s\n", r.layers.size(), o.ranks, took);
  if (!args.out.empty()) {
    save_plan(r.plan, args.out);
    fmt::print("wrote {}\n", args.out);
  }
  if (!args.summary.empty()) write_summary(args, spec, profile, o, r, took);
}

}  // namespace

Command add_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand("plan", "Plan each layer's ranks from profiles, or write the data-parallel plan");
  sub->add_option("model", args->model, "Model file (.ini, .h5)")->required();
  sub->add_flag("--data-parallel", args->data_parallel,
                "Every layer on every rank, or on the first B when the batch B is smaller (needs no profile)");
  sub->add_option("--profile", args->profile, "Layer profile (burstpool profile MODEL ...)");
  args->network.add_to(sub);
  sub->add_option("--ranks", args->ranks, "Ranks N")->required();
  sub->add_option("--global-batch", args->batch, "Global batch B")->required();
  sub->add_option("--amp-limit", args->amp, "Amplification limit A >= 1, or 'none'");
  sub->add_flag("--soft-limit", args->soft, "The original soft rule: layers under 300 us are exempt");
  sub->add_option("--amp-rule", args->rule,
                  "What the limit bounds: compute (n x the layer's compute on n ranks <= A x on one) or layer-time "
                  "(DeepPool's: its compute, gradient sum and incoming transfers together)")
      ->check(CLI::IsMember({"compute", "layer-time"}));
  sub->add_option("--branches", args->branches,
                  "A fork's branches: auto (at once on disjoint ranks where predicted faster, else in turn), "
                  "in-turn (always one after another, on rank prefixes) or at-once (wherever the ranks allow)")
      ->check(CLI::IsMember({"auto", "in-turn", "at-once"}));
  sub->add_option("--out", args->out, "Plan file to write (JSON)");
  sub->add_option("--summary", args->summary,
                  "Write the predicted iteration time and device-time of the plan and of data parallel (JSON)");
  return {sub, [args] { run_plan(*args); }};
}

}  // namespace burstpool::cli
