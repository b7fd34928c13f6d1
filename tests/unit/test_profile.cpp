#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "burstpool/error.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/profile.hpp"

namespace burstpool {
namespace {

std::string temp(const std::string& name) { return fmt::format("/tmp/burstpool_profile_{}_{}", getpid(), name); }

const char* kTiny =
    "[data]\ntype = input\nshape = 1,6,6\n[conv]\ntype = conv2d\ninputs = data\nout_channels = 2\nkernel = 3\n"
    "[fc]\ntype = linear\ninputs = conv\nout_features = 3\n[loss]\ntype = softmax_cross_entropy\ninputs = fc\n";

TEST(Profile, MeasuresEveryLayerAndRoundTrips) {
  ModelSpec spec = parse_model_ini(kTiny, "tiny.ini");
  ProfileOptions options;
  options.batches = {1, 4};
  options.repeats = 3;
  ModelProfile p = profile_model(spec, options);
  ASSERT_EQ(p.layers.size(), 4u);
  EXPECT_EQ(p.layers[1].name, "conv");
  EXPECT_DOUBLE_EQ(p.layers[1].activation_bytes_per_sample, 4.0 * 2 * 4 * 4);
  EXPECT_DOUBLE_EQ(p.layers[1].parameter_bytes, 4.0 * (2 * 9 + 2));
  EXPECT_DOUBLE_EQ(p.layers[2].parameter_bytes, 4.0 * (3 * 32 + 3));
  for (const LayerProfile& l : p.layers) {
    ASSERT_EQ(l.forward_ms.size(), 2u);
    for (double ms : l.forward_ms) EXPECT_GE(ms, 0.0);
  }
  EXPECT_GT(p.layers[1].forward_ms[1], 0.0);
  const std::string path = temp("tiny.json");
  save_profile(p, path);
  ModelProfile q = load_profile(path, spec);
  EXPECT_EQ(q.batches, p.batches);
  EXPECT_EQ(q.layers[2].backward_ms, p.layers[2].backward_ms);
  std::remove(path.c_str());
}

// Through a device model's calls (the twin: the device code path in host
// memory), as `profile --device cuda` runs on a GPU: the same layers as on
// the CPU, every layer that runs there timed, and the whole step too; an
// unknown device is refused. (Times themselves are for benchmarks.)
TEST(Profile, ThroughADeviceModel) {
  ModelSpec spec = parse_model_ini(kTiny, "tiny.ini");
  ProfileOptions options;
  options.batches = {2, 8};
  options.repeats = 5;
  const ModelProfile cpu = profile_model(spec, options);
  options.device = "twin";
  const ModelProfile twin = profile_model(spec, options);
  EXPECT_EQ(twin.device, "twin");
  ASSERT_EQ(twin.layers.size(), cpu.layers.size());
  ASSERT_EQ(twin.step_ms.size(), 2u);
  for (size_t i = 0; i < twin.layers.size(); ++i) {
    EXPECT_EQ(twin.layers[i].name, cpu.layers[i].name);
    EXPECT_EQ(twin.layers[i].parameter_bytes, cpu.layers[i].parameter_bytes);
  }
  EXPECT_GT(twin.layers[1].forward_ms[1], 0.0);  // conv
  EXPECT_GT(twin.layers[1].backward_ms[1], 0.0);
  for (size_t k = 0; k < 2; ++k) EXPECT_GT(twin.step_ms[k], 0.0);
  options.device = "tpu";
  EXPECT_THROW(profile_model(spec, options), Error);
}

TEST(Profile, RefusesAnotherModelsProfile) {
  ModelSpec spec = parse_model_ini(kTiny, "tiny.ini");
  ProfileOptions options;
  options.batches = {1};
  options.repeats = 1;
  const std::string path = temp("other.json");
  save_profile(profile_model(spec, options), path);
  std::string other_text = kTiny;
  other_text.replace(other_text.find("out_features = 3"), 16, "out_features = 4");
  ModelSpec other = parse_model_ini(other_text, "other.ini");
  try {
    load_profile(path, other);
    FAIL() << "a profile of another model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this profile belongs to model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  // Renaming a model does not change what it is.
  ModelSpec renamed = spec;
  renamed.name = "renamed";
  EXPECT_NO_THROW(load_profile(path, renamed));
  std::remove(path.c_str());
}

TEST(Network, FitsLatencyAndBandwidth) {
  // t = 5 us + bytes / 2 GB/s, exactly.
  std::vector<double> x{4, 1024, 65536, 4e6}, t;
  for (double b : x) t.push_back(5e-6 + b / 2e9);
  auto [a, slope] = fit_line(x, t);
  EXPECT_NEAR(a, 5e-6, 1e-12);
  EXPECT_NEAR(1 / slope, 2e9, 1e3);
}

TEST(Network, BadFilesNameTheKey) {
  const std::string path = temp("net.json");
  auto error_of = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      load_network(path);
    } catch (const Error& e) {
      return std::string(e.what()).substr(path.size());
    }
    return std::string("no error");
  };
  const std::string good_allreduce = R"("allreduce": {"latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10})";
  EXPECT_EQ(error_of(R"({"p2p": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 1e10}, )" + good_allreduce + "}"),
            "no error");
  EXPECT_EQ(error_of(R"({"p2p": {"latency_s": -1, "bandwidth_bytes_per_s": 1e10}, )" + good_allreduce + "}"),
            ": p2p.latency_s = -1 is negative");
  EXPECT_EQ(error_of(R"({"p2p": {"latency_s": 1e-6}, )" + good_allreduce + "}"),
            ": missing number p2p.bandwidth_bytes_per_s");
  EXPECT_EQ(error_of("{oops"), ": not valid JSON for a network file (byte 2)");
  EXPECT_EQ(error_of(R"({"p2p": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 1e10}, "allreduce": {"latency_s": 1e-5, )"
                     R"("bandwidth_bytes_per_s": 1e10, "core_seconds_per_byte": -1e-9}})"),
            ": allreduce.core_seconds_per_byte = -1e-09 is negative");
  std::remove(path.c_str());
}

