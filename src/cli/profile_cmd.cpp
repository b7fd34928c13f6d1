// burstpool profile MODEL [--batches 1,2,4,...] [--warmup W] [--repeats R] [--device cpu|cuda|twin] --out PROFILE.json
// burstpool profile --network [--max-bytes B] [--repeats R] [--seconds-per-size S] [--deadline S]
//                   --out NET.json     (under mpirun)
#include <cstdio>

#include <fmt/format.h>

#include "burstpool/error.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/profile.hpp"
#include "burstpool/runtime.hpp"
#include "commands.hpp"

namespace burstpool::cli {

namespace {
struct ProfileArgs {
  std::string model, out, batches = "1,2,4,8,16,32", device = "cpu";
  bool network = false;
  int warmup = 2, repeats = 7;
  NetworkOptions net;
};

std::vector<int> parse_batches(const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_list(text)) {
    int b = 0;
    if (!parse_int(item, b) || b < 1) throw Error(fmt::format("--batches: '{}' is not a positive integer", item));
    out.push_back(b);
  }
  if (out.empty()) throw Error("--batches: no batch sizes given");
  return out;
}
}  // namespace

Command add_profile(CLI::App& app) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* sub = app.add_subcommand("profile", "Measure per-layer times on this device, or the network under mpirun");
  sub->add_option("model", args->model, "Model file (.ini, .h5); not with --network");
  sub->add_flag("--network", args->network, "Measure point-to-point and allreduce times and fit latency/bandwidth");
  sub->add_option("--batches", args->batches, "Per-device batch sizes, comma-separated");
  sub->add_option("--warmup", args->warmup, "Untimed runs before timing");
  sub->add_option("--repeats", args->repeats, "Timed runs; the median is kept");
  sub->add_option("--device", args->device, "Where the layers run: cpu, cuda (this rank's GPU) or twin (testing)")
      ->check(CLI::IsMember({"cpu", "cuda", "twin"}));
  sub->add_option("--max-bytes", args->net.max_bytes, "--network: largest message in bytes");
  sub->add_option("--seconds-per-size", args->net.seconds_per_size,
                  "--network: time budget of one message size (fewer repeats, and no larger sizes, past it)");
  sub->add_option("--core-bytes", args->net.core_bytes,
                  "--network: size of the allreduce whose core time a computing rank pays is measured (default 25 MiB, "
                  "the gradient bucket)");
  sub->add_option("--deadline", args->net.deadline_s,
                  "--network: seconds one message may take before the link counts as stalled (an error)");
  sub->add_option("--out", args->out, "Profile file to write (JSON)")->required();
  return {sub, [args] {
            if (args->repeats < 1 || args->warmup < 0) throw Error("--repeats must be >= 1 and --warmup >= 0");
            if (args->network) {
              if (!args->model.empty()) throw Error("profile --network takes no model");
              args->net.repeats = args->repeats;
              if (world().rank == 0)
                args->net.progress = [](const std::string& line) {
                  fmt::print("{}\n", line);
                  std::fflush(stdout);
                };
              NetworkProfile net = profile_network(args->net);
              if (world().rank == 0) {
                save_network(net, args->out);
                fmt::print("wrote {}: {}\n", args->out, network_summary(net));
              }
              return;
            }
            if (args->model.empty()) throw Error("profile needs a model file (or --network)");
            ModelSpec spec = load_model_spec(args->model);
            ProfileOptions options;
            options.batches = parse_batches(args->batches);
            options.warmup = args->warmup;
            options.repeats = args->repeats;
            options.device = args->device;
            if (world().rank == 0)
              options.progress = [](int batch, double seconds) {
                fmt::print("measured batch {} ({:.1f} s)\n", batch, seconds);
                std::fflush(stdout);
              };
            ModelProfile p = profile_model(spec, options);
            if (world().rank != 0) return;
            save_profile(p, args->out);
            fmt::print("{:<16} {:>12} {:>12}", "layer", "act B/sample", "param B");
            for (int b : p.batches) fmt::print(" {:>14}", fmt::format("b={} f+b ms", b));
            fmt::print("\n");
            for (const LayerProfile& l : p.layers) {
              fmt::print("{:<16} {:>12.0f} {:>12.0f}", l.name, l.activation_bytes_per_sample, l.parameter_bytes);
              for (size_t k = 0; k < p.batches.size(); ++k) fmt::print(" {:>14.3f}", l.forward_ms[k] + l.backward_ms[k]);
              fmt::print("\n");
            }
            fmt::print("wrote {} ({} layers, {} batch sizes, device {}, {} thread(s))\n", args->out, p.layers.size(),
                       p.batches.size(), p.device, p.threads);
          }};
}

}  // namespace burstpool::cli
