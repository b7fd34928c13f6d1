#include "sync/registry.hpp"

#include <mutex>
#include <utility>

#include "burstpool/error.hpp"
#include "burstpool/job.hpp"
#include "sync/strategy.hpp"

namespace burstpool {

// Each defined in its own file of src/sync/.
std::unique_ptr<SyncStrategy> make_sma_strategy(const JobConfig& job);
std::unique_ptr<SyncStrategy> make_shadow_strategy(const JobConfig& job);
std::unique_ptr<SyncStrategy> make_local_sgd_strategy(const JobConfig& job);

namespace {

struct Registry {
  std::mutex lock;
  std::vector<std::pair<std::string, SyncStrategyFactory>> entries = {
      {"sma", make_sma_strategy},
      {"shadow", make_shadow_strategy},
      {"local-sgd", make_local_sgd_strategy},
  };
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<std::string> learner_strategy_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  std::vector<std::string> names;
  for (const auto& [name, make] : r.entries) names.push_back(name);
  return names;
}

std::unique_ptr<SyncStrategy> make_sync_strategy(const JobConfig& job) {
  SyncStrategyFactory make;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    for (const auto& [name, factory] : r.entries)
      if (name == job.sync.strategy) make = factory;
  }
  if (!make) throw Error(fmt::format("[sync] strategy = {}: no such learner strategy", job.sync.strategy));
  return make(job);
}

void register_sync_strategy(const std::string& name, SyncStrategyFactory make) {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  bool taken = name == "ssgd";
  for (const auto& entry : r.entries) taken = taken || entry.first == name;
  if (taken) throw Error(fmt::format("sync strategy '{}' exists already", name));
  r.entries.emplace_back(name, std::move(make));
}

}  // namespace burstpool