// The sums' core time is written and read back; a file measured before it
// was has none, read as 0 (the sums cost no core time, as before).
TEST(Network, CoreTimeOfTheSumsIsKeptAndOptional) {
  const std::string path = temp("net.json");
  NetworkProfile net;
  net.ranks = 2;
  net.p2p = {2e-6, 1e9};
  net.allreduce = {5e-6, 5e8, 1.25e-9};
  save_network(net, path);
  EXPECT_DOUBLE_EQ(load_network(path).allreduce.core_seconds_per_byte, 1.25e-9);
  std::ofstream(path) << R"({"p2p": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 1e10}, )"
                         R"("allreduce": {"latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10}})";
  EXPECT_EQ(load_network(path).allreduce.core_seconds_per_byte, 0.0);
  std::remove(path.c_str());
}

// Plans can be made without measuring first: every model a shipped job
// trains has a shipped CPU profile, and every shipped profile matches its
// model file (the fingerprint).
TEST(Profile, ShippedProfilesCoverTheShippedJobsModels) {
  for (const char* model : {"lenet5", "mlp", "vgg_small", "resnet20", "inception", "vgg16"}) {
    const std::string root = BURSTPOOL_SOURCE_DIR;
    const ModelSpec spec = load_model_spec(fmt::format("{}/jobs/models/{}.ini", root, model));
    EXPECT_NO_THROW(load_profile(fmt::format("{}/jobs/profiles/{}.cpu.json", root, model), spec)) << model;
  }
}

// Hand-worked: the line is 10 us + 1 ns per byte; measured, 1000 B in 1 ms,
// 3000 in 2, 5000 in 6 (2 us per byte past 3000 B, as sums past a size
// have run slower per byte).
TEST(Network, MeasuredPointsOverrideTheLine) {
  LinkModel link{1e-5, 1e9};
  EXPECT_DOUBLE_EQ(link.seconds(1000), 1e-5 + 1e-6);  // no points: the line
  link.measured = {{1000, 1e-3}, {3000, 2e-3}, {5000, 6e-3}};
  EXPECT_DOUBLE_EQ(link.seconds(500), 1e-3);     // below the smallest: its time
  EXPECT_DOUBLE_EQ(link.seconds(1000), 1e-3);
  EXPECT_DOUBLE_EQ(link.seconds(2000), 1.5e-3);  // halfway
  EXPECT_DOUBLE_EQ(link.seconds(4000), 4e-3);
  EXPECT_DOUBLE_EQ(link.seconds(5000), 6e-3);
  EXPECT_DOUBLE_EQ(link.seconds(7000), 10e-3);  // the last rate, 2 us per byte, is slower than the line's
  link.measured.back().second = 2e-3;           // a flat last stretch: the line's rate past it
  EXPECT_DOUBLE_EQ(link.seconds(7000), 2e-3 + 2000 * 1e-9);
}

