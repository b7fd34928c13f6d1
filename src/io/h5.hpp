#pragma once
// Thin RAII layer over the HDF5 C API, internal to the library. Every failure
// throws burstpool::Error naming the file and the object; HDF5's own error
// stack printing is switched off so users see one line, not a trace.
#include <hdf5.h>

#include <memory>
#include <string>
#include <vector>

namespace burstpool::h5 {

class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) reset(), id_ = o.id_, close_ = o.close_, o.id_ = -1;
    return *this;
  }
  hid_t get() const { return id_; }
  hid_t release() {  // the caller closes it now
    hid_t id = id_;
    id_ = -1;
    return id;
  }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// HDF5 does not survive every corrupt file: some faults in its metadata make
// it read through a bad address (seen in H5F__accum_read after a byte flip in
// a B-tree). While a file opened by File::open_read is open, a crash signal
// (SIGSEGV, SIGBUS, SIGFPE) ends the process with exit status 1 and one line
// naming the file, instead of a core dump; the handlers in place before are
// restored when the last such file closes.
class CrashNote;

class File {
 public:
  static File create(const std::string& path);  // truncates
  static File open_read(const std::string& path);
  File();
  ~File();
  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  const std::string& path() const { return path_; }
  hid_t id() const { return h_.get(); }
  void close();  // flush and close now; errors throw

 private:
  std::string path_;
  std::unique_ptr<CrashNote> note_;  // declared before h_: the file closes while the note stands
  Handle h_;
};

bool exists(const File& f, const std::string& object);
// Names of the links directly inside group `group`, in creation order where recorded.
std::vector<std::string> children(const File& f, const std::string& group);
void ensure_group(const File& f, const std::string& group);

void write_string_attr(const File& f, const std::string& object, const std::string& name, const std::string& value);
void write_int_attr(const File& f, const std::string& object, const std::string& name, long long value);
bool has_attr(const File& f, const std::string& object, const std::string& name);
std::string read_string_attr(const File& f, const std::string& object, const std::string& name);
long long read_int_attr(const File& f, const std::string& object, const std::string& name);
std::vector<std::string> attr_names(const File& f, const std::string& object);

void write_floats(const File& f, const std::string& path, const std::vector<hsize_t>& dims, const float* data);
// Reads a numeric dataset converted to float; returns its dims.
std::vector<float> read_floats(const File& f, const std::string& path, std::vector<hsize_t>* dims = nullptr);
std::vector<hsize_t> dims_of(const File& f, const std::string& path);
// Reads runs of whole rows (first index along dimension 0, row count) of a
// numeric dataset as float, in the order given, into `out` (room for every
// row's values): one hyperslab selection, one read. Runs must be in
// increasing order without overlap (HDF5 returns a selection in file order).
struct Rows {
  hsize_t first, count;
};
void read_float_rows(const File& f, const std::string& path, const std::vector<Rows>& runs, float* out);
// Whether the dataset's stored type is floating point (any width).
bool is_floating(const File& f, const std::string& path);
// The stored type in words ("uint8", "int32", "float64", "string", ...), for messages and checks.
std::string type_name(const File& f, const std::string& path);
// Reads an integer dataset as 64-bit integers (no narrowing on the way).
std::vector<long long> read_int64s(const File& f, const std::string& path, std::vector<hsize_t>* dims = nullptr);
// For a virtual dataset, the source files that do not exist (named as stored,
// relative to the file's folder); empty for other datasets.
std::vector<std::string> missing_virtual_sources(const File& f, const std::string& path);
// Whether `object` is a group (false for a dataset or nothing).
bool is_group(const File& f, const std::string& object);

}  // namespace burstpool::h5
