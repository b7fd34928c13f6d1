#pragma once
// A run's output files, checked before training starts, so that a bad path
// fails in a second rather than after hours of training with the results lost.
#include <functional>
#include <string>
#include <vector>

namespace burstpool {

struct OutputFile {
  std::string key;   // "[output] metrics", for messages
  std::string path;  // expanded; empty: not written
};

// Throws Error naming the key unless every non-empty path is distinct (a
// checkpoint's <path>.prev counts as its own), is not a folder, and lies in a
// folder where a file can be created and removed. Removes stale
// <path>.tmp.<pid> files that a writer on this host left when it died (its
// pid no longer runs here); returns what it removed, for a notice.
std::vector<std::string> check_outputs(const std::vector<OutputFile>& files);

// Calls write(path); if that throws Error, write(the file's name in the
// working folder), then write(/tmp/name). Returns where it went; throws only
// when all three fail. For results that must not be lost at the end of a run.
std::string write_with_fallback(const std::string& path, const std::function<void(const std::string&)>& write);

}  // namespace burstpool
