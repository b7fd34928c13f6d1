#include "io/h5.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>

#include "burstpool/error.hpp"
#include "burstpool/files.hpp"
#include "burstpool/memory.hpp"
#include "burstpool/runtime.hpp"

namespace burstpool::h5 {
namespace {

// Before the library's first use (every entry here calls quiet() first):
// errors come back as codes, and HDF5 registers no exit handler. The handler
// would close files still open at exit, and a file whose close failed (a full
// disk during a checkpoint) made it crash in H5F__close_cb after the error
// was reported; every file burstpool writes is closed, or abandoned and
// removed, explicitly.
struct Quiet {
  Quiet() {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
};
void quiet() { static Quiet once; }

// The crash notes' shared state: the line to print, built before any crash
// (a signal handler may only write it), and the handlers to restore.
struct CrashState {
  std::mutex mutex;
  std::vector<std::string> lines;  // one per open note, innermost last
  struct sigaction previous[3];
};
CrashState& crash_state() {
  static CrashState state;
  return state;
}
constexpr int kCrashSignals[3] = {SIGSEGV, SIGBUS, SIGFPE};
char g_crash_line[2048];
size_t g_crash_length = 0;

void set_crash_line(const std::string& line) {
  g_crash_length = std::min(line.size(), sizeof g_crash_line);
  std::memcpy(g_crash_line, line.data(), g_crash_length);
}

extern "C" void on_crash(int) {
  [[maybe_unused]] ssize_t written = write(STDERR_FILENO, g_crash_line, g_crash_length);
  _exit(1);
}

}  // namespace

class CrashNote {
 public:
  explicit CrashNote(const std::string& path) {
    CrashState& s = crash_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.lines.push_back(error_line(fmt::format("{}: corrupt HDF5 file: the HDF5 library crashed reading it", path)));
    set_crash_line(s.lines.back());
    if (s.lines.size() > 1) return;
    struct sigaction action {};
    action.sa_handler = on_crash;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kCrashSignals[i], &action, &s.previous[i]);
  }
  ~CrashNote() {
    CrashState& s = crash_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.lines.pop_back();
    if (!s.lines.empty()) {
      set_crash_line(s.lines.back());
      return;
    }
    for (int i = 0; i < 3; ++i) sigaction(kCrashSignals[i], &s.previous[i], nullptr);
  }
  CrashNote(const CrashNote&) = delete;
  CrashNote& operator=(const CrashNote&) = delete;
};

namespace {

[[noreturn]] void fail(const File& f, const std::string& what) {
  throw Error(fmt::format("{}: {}", f.path(), what));
}

Handle open_object(const File& f, const std::string& object) {
  quiet();
  hid_t id = H5Oopen(f.id(), object.c_str(), H5P_DEFAULT);
  if (id < 0) fail(f, fmt::format("object '{}' is missing or unreadable", object));
  return Handle(id, H5Oclose);
}

Handle open_dataset(const File& f, const std::string& path) {
  quiet();
  if (!exists(f, path)) fail(f, fmt::format("dataset '{}' is missing", path));
  hid_t id = H5Dopen2(f.id(), path.c_str(), H5P_DEFAULT);
  if (id < 0) fail(f, fmt::format("dataset '{}' cannot be opened", path));
  return Handle(id, H5Dclose);
}

}  // namespace

std::vector<hsize_t> dims_of(const File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail(f, fmt::format("dataset '{}' has no readable shape", path));
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

namespace {

template <class T>
std::vector<T> read_numbers(const File& f, const std::string& path, hid_t mem_type, std::vector<hsize_t>* out_dims) {
  std::vector<hsize_t> dims = dims_of(f, path);
  Handle ds = open_dataset(f, path);
  // A corrupt header can promise any shape: the values must fit in 64 bits
  // and in the memory this node has free, or the read is refused here
  // instead of failing to allocate.
  const uint64_t most = node_memory_available(0, nullptr) / sizeof(T);
  uint64_t count = 1;
  for (hsize_t d : dims) {
    if (d != 0 && count > std::numeric_limits<uint64_t>::max() / d) count = std::numeric_limits<uint64_t>::max();
    else count *= d;
  }
  if (most > 0 && count > most)
    fail(f, fmt::format("dataset '{}' claims shape {} ({} values), more than the memory free here holds (corrupt "
                        "file?)",
                        path, fmt::join(dims, "x"), count));
  std::vector<T> data(count);
  if (count > 0 && H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()) < 0)
    fail(f, fmt::format("dataset '{}' could not be read (truncated or corrupt file?)", path));
  if (out_dims) *out_dims = dims;
  return data;
}

}  // namespace

File File::create(const std::string& path) {
  quiet();
  File f;
  f.path_ = path;
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_link_creation_order(fcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5Pclose(fcpl);
  if (id < 0) throw Error(fmt::format("{}: cannot create HDF5 file", path));
  f.h_ = Handle(id, H5Fclose);
  return f;
}

File::File() = default;
File::~File() = default;
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;

File File::open_read(const std::string& path) {
  quiet();
  File f;
  f.path_ = path;
  require_regular_file(path, "HDF5");
  f.note_ = std::make_unique<CrashNote>(path);
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw Error(fmt::format("{}: not a readable HDF5 file (truncated or corrupt?)", path));
  f.h_ = Handle(id, H5Fclose);
  return f;
}

void File::close() {
  if (h_.get() < 0) return;
  if (H5Fflush(h_.get(), H5F_SCOPE_GLOBAL) < 0) fail(*this, "flush failed");
  if (H5Fclose(h_.release()) < 0) fail(*this, "close failed");
}

bool exists(const File& f, const std::string& object) {
  quiet();
  // Check each path component: H5Lexists fails on a missing intermediate group.
  size_t pos = 0;
  while (true) {
    pos = object.find('/', pos + 1);
    std::string prefix = object.substr(0, pos);
    if (!prefix.empty() && prefix != "/" && H5Lexists(f.id(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

std::vector<std::string> children(const File& f, const std::string& group) {
  Handle g = open_object(f, group);
  std::vector<std::string> names;
  H5G_info_t info;
  if (H5Gget_info(g.get(), &info) < 0) fail(f, fmt::format("'{}' is not a group", group));
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char buf[512];
    ssize_t len = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, buf, sizeof buf, H5P_DEFAULT);
    if (len < 0 || len >= static_cast<ssize_t>(sizeof buf)) fail(f, fmt::format("bad link name in '{}'", group));
    names.emplace_back(buf, len);
  }
  return names;
}

void ensure_group(const File& f, const std::string& group) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = group.find('/', pos + 1);
    std::string prefix = group.substr(0, pos);
    if (prefix.empty() || prefix == "/" || H5Lexists(f.id(), prefix.c_str(), H5P_DEFAULT) > 0) continue;
    // Track attribute creation order so attributes (layer keys) read back in
    // the order they were written.
    Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
    H5Pset_attr_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    hid_t g = H5Gcreate2(f.id(), prefix.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT);
    if (g < 0) fail(f, fmt::format("cannot create group '{}'", prefix));
    H5Gclose(g);
  }
}

void write_string_attr(const File& f, const std::string& object, const std::string& name, const std::string& value) {
  Handle obj = open_object(f, object);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (attr.get() < 0 || H5Awrite(attr.get(), type.get(), value.empty() ? "" : value.data()) < 0)
    fail(f, fmt::format("cannot write attribute '{}' of '{}'", name, object));
}

void write_int_attr(const File& f, const std::string& object, const std::string& name, long long value) {
  Handle obj = open_object(f, object);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(obj.get(), name.c_str(), H5T_NATIVE_LLONG, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (attr.get() < 0 || H5Awrite(attr.get(), H5T_NATIVE_LLONG, &value) < 0)
    fail(f, fmt::format("cannot write attribute '{}' of '{}'", name, object));
}

bool has_attr(const File& f, const std::string& object, const std::string& name) {
  Handle obj = open_object(f, object);
  return H5Aexists(obj.get(), name.c_str()) > 0;
}

std::string read_string_attr(const File& f, const std::string& object, const std::string& name) {
  Handle obj = open_object(f, object);
  if (H5Aexists(obj.get(), name.c_str()) <= 0) fail(f, fmt::format("'{}' has no attribute '{}'", object, name));
  Handle attr(H5Aopen(obj.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING)
    fail(f, fmt::format("attribute '{}' of '{}' is not a string", name, object));
  if (H5Tis_variable_str(type.get()) > 0) {
    char* text = nullptr;
    Handle mem(H5Tget_native_type(type.get(), H5T_DIR_ASCEND), H5Tclose);
    if (H5Aread(attr.get(), mem.get(), &text) < 0) fail(f, fmt::format("cannot read attribute '{}'", name));
    std::string out = text ? text : "";
    H5free_memory(text);
    return out;
  }
  size_t size = H5Tget_size(type.get());
  std::string out(size, '\0');
  if (H5Aread(attr.get(), type.get(), out.data()) < 0) fail(f, fmt::format("cannot read attribute '{}'", name));
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

long long read_int_attr(const File& f, const std::string& object, const std::string& name) {
  Handle obj = open_object(f, object);
  if (H5Aexists(obj.get(), name.c_str()) <= 0) fail(f, fmt::format("'{}' has no attribute '{}'", object, name));
  Handle attr(H5Aopen(obj.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
  long long v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_LLONG, &v) < 0)
    fail(f, fmt::format("attribute '{}' of '{}' is not an integer", name, object));
  return v;
}

std::vector<std::string> attr_names(const File& f, const std::string& object) {
  Handle obj = open_object(f, object);
  H5O_info_t info;
  if (H5Oget_info2(obj.get(), &info, H5O_INFO_NUM_ATTRS) < 0) fail(f, fmt::format("cannot inspect '{}'", object));
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    char buf[256];
    // Creation order where the file tracks it (files burstpool writes), else by name.
    ssize_t len = H5Aget_name_by_idx(obj.get(), ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, buf, sizeof buf, H5P_DEFAULT);
    if (len < 0)
      len = H5Aget_name_by_idx(obj.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, buf, sizeof buf, H5P_DEFAULT);
    if (len < 0 || len >= static_cast<ssize_t>(sizeof buf)) fail(f, fmt::format("bad attribute name on '{}'", object));
    names.emplace_back(buf, len);
  }
  return names;
}

void write_floats(const File& f, const std::string& path, const std::vector<hsize_t>& dims, const float* data) {
  ensure_group(f, path.substr(0, path.rfind('/')));
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle ds(H5Dcreate2(f.id(), path.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (ds.get() < 0 || H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail(f, fmt::format("cannot write dataset '{}'", path));
}

std::vector<float> read_floats(const File& f, const std::string& path, std::vector<hsize_t>* dims) {
  return read_numbers<float>(f, path, H5T_NATIVE_FLOAT, dims);
}

namespace {

// Whole rows read straight from the file with pread, for a contiguous,
// unfiltered dataset stored as little-endian float32, float64 or uint8 (what
// data files hold): HDF5 costs ~8 us per read call, which at one call per
// sample of a batch took 2 ms a step. Returns false where this does not apply.
bool pread_float_rows(const File& f, hid_t ds, hsize_t per, const std::vector<Rows>& runs, float* out) {
  if (std::endian::native != std::endian::little) return false;
  Handle plist(H5Dget_create_plist(ds), H5Pclose);
  if (H5Pget_layout(plist.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(plist.get()) != 0) return false;
  const haddr_t base = H5Dget_offset(ds);
  if (base == HADDR_UNDEF) return false;
  Handle type(H5Dget_type(ds), H5Tclose);
  size_t width = 0;
  if (H5Tequal(type.get(), H5T_IEEE_F32LE) > 0) width = 4;
  else if (H5Tequal(type.get(), H5T_IEEE_F64LE) > 0) width = 8;
  else if (H5Tequal(type.get(), H5T_STD_U8LE) > 0) width = 1;
  else return false;
  const int fd = ::open(f.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::vector<unsigned char> bytes;
  bool ok = true;
  for (const Rows& run : runs) {
    const size_t values = run.count * per, length = values * width;
    bytes.resize(length);
    size_t done = 0;
    while (ok && done < length) {
      const ssize_t n = ::pread(fd, bytes.data() + done, length - done, base + run.first * per * width + done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      done += ok ? static_cast<size_t>(n) : 0;
    }
    if (!ok) break;
    if (width == 4) std::memcpy(out, bytes.data(), length);
    for (size_t i = 0; width == 8 && i < values; ++i) {
      double v;
      std::memcpy(&v, bytes.data() + 8 * i, 8);
      out[i] = static_cast<float>(v);
    }
    for (size_t i = 0; width == 1 && i < values; ++i) out[i] = static_cast<float>(bytes[i]);
    out += values;
  }
  ::close(fd);
  if (!ok) fail(f, "rows could not be read (truncated file?)");
  return true;
}

}  // namespace

void read_float_rows(const File& f, const std::string& path, const std::vector<Rows>& runs, float* out) {
  if (runs.empty()) return;
  const std::vector<hsize_t> dims = dims_of(f, path);
  Handle ds = open_dataset(f, path);
  hsize_t per = 1;
  for (size_t d = 1; d < dims.size(); ++d) per *= dims[d];
  for (const Rows& run : runs)
    if (run.first + run.count > dims[0])
      fail(f, fmt::format("dataset '{}' has {} rows, row {} was asked for", path, dims[0], run.first + run.count - 1));
  if (pread_float_rows(f, ds.get(), per, runs, out)) return;
  // Chunked, compressed or other types: one hyperslab read per run of rows.
  Handle file_space(H5Dget_space(ds.get()), H5Sclose);
  std::vector<hsize_t> start(dims.size(), 0), count = dims;
  for (const Rows& run : runs) {
    start[0] = run.first;
    count[0] = run.count;
    const hsize_t values = run.count * per;
    Handle mem_space(H5Screate_simple(1, &values, nullptr), H5Sclose);
    if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Dread(ds.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(), H5P_DEFAULT, out) < 0)
      fail(f, fmt::format("dataset '{}': rows {}..{} could not be read (truncated or corrupt file?)", path, run.first,
                          run.first + run.count - 1));
    out += values;
  }
}

bool is_floating(const File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  return H5Tget_class(type.get()) == H5T_FLOAT;
}

std::string type_name(const File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  const size_t bits = 8 * H5Tget_size(type.get());
  switch (H5Tget_class(type.get())) {
    case H5T_INTEGER:
      return fmt::format("{}int{}", H5Tget_sign(type.get()) == H5T_SGN_NONE ? "u" : "", bits);
    case H5T_FLOAT:
      return fmt::format("float{}", bits);
    case H5T_STRING:
      return "string";
    default:
      return "a compound or other non-numeric type";
  }
}

std::vector<long long> read_int64s(const File& f, const std::string& path, std::vector<hsize_t>* dims) {
  return read_numbers<long long>(f, path, H5T_NATIVE_LLONG, dims);
}

std::vector<std::string> missing_virtual_sources(const File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  Handle plist(H5Dget_create_plist(ds.get()), H5Pclose);
  std::vector<std::string> missing;
  if (H5Pget_layout(plist.get()) != H5D_VIRTUAL) return missing;
  size_t count = 0;
  H5Pget_virtual_count(plist.get(), &count);
  const std::string file = f.path(), folder = file.find('/') == std::string::npos ? "" : file.substr(0, file.rfind('/') + 1);
  for (size_t i = 0; i < count; ++i) {
    const ssize_t n = H5Pget_virtual_filename(plist.get(), i, nullptr, 0);
    if (n <= 0) continue;
    std::string name(static_cast<size_t>(n) + 1, '\0');
    H5Pget_virtual_filename(plist.get(), i, name.data(), name.size());
    name.resize(static_cast<size_t>(n));
    if (name == ".") continue;  // the same file
    const std::string full = name[0] == '/' ? name : folder + name;
    if (std::FILE* probe = std::fopen(full.c_str(), "rb"))
      std::fclose(probe);
    else
      missing.push_back(name);
  }
  return missing;
}

bool is_group(const File& f, const std::string& object) {
  quiet();
  if (!exists(f, object)) return false;
  const hid_t g = H5Gopen2(f.id(), object.c_str(), H5P_DEFAULT);  // fails (quietly) for a dataset
  if (g < 0) return false;
  H5Gclose(g);
  return true;
}


}  // namespace burstpool::h5
