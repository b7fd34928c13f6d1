#pragma once
// One job's training state on this rank: its executor over a communicator,
// its data, sampler, optimizer and schedule. The foreground trainer and a
// background job each own one; both run the same step code.
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "burstpool/data.hpp"
#include "burstpool/executor.hpp"
#include "burstpool/job.hpp"
#include "burstpool/optimizer.hpp"
#include "burstpool/plan.hpp"

namespace burstpool {

// The job's model file, read; a missing one is named with the job file and
// key ("job.ini: [job] model: no file m.ini"), a bad one by its own file and line.
ModelSpec load_job_model(const JobConfig& job);

// The job's model data parallel over `ranks` ranks at its batch; a batch
// smaller than the rank count is refused naming the job file and key.
Plan job_data_parallel_plan(const JobConfig& job, const ModelSpec& spec, int ranks);

struct JobData {
  Dataset train, test;
  bool has_test = false;
};
// The job's training (and test) data, checked against the model's sample shape and classes.
JobData load_job_data(const JobConfig& job, const Model& model);

// How an HDF5 data file's images are held ([data] read): auto reads per
// batch when the images take more than kWholeReadLimit as float32.
constexpr uint64_t kWholeReadLimit = uint64_t{512} << 20;
ImageReading image_reading(const JobConfig& job, const std::string& file);

// Bytes the job's data will hold in memory (training and test), from headers
// or the job's settings without loading it: per sample `image_bytes` (the
// model's input as float32) and a 4-byte label, or the label alone for an
// HDF5 file read per batch. Unreadable files count 0.
uint64_t job_data_bytes(const JobConfig& job, uint64_t image_bytes);

// Images (or labels) of batch positions [slice.offset, slice.end()); indices give the batch.
void gather_images(const Dataset& data, const uint32_t* indices, Slice slice, std::vector<float>& images);
void gather_labels(const Dataset& data, const uint32_t* indices, Slice slice, std::vector<int32_t>& labels);

// How many of n samples' logits (n x classes, row per sample) have their
// largest value at the sample's label.
int count_correct(const float* logits, int n, int classes, const int32_t* labels);

// With [job] device = cuda: hands exec's layers to this rank's GPU (for a
// background job on the least-priority streams); nothing for the CPU. Throws
// Error naming the job file when that cannot be done.
// pieces_in_flight: a background job's pieces queued at once on a GPU.
void use_job_device(const JobConfig& job, Executor& exec, bool background = false, int pieces_in_flight = 1);

// The file [job] cudnn_cache names once the checkpoint path is final (its
// default, <checkpoint>.cudnn.json, follows --checkpoint); "" when no cache
// is kept (cudnn_algorithms is not measured, cudnn_cache = none, or no path).
std::string cudnn_cache_file(const JobConfig& job);

// What every step and evaluation of a job starts from: its seed and its
// [job] precision as the layers' arithmetic (bf16 on every device; tf32 is
// a setting of the CUDA model itself, CudaOptions::precision).
Context job_context(const JobConfig& job);

class TrainingSession {
 public:
  // Collective over `comm`: builds the executor for `plan` (validated here
  // against the model and comm's size), loads weights from an HDF5 model
  // file that has them, and loads the data.
  TrainingSession(const JobConfig& job, const ModelSpec& spec, const Plan& plan, MPI_Comm comm);

  const JobConfig& job() const { return job_; }
  Executor& exec() { return *exec_; }
  Model& model() { return exec_->model(); }
  Sgd& sgd() { return *sgd_; }
  const JobData& data() const { return data_; }
  int64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  int64_t total_steps() const { return total_; }
  const LrSchedule& schedule() const { return schedule_; }

  // Forward of step `step` on this rank's slice of its batch; returns this
  // rank's part of the (global-batch mean) loss.
  double forward(int64_t step);
  // Backward of the last forward, gradient synchronisation, optimizer update.
  void update(int64_t step) {
    backward();
    apply(step);
  }
  void backward();          // backward and gradient synchronisation only
  void apply(int64_t step);  // optimizer update only

 private:
  JobConfig job_;
  std::unique_ptr<Executor> exec_;
  JobData data_;
  BatchSampler sampler_;
  int64_t total_ = 0;
  LrSchedule schedule_;
  std::unique_ptr<Sgd> sgd_;
  Context ctx_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
};

}  // namespace burstpool
