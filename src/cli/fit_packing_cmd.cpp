// burstpool fit-packing SAMPLES.json --device cpu|cuda --out PACKING.json
// Fits the packing model (include/burstpool/packing.hpp) to measured
// multiplexed runs: SAMPLES.json holds {"samples": [{"label", "idle_share",
// "slack_share", "background_share", "foreground_slowdown"}, ...]}, the
// shares simulated for each run's plan and the rest measured (perf/multiplex.py
// writes it).
#include <fmt/format.h>

#include "burstpool/packing.hpp"
#include "commands.hpp"

namespace burstpool::cli {

namespace {
struct FitArgs {
  std::string samples, device = "cpu", out;
};
}  // namespace

Command add_fit_packing(CLI::App& app) {
  auto args = std::make_shared<FitArgs>();
  CLI::App* sub = app.add_subcommand("fit-packing", "Fit the simulator's background packing model to measured runs");
  sub->add_option("samples", args->samples, "Measured runs with their simulated idle and slack shares (JSON)")
      ->required();
  sub->add_option("--device", args->device, "Device kind the runs were measured on")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--out", args->out, "Write the packing model here (JSON)")->required();
  return {sub, [args] {
            const std::vector<PackingSample> samples = load_packing_samples(args->samples);
            const PackingModel m = fit_packing(samples, args->device);
            save_packing(m, samples, args->out);
            fmt::print("packing model for {}: base share {:.3f}, idle efficiency {:.3f}, busy efficiency {:.3f}, "
                       "foreground slowdown {:.3f} ({})\n",
                       m.device, m.base_share, m.idle_efficiency, m.busy_efficiency, m.foreground_slowdown, m.calibration);
            for (const PackingSample& s : samples)
              fmt::print("  {}: background share measured {:.3f}, fitted {:.3f}\n", s.label, s.background_share,
                         background_share(m, s.idle_share, s.slack_share));
          }};
}

}  // namespace burstpool::cli
