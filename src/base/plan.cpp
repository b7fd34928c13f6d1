#include "burstpool/plan.hpp"

#include <algorithm>
#include <limits>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "burstpool/error.hpp"
#include "burstpool/json_io.hpp"

namespace burstpool {

Slice even_slice(int batch, int parts, int index) {
  BP_CHECK(parts >= 1 && index >= 0 && index < parts, "slice {} of {}", index, parts);
  const int base = batch / parts, extra = batch % parts;
  return {index * base + std::min(index, extra), base + (index < extra ? 1 : 0)};
}

const RankSet& Plan::ranks_of(const std::string& name) const {
  for (size_t i = 0; i < layer_names.size(); ++i)
    if (layer_names[i] == name) return layer_ranks[i];
  throw Error(fmt::format("{}: the plan has no entry for layer '{}'", source, name));
}

int Plan::position(const RankSet& set, int rank) {
  auto it = std::find(set.begin(), set.end(), rank);
  return it == set.end() ? -1 : static_cast<int>(it - set.begin());
}

Slice Plan::slice_of(const RankSet& set, int rank, int batch) {
  const int pos = position(set, rank);
  if (pos < 0) return {0, 0};
  return even_slice(batch, static_cast<int>(set.size()), pos);
}

Plan data_parallel_plan(const ModelSpec& model, int ranks, int global_batch) {
  if (ranks < 1) throw Error(fmt::format("--ranks {} must be >= 1", ranks));
  if (global_batch < ranks)
    throw Error(fmt::format("global batch {} is smaller than the rank count {}", global_batch, ranks));
  Plan p;
  p.global_batch = global_batch;
  p.ranks = ranks;
  p.source = "data-parallel plan";
  RankSet all(ranks);
  for (int r = 0; r < ranks; ++r) all[r] = r;
  for (const LayerSpec& l : model.layers) {
    p.layer_names.push_back(l.name);
    p.layer_ranks.push_back(all);
  }
  return p;
}

Plan data_parallel_plan_within(const ModelSpec& model, int world_size, int global_batch) {
  if (global_batch < 1) throw Error(fmt::format("global batch {} must be >= 1", global_batch));
  Plan p = data_parallel_plan(model, std::min(world_size, global_batch), global_batch);
  p.ranks = world_size;
  return p;
}

RankSet parse_rank_ranges(const std::string& text, int ranks, const std::string& where) {
  RankSet set;
  auto fail = [&](const std::string& part, const std::string& why) -> Error {
    return Error(fmt::format("{}: ranks \"{}\": '{}' {}", where, text, part, why));
  };
  auto number = [&](const std::string& digits, const std::string& part) {
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw fail(part, "is not a rank or a range A-B");
    const long long r = std::stoll(digits);
    if (r >= ranks) throw fail(part, fmt::format("names rank {}, outside 0..{}", r, ranks - 1));
    return static_cast<int>(r);
  };
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    std::string part = text.substr(at, comma - at);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    const size_t dash = part.find('-');
    const int lo = number(part.substr(0, dash), part);
    const int hi = dash == std::string::npos ? lo : number(part.substr(dash + 1), part);
    if (hi < lo) throw fail(part, "runs backwards");
    if (!set.empty() && lo <= set.back())
      throw fail(part, fmt::format("overlaps or comes before rank {}: list ranks in ascending order, once", set.back()));
    for (int r = lo; r <= hi; ++r) set.push_back(r);
    at = comma + 1;
  }
  return set;
}

std::string rank_ranges(const RankSet& set) {
  std::string text;
  for (size_t i = 0; i < set.size();) {
    size_t j = i;
    while (j + 1 < set.size() && set[j + 1] == set[j] + 1) ++j;
    if (!text.empty()) text += ',';
    text += j == i ? std::to_string(set[i]) : fmt::format("{}-{}", set[i], set[j]);
    i = j + 1;
  }
  return text;
}

