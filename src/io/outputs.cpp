#include "burstpool/outputs.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <set>

#include "burstpool/error.hpp"

namespace burstpool {
namespace {

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_folder(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void require_writable_folder(const OutputFile& f) {
  const std::string folder = folder_of(f.path);
  if (!is_folder(folder))
    throw Error(fmt::format("{} {}: the folder {} does not exist", f.key, f.path, folder));
  const std::string probe = fmt::format("{}/.burstpool-write-test.{}", folder, getpid());
  FILE* out = std::fopen(probe.c_str(), "w");
  if (!out) throw Error(fmt::format("{} {}: cannot create files in {}", f.key, f.path, folder));
  std::fclose(out);
  std::remove(probe.c_str());
}

// <name>.tmp.<pid> files in the path's folder whose pid does not run here.
std::vector<std::string> remove_stale_temporaries(const std::string& path) {
  std::vector<std::string> removed;
  const std::string folder = folder_of(path), prefix = name_of(path) + ".tmp.";
  DIR* dir = opendir(folder.c_str());
  if (!dir) return removed;
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    const std::string full = folder + "/" + name;
    if (std::remove(full.c_str()) == 0) removed.push_back(full);
  }
  closedir(dir);
  return removed;
}

}  // namespace

std::vector<std::string> check_outputs(const std::vector<OutputFile>& files) {
  std::vector<std::string> removed;
  std::set<std::string> taken;
  for (const OutputFile& f : files) {
    if (f.path.empty()) continue;
    if (is_folder(f.path)) throw Error(fmt::format("{} {}: is a folder, not a file", f.key, f.path));
    for (const std::string& p : {f.path, f.path + ".prev"})
      if (taken.count(p))
        throw Error(fmt::format("{} {}: another output of this run is written there too", f.key, f.path));
    taken.insert(f.path);
    taken.insert(f.path + ".prev");
    require_writable_folder(f);
    for (const std::string& r : remove_stale_temporaries(f.path)) removed.push_back(r);
  }
  return removed;
}

std::string write_with_fallback(const std::string& path, const std::function<void(const std::string&)>& write) {
  std::string errors;
  for (const std::string& p : {path, name_of(path), "/tmp/" + name_of(path)}) {
    try {
      write(p);
      return p;
    } catch (const Error& e) {
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e.what());
    }
  }
  throw Error(fmt::format("could not write {} anywhere: {}", name_of(path), errors));
}

}  // namespace burstpool
