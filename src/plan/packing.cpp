#include "burstpool/packing.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "burstpool/error.hpp"
#include "burstpool/json_io.hpp"

namespace burstpool {
namespace {

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()))
    throw Error(fmt::format("{}: \"{}\" must be a finite number", where, key));
  return j[key].get<double>();
}

using Coefficients = std::array<double, 3>;  // base_share, idle_efficiency, busy_efficiency

double predict(const Coefficients& c, const PackingSample& p) {
  return c[0] + c[1] * p.idle_share + c[2] * p.slack_share;
}

double residual(const Coefficients& c, const std::vector<PackingSample>& s) {
  double r = 0;
  for (const PackingSample& p : s) r += (predict(c, p) - p.background_share) * (predict(c, p) - p.background_share);
  return r;
}

// Least squares over the coefficients in `free` (the others 0), by the normal
// equations and Gaussian elimination with partial pivoting; nullopt when they
// are singular (the samples cannot tell those coefficients apart).
std::optional<Coefficients> solve(const std::vector<PackingSample>& s, const std::vector<int>& free) {
  const size_t n = free.size();
  auto x = [&](const PackingSample& p, int k) { return k == 0 ? 1.0 : k == 1 ? p.idle_share : p.slack_share; };
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (const PackingSample& p : s)
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) a[i][j] += x(p, free[i]) * x(p, free[j]);
      a[i][n] += x(p, free[i]) * p.background_share;
    }
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    if (std::abs(a[pivot][c]) < 1e-12) return std::nullopt;
    std::swap(a[c], a[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  Coefficients out{0, 0, 0};
  for (size_t i = 0; i < n; ++i) out[free[i]] = a[i][n] / a[i][i];
  return out;
}

// Non-negative least squares for at most three coefficients: the best of the
// unconstrained fits over every subset of them whose solution is >= 0 (the
// optimum is one of these).
Coefficients fit_non_negative(const std::vector<PackingSample>& s, const std::vector<int>& candidates) {
  Coefficients best{0, 0, 0};
  double best_residual = residual(best, s);
  for (unsigned mask = 1; mask < (1u << candidates.size()); ++mask) {
    std::vector<int> free;
    for (size_t k = 0; k < candidates.size(); ++k)
      if (mask & (1u << k)) free.push_back(candidates[k]);
    const std::optional<Coefficients> c = solve(s, free);
    if (!c || std::any_of(c->begin(), c->end(), [](double v) { return v < 0; })) continue;
    const double r = residual(*c, s);
    if (r < best_residual - 1e-15) best = *c, best_residual = r;
  }
  return best;
}

// A sample's optional "step_s" (> 0) and "idle_gaps_s" (per core, lists of
// seconds >= 0).
void read_gaps(const nlohmann::json& s, const std::string& where, PackingSample& p) {
  p.step_s = number(s, "step_s", where);
  const nlohmann::json& gaps = s["idle_gaps_s"];
  const auto bad = [&] {
    return Error(fmt::format("{}: \"idle_gaps_s\" must be a list per core of idle stretches in seconds (>= 0), "
                             "with \"step_s\" > 0", where));
  };
  if (!(p.step_s > 0) || !gaps.is_array()) throw bad();
  for (const nlohmann::json& rank : gaps) {
    if (!rank.is_array()) throw bad();
    p.idle_gaps_s.emplace_back();
    for (const nlohmann::json& g : rank) {
      if (!g.is_number() || !(g.get<double>() >= 0)) throw bad();
      p.idle_gaps_s.back().push_back(g.get<double>());
    }
  }
}

// The samples with their idle share counted as usable after `gap_cost_s`.
std::vector<PackingSample> with_gap_cost(const std::vector<PackingSample>& samples, double gap_cost_s) {
  std::vector<PackingSample> out = samples;
  for (PackingSample& p : out) p.idle_share = usable_idle_share(p.idle_gaps_s, p.step_s, gap_cost_s);
  return out;
}

bool has_gaps(const PackingSample& p) { return p.step_s > 0 && !p.idle_gaps_s.empty(); }

}  // namespace

double usable_idle_share(const std::vector<std::vector<double>>& idle_gaps_s, double step_s, double gap_cost_s) {
  if (idle_gaps_s.empty() || !(step_s > 0)) return 0;
  double usable = 0;
  for (const std::vector<double>& core : idle_gaps_s)
    for (double gap : core) usable += std::max(0.0, gap - gap_cost_s);
  return usable / step_s / static_cast<double>(idle_gaps_s.size());
}

