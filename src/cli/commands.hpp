#pragma once
// Subcommands of the burstpool executable. Each registers its subcommand and
// options on the CLI11 app and returns the action to run after parsing.
#include <CLI/CLI.hpp>

#include <functional>

namespace burstpool::cli {

// The process's exit status when the command returns normally (errors exit
// through die()): 0, or kStoppedExitStatus for a training run stopped early.
inline int exit_status = 0;

struct Command {
  CLI::App* app;
  std::function<void()> run;
};

Command add_train(CLI::App& app);
Command add_convert(CLI::App& app);
Command add_keys(CLI::App& app);
Command add_plan(CLI::App& app);
Command add_profile(CLI::App& app);
Command add_simulate(CLI::App& app);
Command add_fit_packing(CLI::App& app);

}  // namespace burstpool::cli
