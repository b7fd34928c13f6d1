// burstpool convert IN OUT: model files between INI and HDF5 (by extension).
// keys: prints the job-file key table (the source of docs/jobs.md).
#include <fmt/format.h>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "commands.hpp"

namespace burstpool::cli {

namespace {
struct ConvertArgs {
  std::string in, out;
  bool init_weights = false;
  long long seed = 1;
};
}  // namespace

Command add_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* sub = app.add_subcommand("convert", "Convert a model file between INI and HDF5 (chosen by extension)");
  sub->add_option("input", args->in, "Model file to read (.ini, .h5)")->required();
  sub->add_option("output", args->out, "Model file to write (.ini, .h5)")->required();
  sub->add_flag("--init-weights", args->init_weights, "HDF5 output: include freshly initialised weights");
  sub->add_option("--seed", args->seed, "Seed for --init-weights");
  return {sub, [args] {
            if (args->init_weights && !is_hdf5_path(args->out))
              throw Error(fmt::format("convert: --init-weights needs an HDF5 output (.h5): {} would be INI, which "
                                      "holds no weights", args->out));
            if (args->seed < 0) throw Error(fmt::format("convert: --seed {} is negative", args->seed));
            ModelSpec spec = load_model_spec(args->in);
            if (!is_hdf5_path(args->out)) {
              save_model_ini(spec, args->out);
              fmt::print("wrote {} ({} layers){}\n", args->out, spec.layers.size(),
                         is_hdf5_path(args->in) && has_weights(args->in) ? "; weights are not kept in INI" : "");
              return;
            }
            std::unique_ptr<Model> model;
            if (args->init_weights || (is_hdf5_path(args->in) && has_weights(args->in))) {
              model = std::make_unique<Model>(spec, 1, static_cast<uint64_t>(args->seed));
              if (!args->init_weights) load_weights(args->in, *model);
            } else {
              Model check(spec, 1, 0);  // validates shapes before writing
            }
            save_model_hdf5(spec, args->out, model.get());
            fmt::print("wrote {} ({} layers{})\n", args->out, spec.layers.size(), model ? ", with weights" : "");
          }};
}

Command add_keys(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("keys", "Print every job-file key with its default, unit and meaning (Markdown)");
  return {sub, [] { fmt::print("{}", job_schema_markdown()); }};
}

}  // namespace burstpool::cli
