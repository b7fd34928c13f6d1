#pragma once
// The small-batch learners' sync strategies by name ([sync] strategy; ssgd
// is the plan's own path and not among them). Each strategy lives in one
// file of src/sync/ (strategy.hpp says what it owns); registry.cpp lists them.
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace burstpool {

class SyncStrategy;  // strategy.hpp
struct JobConfig;

using SyncStrategyFactory = std::function<std::unique_ptr<SyncStrategy>(const JobConfig&)>;

std::vector<std::string> learner_strategy_names();  // in the order listed
// The job's [sync] strategy; throws Error for a name not listed.
std::unique_ptr<SyncStrategy> make_sync_strategy(const JobConfig& job);
// Adds a strategy at run time (tests), before jobs naming it are loaded; a
// name already taken is an Error.
void register_sync_strategy(const std::string& name, SyncStrategyFactory make);

}  // namespace burstpool
