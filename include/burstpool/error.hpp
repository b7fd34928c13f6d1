#pragma once
// One error path for the whole project.
//
// burstpool::Error carries a message meant for the user. Bad input (a config key,
// a model line, a data file) is reported with `throw Error(...)` naming the user's
// file and line or key. Broken internal invariants and failed library calls use
// the BP_CHECK family, which adds the source location. `main` catches Error,
// prints one line and, under MPI, aborts every rank so none is left waiting.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace burstpool {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws Error("<what> (at file:line)"); used by the check macros below.
[[noreturn]] void throw_check_failure(const char* file, int line, const std::string& what);

}  // namespace burstpool

// Internal invariant: BP_CHECK(n > 0, "batch {} must be positive", n)
#define BP_CHECK(cond, ...)                                                      \
  do {                                                                           \
    if (!(cond)) ::burstpool::throw_check_failure(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (0)

// MPI call that must return MPI_SUCCESS; the message names the call.
#define BP_MPI_CHECK(call)                                                       \
  do {                                                                           \
    int bp_mpi_rc_ = (call);                                                     \
    if (bp_mpi_rc_ != 0)                                                         \
      ::burstpool::throw_check_failure(__FILE__, __LINE__,                       \
                                       fmt::format("MPI call failed ({}): {}", bp_mpi_rc_, #call)); \
  } while (0)
