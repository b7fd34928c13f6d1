// burstpool: parse the command line, run one subcommand, and turn any error
// into one line on stderr and a non-zero exit on every rank.
#include <exception>
#include <new>

#include "burstpool/error.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/version.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace burstpool;
  init_mpi(&argc, &argv);
  CLI::App app{"burstpool: burst-parallel, multiplexed DNN training over MPI"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", [] { return version_report(); },
                       "Print the version, the commit, the backends and the libraries' versions, and exit");
  const std::vector<cli::Command> commands = {cli::add_train(app), cli::add_convert(app), cli::add_plan(app),
                                              cli::add_profile(app), cli::add_simulate(app), cli::add_fit_packing(app),
                                              cli::add_keys(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    if (world().rank == 0) app.exit(e);
    finalize_mpi();
    return 0;
  } catch (const CLI::ParseError& e) {
    die(fmt::format("{} (see 'burstpool --help')", e.what()), 2);
  }
  if (app.get_subcommands().empty()) die("a command is needed (see 'burstpool --help')", 2);
  try {
    for (const cli::Command& c : commands)
      if (c.app->parsed()) c.run();
  } catch (const Error& e) {
    die(e.what());
  } catch (const std::bad_alloc&) {
    die("out of memory");
  } catch (const std::exception& e) {
    die(fmt::format("internal error: {}", e.what()));
  }
  finalize_mpi();
  return cli::exit_status;
}
