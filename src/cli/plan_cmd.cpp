// burstpool plan --data-parallel MODEL --ranks N --global-batch B --out PLAN.json
// (the profile-driven planner arrives with the planner issue).
#include <fmt/format.h>

#include "burstpool/error.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/plan.hpp"
#include "commands.hpp"

namespace burstpool::cli {

namespace {
struct PlanArgs {
  std::string model, out;
  bool data_parallel = false;
  int ranks = 0, batch = 0;
};
}  // namespace

Command add_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand("plan", "Write a plan file: each layer's ranks");
  sub->add_option("model", args->model, "Model file (.ini, .h5)")->required();
  sub->add_flag("--data-parallel", args->data_parallel, "Every layer on every rank");
  sub->add_option("--ranks", args->ranks, "Ranks N")->required();
  sub->add_option("--global-batch", args->batch, "Global batch B")->required();
  sub->add_option("--out", args->out, "Plan file to write (JSON)")->required();
  return {sub, [args] {
            if (!args->data_parallel)
              throw Error("only --data-parallel plans can be made in this version (the profile-driven planner is not built yet)");
            if (args->batch < 1) throw Error(fmt::format("--global-batch {} must be >= 1", args->batch));
            ModelSpec spec = load_model_spec(args->model);
            Plan plan = data_parallel_plan(spec, args->ranks, args->batch);
            save_plan(plan, args->out);
            fmt::print("wrote {}: {} layers on ranks 0..{}, global batch {}\n", args->out, spec.layers.size(),
                       args->ranks - 1, args->batch);
          }};
}

}  // namespace burstpool::cli
