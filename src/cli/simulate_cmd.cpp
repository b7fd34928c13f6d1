// burstpool simulate PLAN.json --model MODEL --profile P (--network NET | --bandwidth GBPS --latency US) [--out SIM.json]
//   [--background JOB.ini --background-profile P [--background-independent] [--packing PACKING.json]]
#include <fmt/format.h>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/session.hpp"
#include "burstpool/simulator.hpp"
#include "burstpool/trace.hpp"
#include "burstpool/json_io.hpp"
#include "commands.hpp"
#include "network_args.hpp"

namespace burstpool::cli {

namespace {
struct SimulateArgs {
  std::string trace;  // --trace FILE
  std::string plan, model, profile, out, background, background_profile, packing;
  bool independent = false;
  NetworkArgs network;
  int cores = 0;
  double bucket_mb = kDefaultBucketBytes / (1 << 20);
  double bucket_bytes() const { return bucket_mb * (1 << 20); }
};

// The background's prediction: printed, and returned for the JSON output.
nlohmann::json predict(const SimulateArgs& args, const ModelSpec& spec, const ModelProfile& profile, const Plan& plan,
                       const Simulation& sim, const LinkModel& p2p, const LinkModel& all) {
  if (args.background_profile.empty()) throw Error("--background needs --background-profile");
  JobConfig bg = load_job(args.background);
  ModelSpec bg_spec = load_job_model(bg);
  ModelProfile bg_profile = load_profile(args.background_profile, bg_spec);
  const PackingModel packing = args.packing.empty() ? PackingModel{} : load_packing(args.packing);
  ForegroundRun fg{sim, simulate(spec, profile, data_parallel_plan_within(spec, plan.ranks, plan.global_batch), p2p, all,
                                 args.cores, false, args.bucket_bytes()),
                   plan.global_batch};
  const BackgroundPrediction b =
      predict_background(fg, {&bg_spec, &bg_profile, bg.batch_size, args.independent}, packing, p2p, all);
  fmt::print("background '{}' ({}): {:.0f} samples/s alone on {} ranks, {:.0f} beside the foreground (idle {:.0f}%, "
             "{:.0f}% after {:.2f} ms per idle stretch, slack {:.0f}% of rank time)\n",
             bg.name, args.independent ? "a replica per rank" : "data parallel", b.alone_samples_per_second,
             plan.ranks, b.shared_samples_per_second, 100 * b.idle_share, 100 * b.usable_idle_share,
             1e3 * packing.gap_cost_s, 100 * b.slack_share);
  fmt::print("foreground: {:.0f} samples/s under its plan alone, {:.0f} beside the background (slowdown {:.3f}); "
             "data parallel alone {:.0f}\n",
             b.foreground_alone_samples_per_second, b.foreground_shared_samples_per_second, b.foreground_slowdown,
             b.foreground_data_parallel_samples_per_second);
  fmt::print("predicted cluster throughput {:.3f} against data parallel alone ({:.3f} against the plan alone)\n",
             b.cluster_throughput_vs_data_parallel, b.cluster_throughput_vs_own_plan);
  fmt::print("packing model ({}): {}\n", packing.device, packing.calibration);
  return {{"job", bg.name},
          {"independent", args.independent},
          {"alone_samples_per_second", b.alone_samples_per_second},
          {"shared_samples_per_second", b.shared_samples_per_second},
          {"idle_share", b.idle_share},
          {"usable_idle_share", b.usable_idle_share},
          {"idle_gaps_s", sim.idle_gaps_s},
          {"step_s", sim.iteration_s},
          {"slack_share", b.slack_share},
          {"foreground_slowdown", b.foreground_slowdown},
          {"foreground_alone_samples_per_second", b.foreground_alone_samples_per_second},
          {"foreground_shared_samples_per_second", b.foreground_shared_samples_per_second},
          {"foreground_data_parallel_samples_per_second", b.foreground_data_parallel_samples_per_second},
          {"cluster_throughput_vs_data_parallel", b.cluster_throughput_vs_data_parallel},
          {"cluster_throughput_vs_own_plan", b.cluster_throughput_vs_own_plan},
          {"packing", {{"device", packing.device},
                       {"base_share", packing.base_share},
                       {"idle_efficiency", packing.idle_efficiency},
                       {"busy_efficiency", packing.busy_efficiency},
                       {"gap_cost_s", packing.gap_cost_s},
                       {"calibration", packing.calibration}}}};
}
}  // namespace

Command add_simulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* sub = app.add_subcommand("simulate", "Predict a plan's iteration time and per-rank busy/idle time");
  sub->add_option("plan", args->plan, "Plan file (JSON)")->required();
  sub->add_option("--model", args->model, "Model file the plan is for")->required();
  sub->add_option("--profile", args->profile, "Layer profile of the model")->required();
  args->network.add_to(sub);
  sub->add_option("--background", args->background, "Background job file (INI), data parallel on the same ranks");
  sub->add_option("--background-profile", args->background_profile, "Layer profile of the background job's model");
  sub->add_flag("--background-independent", args->independent,
                "The background trains a replica per rank at its job's batch, with no gradient sums");
  sub->add_option("--packing", args->packing,
                  "Packing model (JSON, burstpool fit-packing) for the background; without it, idle time fully used");
  sub->add_option("--cores", args->cores,
                  "Cores the ranks share on one machine with fewer cores than ranks; rank r on core r mod C (0: one per rank)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--bucket-mb", args->bucket_mb,
                  "Gradient allreduce bucket in MiB, as the job's [parallel] bucket_mb (default 25)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--out", args->out, "Write the prediction (JSON)");
  sub->add_option("--trace", args->trace,
                  "Write the predicted step as a per-rank timeline (Chrome/Perfetto trace-event JSON, as train "
                  "--trace writes)");
  return {sub, [args] {
            ModelSpec spec = load_model_spec(args->model);
            ModelProfile profile = load_profile(args->profile, spec);
            Plan plan = load_plan(args->plan);
            const auto [p2p, all] = args->network.resolve("simulate");
            Simulation sim = simulate(spec, profile, plan, p2p, all, args->cores, !args->trace.empty(), args->bucket_bytes());
            fmt::print("predicted iteration {:.3f} ms ({:.0f} samples/s) on {} ranks, global batch {}\n",
                       1e3 * sim.iteration_s, plan.global_batch / sim.iteration_s, plan.ranks, plan.global_batch);
            for (int r = 0; r < plan.ranks; ++r)
              fmt::print("rank {:>3}: busy {:8.3f} ms, idle {:8.3f} ms ({:.0f}% idle)\n", r, 1e3 * sim.busy_s[r],
                         1e3 * sim.idle_s[r], 100 * sim.idle_s[r] / sim.iteration_s);
            if (args->cores > 0)  // with a core per rank the cores are the ranks above
              for (size_t c = 0; c < sim.core_busy_s.size(); ++c)
                fmt::print("core {:>3}: busy {:8.3f} ms ({:.0f}% free)\n", c, 1e3 * sim.core_busy_s[c],
                           100 * std::max(0.0, 1 - sim.core_busy_s[c] / sim.iteration_s));
            nlohmann::json out = {{"iteration_s", sim.iteration_s}, {"busy_s", sim.busy_s}, {"idle_s", sim.idle_s},
                                  {"slack_s", sim.slack_s}, {"core_busy_s", sim.core_busy_s},
                                  {"free_core_share", free_core_share(sim)}, {"ranks", plan.ranks},
                                  {"global_batch", plan.global_batch}};
            if (!args->background.empty()) out["background"] = predict(*args, spec, profile, plan, sim, p2p, all);
            if (!args->out.empty()) write_json(args->out, out);
            if (!args->trace.empty()) {
              write_json(args->trace, trace_json(sim.events, plan.ranks, "burstpool simulate " + args->plan));
              fmt::print("trace: {} events on {} rank(s) in {}\n", sim.events.size(), plan.ranks, args->trace);
            }
          }};
}

}  // namespace burstpool::cli
