#include "burstpool/session.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "burstpool/error.hpp"
#include "burstpool/trace.hpp"
#include "burstpool/runtime.hpp"
#include "burstpool/model_io.hpp"

namespace burstpool {
namespace {

std::string idx_path(const std::string& dir, const std::string& stem) {
  const std::string plain = dir + "/" + stem;
  return access((plain + ".gz").c_str(), R_OK) == 0 ? plain + ".gz" : plain;
}

std::unique_ptr<Executor> make_executor(const JobConfig& job, const ModelSpec& spec, const Plan& plan,
                                        MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  validate_plan(plan, spec, size);
  auto exec = std::make_unique<Executor>(spec, plan, comm, job.seed, job.bucket_bytes);
  exec->set_sync_batchnorm(job.sync_batchnorm);
  if (is_hdf5_path(job.model_path) && has_weights(job.model_path)) load_weights(job.model_path, exec->model());
  return exec;
}

}  // namespace

ModelSpec load_job_model(const JobConfig& job) {
  struct stat st {};
  if (stat(job.model_path.c_str(), &st) != 0)
    throw Error(fmt::format("{}: [job] model: no file {}", job.file, job.model_path));
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("{}: [job] model: {} is not a regular file", job.file, job.model_path));
  return load_model_spec(job.model_path);
}

Plan job_data_parallel_plan(const JobConfig& job, const ModelSpec& spec, int ranks) {
  if (job.batch_size < ranks)
    throw Error(fmt::format("{}: [train] batch_size: {} is below the {} ranks it is trained on data parallel (each "
                            "needs at least one sample)",
                            job.file, job.batch_size, ranks));
  return data_parallel_plan(spec, ranks, job.batch_size);
}

JobData load_job_data(const JobConfig& job, const Model& model) {
  JobData d;
  if (job.data_source == "fashion-mnist") {
    d.train = load_idx(idx_path(job.data_dir, "train-images-idx3-ubyte"), idx_path(job.data_dir, "train-labels-idx1-ubyte"),
                       job.norm);
    d.test = load_idx(idx_path(job.data_dir, "t10k-images-idx3-ubyte"), idx_path(job.data_dir, "t10k-labels-idx1-ubyte"),
                      job.norm);
    d.has_test = true;
  } else if (job.data_source == "hdf5") {
    d.train = load_hdf5_dataset(job.train_file, job.images_dataset, job.labels_dataset, job.norm, job.check_finite,
                                image_reading(job, job.train_file));
    if (!job.test_file.empty()) {
      d.test = load_hdf5_dataset(job.test_file, job.images_dataset, job.labels_dataset, job.norm, job.check_finite,
                                 image_reading(job, job.test_file));
      d.has_test = true;
    }
  } else {
    d.train = make_synthetic(model.sample_shape(), model.classes(), job.synthetic_train, job.seed, 0);
    if (job.synthetic_test > 0) {
      d.test = make_synthetic(model.sample_shape(), model.classes(), job.synthetic_test, job.seed, 1);
      d.has_test = true;
    }
  }
  if (static_cast<size_t>(job.batch_size) > d.train.size())
    throw Error(fmt::format("{}: [train] batch_size: {} is more than the {} training samples of {}", job.file,
                            job.batch_size, d.train.size(), d.train.source));
  for (const Dataset* ds : {&d.train, &d.test}) {
    if (ds == &d.test && !d.has_test) continue;
    if (!(ds->sample == model.sample_shape()))
      throw Error(fmt::format("{}: samples are {} per sample, but model '{}' takes {}", ds->source, ds->sample.str(),
                              model.spec().name, model.sample_shape().str()));
    if (ds->classes > model.classes())
      throw Error(fmt::format("{}: labels go up to {}, but model '{}' has {} classes", ds->source, ds->classes - 1,
                              model.spec().name, model.classes()));
  }
  return d;
}

ImageReading image_reading(const JobConfig& job, const std::string& file) {
  if (job.data_read == "whole") return ImageReading::whole;
  if (job.data_read == "batches") return ImageReading::batches;
  return hdf5_image_bytes(file, job.images_dataset) > kWholeReadLimit ? ImageReading::batches : ImageReading::whole;
}