Plan load_plan(const std::string& path) {
  const nlohmann::json j = read_json(path, "plan");
  Plan p;
  p.source = path;
  auto need_int = [&](const nlohmann::json& obj, const char* key) {
    if (!obj.is_object() || !obj.contains(key)) throw Error(fmt::format("{}: the plan needs an integer \"{}\"", path, key));
    return checked_int(obj[key], 1, std::numeric_limits<int>::max(), fmt::format("{}: \"{}\"", path, key));
  };
  p.global_batch = need_int(j, "global_batch");
  p.ranks = need_int(j, "ranks");
  if (!j.contains("layers") || !j["layers"].is_array())
    throw Error(fmt::format("{}: the plan needs a \"layers\" array", path));
  for (const auto& entry : j["layers"]) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string())
      throw Error(fmt::format("{}: every layer entry needs a \"name\" string", path));
    const std::string name = entry["name"];
    if (!entry.contains("ranks") || !(entry["ranks"].is_array() || entry["ranks"].is_string()))
      throw Error(fmt::format("{}: layer '{}' needs \"ranks\": a string of ranges (\"0-7\") or an array", path, name));
    RankSet set;
    if (entry["ranks"].is_string())
      set = parse_rank_ranges(entry["ranks"].get<std::string>(), p.ranks, fmt::format("{}: layer '{}'", path, name));
    for (const auto& r : entry["ranks"].is_array() ? entry["ranks"] : nlohmann::json::array())
      set.push_back(checked_int(r, 0, std::numeric_limits<int>::max(), fmt::format("{}: layer '{}': rank", path, name)));
    p.layer_names.push_back(name);
    p.layer_ranks.push_back(set);
  }
  return p;
}

void save_plan(const Plan& plan, const std::string& path) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < plan.layer_names.size(); ++i)
    layers.push_back({{"name", plan.layer_names[i]}, {"ranks", rank_ranges(plan.layer_ranks[i])}});
  write_json(path, {{"global_batch", plan.global_batch}, {"ranks", plan.ranks}, {"layers", layers}});
}

void validate_plan(const Plan& plan, const ModelSpec& model, int world_size) {
  const std::string& f = plan.source;
  if (plan.ranks != world_size)
    throw Error(fmt::format("{}: the plan is for {} ranks but {} are running", f, plan.ranks, world_size));
  if (plan.global_batch < 1) throw Error(fmt::format("{}: global_batch {} must be >= 1", f, plan.global_batch));
  std::set<std::string> seen;
  for (size_t i = 0; i < plan.layer_names.size(); ++i) {
    const std::string& name = plan.layer_names[i];
    if (model.find(name) < 0)
      throw Error(fmt::format("{}: layer '{}' is not in model '{}'", f, name, model.name));
    if (!seen.insert(name).second) throw Error(fmt::format("{}: layer '{}' is listed twice", f, name));
    const RankSet& set = plan.layer_ranks[i];
    if (set.empty()) throw Error(fmt::format("{}: layer '{}' has no ranks", f, name));
    std::set<int> distinct;
    for (int r : set) {
      if (r < 0 || r >= plan.ranks)
        throw Error(fmt::format("{}: layer '{}' names rank {}, outside 0..{}", f, name, r, plan.ranks - 1));
      if (!distinct.insert(r).second) throw Error(fmt::format("{}: layer '{}' lists rank {} twice", f, name, r));
    }
    if (!std::is_sorted(set.begin(), set.end()))
      throw Error(fmt::format("{}: layer '{}' must list its ranks in ascending order", f, name));
    if (plan.global_batch < static_cast<int>(set.size()))
      throw Error(fmt::format("{}: global batch {} is smaller than layer '{}''s {} ranks", f, plan.global_batch, name,
                              set.size()));
  }
  for (const LayerSpec& l : model.layers)
    if (!seen.count(l.name)) throw Error(fmt::format("{}: layer '{}' of model '{}' has no entry", f, l.name, model.name));
}

}  // namespace burstpool
