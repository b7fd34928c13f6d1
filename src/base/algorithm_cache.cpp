#include "burstpool/algorithm_cache.hpp"

#include <sys/stat.h>

#include "burstpool/error.hpp"
#include "burstpool/json_io.hpp"

namespace burstpool {
namespace {

constexpr const char* kFormat = "burstpool cudnn algorithm cache";
constexpr int kVersion = 2;  // 1 kept no math types: its choices are measured again

}  // namespace

AlgorithmCache::AlgorithmCache(std::string path, std::string gpu, long cudnn, bool writer)
    : path_(std::move(path)), gpu_(std::move(gpu)), cudnn_(cudnn), writer_(writer) {
  struct stat st {};
  if (stat(path_.c_str(), &st) == 0) load();
}

// Anything short of a cache made for this GPU and cuDNN is refused whole:
// a stale algorithm may be slower here, or not exist.
void AlgorithmCache::load() {
  nlohmann::json j;
  try {
    j = read_json(path_, "cudnn cache");
    if (!j.is_object() || j.value("format", "") != kFormat || j.value("version", 0) != kVersion)
      throw Error(fmt::format("{}: not a burstpool cudnn cache of version {}", path_, kVersion));
    const std::string gpu = j.at("gpu").get<std::string>();
    const long cudnn = j.at("cudnn").get<long>();
    if (gpu != gpu_ || cudnn != cudnn_) {
      refused_ = fmt::format("{}: made on {} with cuDNN {}, this is {} with cuDNN {}", path_, gpu, cudnn, gpu_, cudnn_);
      return;
    }
    for (const auto& [key, v] : j.at("entries").items()) {
      AlgorithmChoice c{};
      for (size_t k = 0; k < c.size(); ++k) c[k] = checked_int(v.at(k), 0, 1000, path_ + ": entry '" + key + "'");
      entries_[key] = c;
    }
  } catch (const Error& e) {
    refused_ = e.what();
    entries_.clear();
  } catch (const nlohmann::json::exception& e) {
    refused_ = fmt::format("{}: not a burstpool cudnn cache ({})", path_, e.what());
    entries_.clear();
  }
}

std::optional<AlgorithmChoice> AlgorithmCache::find(const std::string& key) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  ++reused_;
  return it->second;
}

void AlgorithmCache::add(const std::string& key, const AlgorithmChoice& choice) {
  entries_[key] = choice;
  ++added_;
  if (writer_) write();
}

void AlgorithmCache::write() const {
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [key, c] : entries_) entries[key] = c;
  write_json(path_, {{"format", kFormat}, {"version", kVersion}, {"gpu", gpu_}, {"cudnn", cudnn_}, {"entries", entries}});
}

}  // namespace burstpool