uint64_t job_data_bytes(const JobConfig& job, uint64_t image_bytes) {
  const uint64_t sample = image_bytes + sizeof(int32_t);
  if (job.data_source == "fashion-mnist")
    return sample * (idx_sample_count(idx_path(job.data_dir, "train-images-idx3-ubyte")) +
                     idx_sample_count(idx_path(job.data_dir, "t10k-images-idx3-ubyte")));
  if (job.data_source == "hdf5") {
    uint64_t bytes = 0;
    for (const std::string& file : {job.train_file, job.test_file}) {
      if (file.empty()) continue;
      const bool whole = image_reading(job, file) == ImageReading::whole;
      bytes += (whole ? sample : sizeof(int32_t)) * hdf5_sample_count(file, job.images_dataset);
    }
    return bytes;
  }
  return sample * (static_cast<uint64_t>(job.synthetic_train) + static_cast<uint64_t>(job.synthetic_test));
}

void gather_images(const Dataset& data, const uint32_t* indices, Slice slice, std::vector<float>& images) {
  images.resize(static_cast<size_t>(std::max(slice.count, 1)) * data.sample.count());
  gather(data, indices + slice.offset, slice.count, images.data(), nullptr);
}
void gather_labels(const Dataset& data, const uint32_t* indices, Slice slice, std::vector<int32_t>& labels) {
  labels.resize(std::max(slice.count, 1));
  gather(data, indices + slice.offset, slice.count, nullptr, labels.data());
}

int count_correct(const float* logits, int n, int classes, const int32_t* labels) {
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    const float* row = logits + static_cast<size_t>(i) * classes;
    correct += (std::max_element(row, row + classes) - row) == labels[i];
  }
  return correct;
}

TrainingSession::TrainingSession(const JobConfig& job, const ModelSpec& spec, const Plan& plan, MPI_Comm comm)
    : job_(job),
      exec_(make_executor(job, spec, plan, comm)),
      data_(load_job_data(job, exec_->model())),
      sampler_(data_.train.size(), job.batch_size, job.seed) {
  total_ = job.steps > 0 ? job.steps : job.epochs * sampler_.steps_per_epoch();
  schedule_ = job.schedule;
  schedule_.total_steps = total_;
  sgd_ = std::make_unique<Sgd>(model(), job.sgd);
  ctx_ = job_context(job);
  ctx_.loss_scale = 1.0 / job.batch_size;
}

double TrainingSession::forward(int64_t step) {
  const int batch = job_.batch_size;
  const auto& idx = sampler_.batch(step);
  const auto t0 = std::chrono::steady_clock::now();
  gather_images(data_.train, idx.data(), exec_->input_slice(batch), images_);
  gather_labels(data_.train, idx.data(), exec_->loss_slice(batch), labels_);
  // Not counted as compute: the read shows inside the step's idle time.
  if (exec_->traced() && exec_->input_slice(batch).count > 0) tracer().span(Track::main, "read batch", t0, false);
  ctx_.step = step;
  return exec_->forward(batch, images_.data(), labels_.data(), ctx_);
}

void TrainingSession::backward() { exec_->backward(ctx_); }

void TrainingSession::apply(int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  if (exec_->on_accelerator())
    exec_->device().sgd_step(schedule_.at(step), job_.sgd, exec_->held_param_ranges());
  else
    sgd_->step(schedule_.at(step), exec_->held_param_ranges());
  const auto t1 = std::chrono::steady_clock::now();
  if (exec_->traced()) tracer().span(Track::main, "sgd update", t0, t1, true);
  exec_->times().compute += std::chrono::duration<double>(t1 - t0).count();
}

Context job_context(const JobConfig& job) {
  Context ctx;
  ctx.seed = job.seed;
  ctx.precision = job.precision == "bf16" ? Precision::bf16 : Precision::fp32;
  return ctx;
}

std::string cudnn_cache_file(const JobConfig& job) {
  if (job.cudnn_algorithms != "measured" || job.cudnn_cache == "none") return "";
  if (!job.cudnn_cache.empty()) return job.cudnn_cache;
  return job.checkpoint_path.empty() ? "" : job.checkpoint_path + ".cudnn.json";
}

void use_job_device(const JobConfig& job, Executor& exec, bool background, int pieces_in_flight) {
  if (job.device == "cpu") return;
  try {
    // With a background job, the foreground's [background] cuda_wait decides
    // how the process waits; alone, CUDA's own default (it spins).
    const std::string wait = background || job.background.job_path.empty() ? "" : job.background.cuda_wait;
    const CudaOptions options{background,       job.cuda_graphs, job.cudnn_algorithms, wait,
                              pieces_in_flight, job.precision,   cudnn_cache_file(job)};
    exec.use_device(make_device_model(job.device, exec.model(), world().local_rank, options),
                    {background, job.device_whole_model});
  } catch (const Error& e) {
    throw Error(fmt::format("{}: [job] device = {}: {}", job.file, job.device, e.what()));
  }
}

}  // namespace burstpool