// The curve is the world group's allreduce samples in the bytes a ring
// moves, sorted, never falling; other kinds and groups are left out.
TEST(Network, MeasuredCurveIsTheWorldGroupsSums) {
  const std::vector<NetworkSample> samples{{"allreduce", 4, 4000, 3e-3}, {"p2p", 2, 1000, 1e-3},
                                           {"allreduce", 2, 1000, 9e-3}, {"allreduce", 4, 1000, 1e-3},
                                           {"allreduce", 4, 2000, 0.5e-3}};
  const std::vector<std::pair<double, double>> expected{{1500, 1e-3}, {3000, 1e-3}, {6000, 3e-3}};
  EXPECT_EQ(measured_curve(samples, "allreduce", 4), expected);
  const std::vector<std::pair<double, double>> p2p{{1000, 1e-3}};
  EXPECT_EQ(measured_curve(samples, "p2p", 2), p2p);
}

// A saved profile's samples come back, and with them the allreduce curve;
// a bad sample is refused naming its entry.
TEST(Network, SamplesAndTheCurveAreReadBack) {
  const std::string path = temp("net.json");
  NetworkProfile net;
  net.ranks = 2;
  net.p2p = {2e-6, 1e9};
  net.allreduce = {5e-6, 5e8};
  net.samples = {{"p2p", 2, 16, 2e-6}, {"allreduce", 2, 16, 6e-6}, {"allreduce", 2, 64, 9e-6}};
  save_network(net, path);
  const NetworkProfile back = load_network(path);
  EXPECT_EQ(back.samples.size(), 3u);
  const std::vector<std::pair<double, double>> expected{{16, 6e-6}, {64, 9e-6}};
  EXPECT_EQ(back.allreduce.measured, expected);
  EXPECT_TRUE(back.p2p.measured.empty());
  std::ofstream(path) << R"({"p2p": {"latency_s": 1e-6, "bandwidth_bytes_per_s": 1e10}, )"
                         R"("allreduce": {"latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10}, )"
                         R"("samples": [{"kind": "p2p", "group": 2, "bytes": 4, "seconds": 1e-6}, {"kind": "p2p"}]})";
  try {
    load_network(path);
    ADD_FAILURE() << "a sample without its size was read";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": samples[1] needs a kind, a group, bytes > 0 and seconds >= 0");
  }
  std::remove(path.c_str());
}

TEST(NetworkSweep, SizesGrowFourfoldThenEndAtTheLargest) {
  EXPECT_DOUBLE_EQ(next_sweep_size(4, 64), 16);
  EXPECT_DOUBLE_EQ(next_sweep_size(16, 64), 64);
  EXPECT_DOUBLE_EQ(next_sweep_size(64, 64), 0);
  EXPECT_DOUBLE_EQ(next_sweep_size(16, 50), 48);  // the largest itself, in whole floats
  EXPECT_DOUBLE_EQ(next_sweep_size(48, 50), 0);
}

TEST(NetworkSweep, ForecastsTheNextSizeFromHowTheTimeGrew) {
  // The first size alone: latency-bound, the next takes as long.
  EXPECT_DOUBLE_EQ(next_size_seconds(16, 4, 0.016, 0, 0), 0.016);
  // Times that did not grow (16 ms, then 24, then 16: scheduler ticks) stay latency-bound.
  EXPECT_DOUBLE_EQ(next_size_seconds(64, 16, 0.016, 4, 0.024), 0.016);
  // 16 KiB in 4 ms, 64 KiB in 10: 6 ms per 48 KiB, so 256 KiB takes 10 + 3 x 64 KiB at that rate = 34 ms.
  EXPECT_NEAR(next_size_seconds(262144, 65536, 0.010, 16384, 0.004), 0.034, 1e-15);
  // The sweep's last size, less than 4x: 96 KiB takes 10 + 32 KiB at that rate = 14 ms.
  EXPECT_NEAR(next_size_seconds(98304, 65536, 0.010, 16384, 0.004), 0.014, 1e-15);
}

}  // namespace
}  // namespace burstpool
