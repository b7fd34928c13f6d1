#pragma once
// The network model options shared by 'plan' and 'simulate': a network
// profile file, or a bandwidth and latency for both links.
#include <CLI/CLI.hpp>

#include <string>

#include "burstpool/error.hpp"
#include "burstpool/profile.hpp"

namespace burstpool::cli {

struct NetworkArgs {
  std::string file;
  double bandwidth_gbps = -1, latency_us = -1;

  void add_to(CLI::App* sub) {
    sub->add_option("--network", file, "Network profile (burstpool profile --network ...)");
    sub->add_option("--bandwidth", bandwidth_gbps, "Network bandwidth in GB/s, for both links (instead of --network)");
    sub->add_option("--latency", latency_us, "Network latency in microseconds (instead of --network)");
  }

  // {point to point, allreduce}; errors name what is missing.
  std::pair<LinkModel, LinkModel> resolve(const char* command) const {
    if (!file.empty()) {
      NetworkProfile net = load_network(file);
      return {net.p2p, net.allreduce};
    }
    if (!std::isfinite(bandwidth_gbps) || !std::isfinite(latency_us))
      throw Error(fmt::format("{}: --bandwidth and --latency must be finite numbers", command));
    if (bandwidth_gbps > 0 && latency_us >= 0) {
      const LinkModel link{latency_us * 1e-6, bandwidth_gbps * 1e9};
      return {link, link};
    }
    throw Error(fmt::format("{} needs --network NET.json, or --bandwidth GB/s (> 0) and --latency us (>= 0)", command));
  }
};

}  // namespace burstpool::cli
