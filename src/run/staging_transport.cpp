#include "run/staging_transport.hpp"

#include <deque>
#include <vector>

#include "comm/grad_sync.hpp"
#include "comm/slice_mover.hpp"

namespace burstpool {
namespace {

class StagingSliceMover final : public SliceMover {
 public:
  StagingSliceMover(DeviceModel& device, MPI_Comm world) : device_(device), mpi_(world) {}

  void keep(float* dst, const float* src, size_t n, bool accumulate) override {
    device_.download(src, land(dst, n, accumulate), n);
  }
  void send(const float* src, size_t n, int peer, int tag) override {
    std::vector<float>& out = outgoing_.emplace_back(n);
    device_.download(src, out.data(), n);
    mpi_.send(out.data(), n, peer, tag);
  }
  void receive(float* dst, size_t n, int peer, int tag, bool accumulate) override {
    mpi_.receive(land(dst, n, accumulate), n, peer, tag, false);
  }
  void finish(WaitSite* site) override {
    mpi_.finish(site);
    std::vector<float> now;
    for (Landing& l : landings_) {
      if (l.accumulate) {  // the destinations of one exchange do not overlap: one addition per value
        now.resize(l.values.size());
        device_.download(l.dst, now.data(), now.size());
        for (size_t k = 0; k < now.size(); ++k) l.values[k] = now[k] + l.values[k];
      }
      device_.upload(l.dst, l.values.data(), l.values.size());
    }
    landings_.clear();
    outgoing_.clear();
  }

 private:
  struct Landing {
    float* dst;
    bool accumulate;
    std::vector<float> values;
  };
  // Host memory for a piece bound for `dst`, kept until finish().
  float* land(float* dst, size_t n, bool accumulate) {
    return landings_.emplace_back(Landing{dst, accumulate, std::vector<float>(n)}).values.data();
  }

  DeviceModel& device_;
  MpiSliceMover mpi_;
  // Deques: their elements stay where they are while MPI writes or reads them.
  std::deque<Landing> landings_;
  std::deque<std::vector<float>> outgoing_;
};

class StagingReducer final : public GroupReducer {
 public:
  explicit StagingReducer(DeviceModel& device) : device_(device) {}
  void start(float* data, size_t count, const Communicator& group) override {
    in_flight_.push_back({data, std::vector<float>(count)});
    std::vector<float>& host = in_flight_.back().values;
    device_.download(data, host.data(), count);
    mpi_.start(host.data(), count, group);
  }
  void progress() override { mpi_.progress(); }
  void wait(WaitSite* site) override {
    mpi_.wait(site);
    for (const Sum& s : in_flight_) device_.upload(s.dst, s.values.data(), s.values.size());
    in_flight_.clear();
  }

 private:
  struct Sum {
    float* dst;
    std::vector<float> values;
  };
  DeviceModel& device_;
  MpiGroupReducer mpi_;
  std::deque<Sum> in_flight_;
};

}  // namespace

DeviceTransport staging_transport(DeviceModel& device, MPI_Comm world) {
  DeviceTransport t;
  t.slices = std::make_unique<StagingSliceMover>(device, world);
  t.gradients = std::make_unique<StagingReducer>(device);
  return t;
}

}  // namespace burstpool
