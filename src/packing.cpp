#include "burstpool/packing.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "burstpool/error.hpp"
#include "burstpool/json_io.hpp"

namespace burstpool {
namespace {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open file", path));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(fmt::format("{}: not valid JSON (byte {})", path, e.byte));
  }
}

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()))
    throw Error(fmt::format("{}: \"{}\" must be a finite number", where, key));
  return j[key].get<double>();
}

// Minimises sum (share - a x)^2 over a >= 0.
double fit_one(const std::vector<PackingSample>& s, double PackingSample::*x) {
  double xy = 0, xx = 0;
  for (const PackingSample& p : s) xy += p.*x * p.background_share, xx += p.*x * p.*x;
  return xx > 0 ? std::max(0.0, xy / xx) : 0.0;
}

}  // namespace

PackingModel fit_packing(const std::vector<PackingSample>& samples, const std::string& device) {
  if (samples.empty()) throw Error("fit_packing: no measured runs to fit to");
  PackingModel m;
  m.device = device;
  double sii = 0, sss = 0, sis = 0, siy = 0, ssy = 0, slowdown = 0;
  for (const PackingSample& p : samples) {
    sii += p.idle_share * p.idle_share, sss += p.slack_share * p.slack_share, sis += p.idle_share * p.slack_share;
    siy += p.idle_share * p.background_share, ssy += p.slack_share * p.background_share;
    slowdown += p.foreground_slowdown;
  }
  if (sii <= 0 && (device == "cpu" || sss <= 0))
    throw Error("fit_packing: the runs leave the foreground no idle (or slack) time, so they cannot fix the fit");
  const double det = sii * sss - sis * sis;
  if (device == "cpu" || det <= 1e-12 * std::max(1.0, sii * sss)) {
    m.idle_efficiency = fit_one(samples, &PackingSample::idle_share);
    m.busy_efficiency = 0;
  } else {  // the 2x2 normal equations; a negative coefficient is dropped and the other refitted
    m.idle_efficiency = (siy * sss - ssy * sis) / det;
    m.busy_efficiency = (ssy * sii - siy * sis) / det;
    if (m.idle_efficiency < 0) m.idle_efficiency = 0, m.busy_efficiency = fit_one(samples, &PackingSample::slack_share);
    if (m.busy_efficiency < 0) m.busy_efficiency = 0, m.idle_efficiency = fit_one(samples, &PackingSample::idle_share);
  }
  m.foreground_slowdown = slowdown / static_cast<double>(samples.size());
  std::string labels;
  for (const PackingSample& p : samples) labels += (labels.empty() ? "" : ", ") + p.label;
  m.calibration = fmt::format("fitted to {} measured run(s): {}", samples.size(), labels);
  return m;
}

double background_share(const PackingModel& m, double idle_share, double slack_share) {
  return std::clamp(m.idle_efficiency * idle_share + m.busy_efficiency * slack_share, 0.0, 1.0);
}

void save_packing(const PackingModel& m, const std::vector<PackingSample>& samples, const std::string& path) {
  nlohmann::json list = nlohmann::json::array();
  for (const PackingSample& p : samples)
    list.push_back({{"label", p.label},
                    {"idle_share", p.idle_share},
                    {"slack_share", p.slack_share},
                    {"background_share", p.background_share},
                    {"foreground_slowdown", p.foreground_slowdown}});
  write_json(path, {{"format", "burstpool-packing"},
                    {"device", m.device},
                    {"idle_efficiency", m.idle_efficiency},
                    {"busy_efficiency", m.busy_efficiency},
                    {"foreground_slowdown", m.foreground_slowdown},
                    {"calibration", m.calibration},
                    {"samples", list}});
}

PackingModel load_packing(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || j.value("format", "") != "burstpool-packing")
    throw Error(fmt::format("{}: not a packing model (\"format\" must be \"burstpool-packing\")", path));
  PackingModel m;
  if (!j.contains("device") || !j["device"].is_string()) throw Error(fmt::format("{}: \"device\" must be a string", path));
  m.device = j["device"].get<std::string>();
  m.idle_efficiency = number(j, "idle_efficiency", path);
  m.busy_efficiency = number(j, "busy_efficiency", path);
  m.foreground_slowdown = number(j, "foreground_slowdown", path);
  if (m.idle_efficiency < 0 || m.busy_efficiency < 0)
    throw Error(fmt::format("{}: the efficiencies must be >= 0", path));
  if (m.foreground_slowdown < 1e-3) throw Error(fmt::format("{}: \"foreground_slowdown\" must be positive", path));
  m.calibration = j.value("calibration", std::string("from ") + path);
  return m;
}

std::vector<PackingSample> load_packing_samples(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
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
    out.push_back(p);
  }
  return out;
}

}  // namespace burstpool
