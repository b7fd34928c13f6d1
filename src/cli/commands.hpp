#pragma once
// Subcommands of the burstpool executable. Each registers its subcommand and
// options on the CLI11 app and returns the action to run after parsing.
#include <CLI/CLI.hpp>

#include <functional>

namespace burstpool::cli {

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

}  // namespace burstpool::cli