PackingModel fit_packing(const std::vector<PackingSample>& samples, const std::string& device) {
  if (samples.empty()) throw Error("fit_packing: no measured runs to fit to");
  PackingModel m;
  m.device = device;
  const std::vector<int> free = device == "cpu" ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2};
  Coefficients c{0, 0, 0};
  if (!std::all_of(samples.begin(), samples.end(), has_gaps)) {
    c = fit_non_negative(samples, free);
  } else {
    constexpr double kStep = 20e-6, kLargest = 20e-3;
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k * kStep <= kLargest + 1e-12; ++k) {
      const std::vector<PackingSample> usable = with_gap_cost(samples, k * kStep);
      const Coefficients here = fit_non_negative(usable, free);
      const double r = residual(here, usable);
      if (r < best - 1e-15) best = r, c = here, m.gap_cost_s = k * kStep;
    }
  }
  m.base_share = c[0], m.idle_efficiency = c[1], m.busy_efficiency = c[2];
  double slowdown = 0;
  std::string labels;  // the first few; the file's samples name them all
  constexpr size_t kNamed = 4;
  for (size_t i = 0; i < samples.size(); ++i) {
    slowdown += samples[i].foreground_slowdown;
    if (i < kNamed) labels += (i ? ", " : "") + samples[i].label;
  }
  if (samples.size() > kNamed) labels += fmt::format(" and {} more", samples.size() - kNamed);
  m.foreground_slowdown = slowdown / static_cast<double>(samples.size());
  m.calibration = fmt::format("fitted to {} measured run(s){}: {}", samples.size(),
                              m.gap_cost_s > 0 ? fmt::format(", idle stretches less {:.2f} ms", 1e3 * m.gap_cost_s) : "",
                              labels);
  return m;
}

double background_share(const PackingModel& m, double idle_share, double slack_share) {
  return std::clamp(m.base_share + m.idle_efficiency * idle_share + m.busy_efficiency * slack_share, 0.0, 1.0);
}

void save_packing(const PackingModel& m, const std::vector<PackingSample>& samples, const std::string& path) {
  nlohmann::json list = nlohmann::json::array();
  for (const PackingSample& p : samples) {
    nlohmann::json one = {{"label", p.label},
                          {"idle_share", p.idle_share},
                          {"slack_share", p.slack_share},
                          {"background_share", p.background_share},
                          {"foreground_slowdown", p.foreground_slowdown}};
    if (has_gaps(p)) one["step_s"] = p.step_s, one["idle_gaps_s"] = p.idle_gaps_s;
    list.push_back(one);
  }
  write_json(path, {{"format", "burstpool-packing"},
                    {"device", m.device},
                    {"base_share", m.base_share},
                    {"idle_efficiency", m.idle_efficiency},
                    {"busy_efficiency", m.busy_efficiency},
                    {"foreground_slowdown", m.foreground_slowdown},
                    {"gap_cost_s", m.gap_cost_s},
                    {"calibration", m.calibration},
                    {"samples", list}});
}

PackingModel load_packing(const std::string& path) {
  const nlohmann::json j = read_json(path, "packing");
  if (!j.is_object() || j.value("format", "") != "burstpool-packing")
    throw Error(fmt::format("{}: not a packing model (\"format\" must be \"burstpool-packing\")", path));
  PackingModel m;
  if (!j.contains("device") || !j["device"].is_string()) throw Error(fmt::format("{}: \"device\" must be a string", path));
  m.device = j["device"].get<std::string>();
  m.base_share = number(j, "base_share", path);
  m.idle_efficiency = number(j, "idle_efficiency", path);
  m.busy_efficiency = number(j, "busy_efficiency", path);
  m.foreground_slowdown = number(j, "foreground_slowdown", path);
  if (j.contains("gap_cost_s")) m.gap_cost_s = number(j, "gap_cost_s", path);
  if (m.base_share < 0 || m.idle_efficiency < 0 || m.busy_efficiency < 0 || m.gap_cost_s < 0)
    throw Error(fmt::format("{}: base_share, the efficiencies and gap_cost_s must be >= 0", path));
  if (m.foreground_slowdown < 1e-3) throw Error(fmt::format("{}: \"foreground_slowdown\" must be positive", path));
  m.calibration = j.value("calibration", std::string("from ") + path);
  return m;
}

std::vector<PackingSample> load_packing_samples(const std::string& path) {
  const nlohmann::json j = read_json(path, "packing");
  if (!j.is_object() || !j.contains("samples") || !j["samples"].is_array())
    throw Error(fmt::format("{}: needs a \"samples\" list", path));
  std::vector<PackingSample> out;
  for (size_t i = 0; i < j["samples"].size(); ++i) {
    const nlohmann::json& s = j["samples"][i];
    const std::string where = fmt::format("{}: samples[{}]", path, i);
    if (!s.is_object()) throw Error(where + ": must be an object");
    PackingSample p;
    p.label = s.value("label", fmt::format("sample {}", i));
    p.idle_share = number(s, "idle_share", where);
    p.slack_share = number(s, "slack_share", where);
    p.background_share = number(s, "background_share", where);
    p.foreground_slowdown = number(s, "foreground_slowdown", where);
    if (s.contains("idle_gaps_s")) read_gaps(s, where, p);
    out.push_back(p);
  }
  return out;
}

}  // namespace burstpool
