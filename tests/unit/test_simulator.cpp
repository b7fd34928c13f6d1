#include <gtest/gtest.h>

#include "burstpool/model_io.hpp"
#include "burstpool/simulator.hpp"

namespace burstpool {
namespace {

const char* kModel =
    "[data]\ntype = input\nshape = 4\n[fc]\ntype = linear\ninputs = data\nout_features = 3\n"
    "[loss]\ntype = softmax_cross_entropy\ninputs = fc\n";

// Hand-made profile: time linear in the batch, so sums are easy to check.
ModelProfile profile_of(const ModelSpec& spec) {
  ModelProfile p;
  p.batches = {1, 2, 4, 8};
  for (const LayerSpec& l : spec.layers) {
    LayerProfile lp;
    lp.name = l.name;
    lp.type = l.type;
    lp.activation_bytes_per_sample = 1000;
    lp.parameter_bytes = l.type == "linear" ? 4000 : 0;
    const double per = l.type == "linear" ? 1.0 : 0.1;  // ms per sample
    for (int b : p.batches) lp.forward_ms.push_back(per * b), lp.backward_ms.push_back(2 * per * b);
    p.layers.push_back(lp);
  }
  return p;
}

TEST(Simulator, OneRankIsTheSumOfLayerTimes) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  Simulation s = simulate(spec, profile_of(spec), data_parallel_plan(spec, 1, 8), {1e-5, 1e9}, {1e-5, 1e9});
  // 8 samples: (0.1 + 1 + 0.1) ms forward + twice that backward, per sample.
  EXPECT_NEAR(s.iteration_s, 8 * 3 * 1.2e-3, 1e-12);
  EXPECT_NEAR(s.busy_s[0], s.iteration_s, 1e-12);
  EXPECT_NEAR(s.idle_s[0], 0, 1e-12);
}

TEST(Simulator, DataParallelHalvesComputeAndAddsTheAllreduce) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  const Plan plan = data_parallel_plan(spec, 2, 8);
  const double compute = 4 * 3 * 1.2e-3;
  const double reduce = 1e-5 + 2.0 * 1 / 2 * 4000 / 1e9;
  // fc's 4000 B of gradients are the whole bucket (25 MiB by default), which
  // the executor starts when backward ends: nothing hides the sum.
  const Simulation s = simulate(spec, profile_of(spec), plan, net, net);
  EXPECT_NEAR(s.iteration_s, compute + reduce, 1e-12);
  EXPECT_NEAR(s.busy_s[0], compute, 1e-12);
  EXPECT_NEAR(s.busy_s[1], compute, 1e-12);
  // A bucket no larger than fc's gradients starts when fc's backward ends
  // (data, fc and loss forward, then loss and fc backward: 4 x 3.4 ms),
  // while data's backward goes on; the step ends when both are done.
  const Simulation small = simulate(spec, profile_of(spec), plan, net, net, 0, false, 4000);
  EXPECT_NEAR(small.iteration_s, std::max(compute, 4 * (0.1 + 1 + 0.1 + 0.2 + 2) * 1e-3 + reduce), 1e-12);
  EXPECT_LT(small.iteration_s, s.iteration_s);
}

// Two linear layers, 4000 B of gradients each, as the executor buckets them:
// with a 6000 B bucket fc2's fill none and start only when fc1 cannot join
// (8000 B would exceed it), that is when fc1's backward ends; fc1's then
// start when backward ends. With 8000 B both go in one bucket, started once
// it is full (fc1's backward done), which backward's end then waits for.
TEST(Simulator, GradientsAreSummedInTheExecutorsBuckets) {
  ModelSpec spec = parse_model_ini(
      "[data]\ntype = input\nshape = 4\n[fc1]\ntype = linear\ninputs = data\nout_features = 3\n"
      "[fc2]\ntype = linear\ninputs = fc1\nout_features = 3\n[loss]\ntype = softmax_cross_entropy\ninputs = fc2\n",
      "m.ini");
  const LinkModel net{0, 1e6};  // 1 MB/s: 4000 B take 4 ms on 2 ranks (2(n-1)/n = 1)
  const Plan plan = data_parallel_plan(spec, 2, 8);
  // Per rank 4 samples, per sample: forward 0.1 + 1 + 1 + 0.1 ms, backward twice that.
  const double forward = 4 * 2.2e-3, fc2_done = forward + 4 * (0.2 + 2) * 1e-3, fc1_done = fc2_done + 4 * 2e-3;
  const double backward_done = fc1_done + 4 * 0.2e-3;
  const Simulation split = simulate(spec, profile_of(spec), plan, net, net, 0, false, 6000);
  // fc2's bucket starts at fc1_done (4 ms), fc1's queues behind it until backward_done or fc1_done + 4 ms.
  EXPECT_NEAR(split.iteration_s, std::max(backward_done, fc1_done + 4e-3) + 4e-3, 1e-12);
  const Simulation joined = simulate(spec, profile_of(spec), plan, net, net, 0, false, 8000);
  EXPECT_NEAR(joined.iteration_s, fc1_done + 8e-3, 1e-12);
  // Measured: 4000 B in 4 ms, but 8000 in 16 (slower per byte past 4000):
  // the joined bucket takes 16 ms, the split ones 4 ms each as above.
  LinkModel measured = net;
  measured.measured = {{4000, 4e-3}, {8000, 16e-3}};
  EXPECT_NEAR(simulate(spec, profile_of(spec), plan, net, measured, 0, false, 8000).iteration_s, fc1_done + 16e-3,
              1e-12);
  EXPECT_NEAR(simulate(spec, profile_of(spec), plan, net, measured, 0, false, 6000).iteration_s,
              split.iteration_s, 1e-12);
}

// On a CPU MPI's copies and sums take the rank's own core: a bucket's core
// time delays the compute after its start, and counts as busy.
TEST(Simulator, SumsCoreTimeDelaysTheRanksCompute) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  LinkModel sums = net;
  sums.core_seconds_per_byte = 1e-6;  // 4000 B: 4 ms of each rank's core
  const Plan plan = data_parallel_plan(spec, 2, 8);
  const Simulation free_sums = simulate(spec, profile_of(spec), plan, net, net, 0, false, 4000);
  const Simulation costly = simulate(spec, profile_of(spec), plan, net, sums, 0, false, 4000);
  // fc's sum starts when fc's backward ends; data's backward (0.8 ms) follows 4 ms later.
  const double compute = 4 * 3 * 1.2e-3;
  EXPECT_NEAR(costly.iteration_s, compute + 4e-3, 1e-12);
  EXPECT_NEAR(costly.iteration_s - free_sums.iteration_s, 4e-3, 1e-12);
  EXPECT_NEAR(costly.busy_s[0], compute + 4e-3, 1e-12);
  EXPECT_NEAR(costly.busy_s[1], compute + 4e-3, 1e-12);
}

// Four ranks on two cores: every layer runs on all four at once, two on each
// core, so each takes twice its profiled time; on one core per rank, as
// before.
TEST(Simulator, RanksSharingCoresComputeSlower) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  const Plan plan = data_parallel_plan(spec, 4, 8);
  const Simulation own = simulate(spec, profile_of(spec), plan, net, net);
  const Simulation shared = simulate(spec, profile_of(spec), plan, net, net, 2);
  const Simulation plenty = simulate(spec, profile_of(spec), plan, net, net, 8);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NEAR(shared.busy_s[r], 2 * own.busy_s[r], 1e-12);
    EXPECT_NEAR(plenty.busy_s[r], own.busy_s[r], 1e-12);
  }
  EXPECT_GT(shared.iteration_s, 1.9 * own.busy_s[0]);
}

// Three ranks on two cores: ranks 0 and 2 share core 0 and take twice their
// time, rank 1 has core 1 to itself; the step waits for the shared core (a
// processor-sharing model, 3/2 for all, would predict 25% less). A layer on
// rank 0 alone has core 0 to itself.
TEST(Simulator, RanksOnTheSameCoreShareIt) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  Plan plan = data_parallel_plan(spec, 3, 9);
  const Simulation own = simulate(spec, profile_of(spec), plan, net, net);
  const Simulation shared = simulate(spec, profile_of(spec), plan, net, net, 2);
  EXPECT_NEAR(shared.busy_s[0], 2 * own.busy_s[0], 1e-12);
  EXPECT_NEAR(shared.busy_s[1], own.busy_s[1], 1e-12);
  EXPECT_NEAR(shared.busy_s[2], 2 * own.busy_s[2], 1e-12);
  EXPECT_GE(shared.iteration_s, 2 * own.busy_s[0]);
  EXPECT_GT(shared.idle_s[1], own.busy_s[1] - 1e-12);  // rank 1 waits for core 0 about as long as it computes

  plan.layer_ranks[1] = {0};  // fc and loss on rank 0 alone: full speed there
  plan.layer_ranks[2] = {0};
  const Simulation head = simulate(spec, profile_of(spec), plan, net, net, 2);
  const Simulation head_own = simulate(spec, profile_of(spec), plan, net, net);
  // Rank 1 only runs the data layer; rank 0 shares core 0 for that layer
  // (twice its time) and has it alone for fc and loss (once).
  const double data_layer = head_own.busy_s[1];
  EXPECT_NEAR(head.busy_s[0], head_own.busy_s[0] + data_layer, 1e-12);
  EXPECT_NEAR(head.busy_s[1], data_layer, 1e-12);
}

// A core works once for each of its ranks: data parallel on four ranks and
// two cores keeps each core busy with two ranks' slices; a plan that runs fc
// and loss on ranks 0 and 1 leaves ranks 2 and 3 idle for most of the step,
// but their cores run ranks 0 and 1 meanwhile: it frees no more core time
// than data parallel, whatever its ranks' idle share says.
TEST(Simulator, ARankIdleBesideItsCoreMateFreesNoCore) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  const ModelProfile profile = profile_of(spec);
  // Per rank 2 samples of (0.1 + 1 + 0.1) ms forward and twice that backward: 7.2 ms.
  const Simulation dp = simulate(spec, profile, data_parallel_plan(spec, 4, 8), net, net, 2);
  ASSERT_EQ(dp.core_busy_s.size(), 2u);
  EXPECT_NEAR(dp.core_busy_s[0], 2 * 7.2e-3, 1e-12);
  EXPECT_NEAR(dp.core_busy_s[1], 2 * 7.2e-3, 1e-12);
  EXPECT_NEAR(free_core_share(dp), 1 - 14.4e-3 / dp.iteration_s, 1e-12);

  Plan plan = data_parallel_plan(spec, 4, 8);
  plan.layer_ranks[1] = {0, 1};  // fc and loss on 4 samples each on ranks 0 and 1 (cores 0 and 1)
  plan.layer_ranks[2] = {0, 1};
  const Simulation head = simulate(spec, profile, plan, net, net, 2);
  // Core 0: rank 0's data slice (2 samples x 0.3 ms), its fc and loss (4 x 3.3 ms), rank 2's data slice.
  EXPECT_NEAR(head.core_busy_s[0], 0.6e-3 + 13.2e-3 + 0.6e-3, 1e-12);
  EXPECT_NEAR(head.core_busy_s[1], 14.4e-3, 1e-12);
  EXPECT_GT(idle_share(head), 0.4);  // ranks 2 and 3 idle most of the step
  EXPECT_NEAR(free_core_share(head), 1 - 14.4e-3 / head.iteration_s, 1e-12);
  EXPECT_LT(free_core_share(head), 0.05);

  // With a core per rank, a rank's core is free while it idles: the two agree.
  const Simulation own = simulate(spec, profile, plan, net, net);
  ASSERT_EQ(own.core_busy_s.size(), 4u);
  EXPECT_NEAR(free_core_share(own), idle_share(own), 1e-12);
  EXPECT_GT(free_core_share(own), 0.4);
}

// The same plan's idle stretches are the cores': ranks 2 and 3 run only
// their data layer (1.2 ms) and idle the rest of the step, but cores 0 and 1
// run ranks 0 and 1 meanwhile, and are free only while those two sum fc's
// gradients at the step's end (14 us; their wait for the input slices falls
// in ranks 2 and 3's data backward). A background there gets what the cores
// leave, at the cores' rate alone.
TEST(Simulator, ABackgroundBesideRanksSharingCoresGetsWhatTheCoresLeave) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  const ModelProfile profile = profile_of(spec);
  Plan plan = data_parallel_plan(spec, 4, 8);
  plan.layer_ranks[1] = {0, 1};
  plan.layer_ranks[2] = {0, 1};
  const Simulation head = simulate(spec, profile, plan, net, net, 2);
  const double sum = 1e-5 + 4000 / 1e9;  // fc's 4000 B of gradients over 2 ranks
  ASSERT_EQ(head.idle_gaps_s.size(), 2u);
  for (size_t c = 0; c < 2; ++c) {
    double free = 0;
    for (double g : head.idle_gaps_s[c]) free += g;
    EXPECT_NEAR(free, sum, 1e-12) << "core " << c;
  }
  EXPECT_NEAR(head.idle_s[2], head.iteration_s - 1.2e-3, 1e-12);
  // With a core per rank the stretches are the ranks' and add up to their idle time.
  const Simulation own = simulate(spec, profile, plan, net, net);
  ASSERT_EQ(own.idle_gaps_s.size(), 4u);
  double rank2 = 0;
  for (double g : own.idle_gaps_s[2]) rank2 += g;
  EXPECT_NEAR(rank2, own.idle_s[2], 1e-12);

  const ForegroundRun fg{head, simulate(spec, profile, data_parallel_plan(spec, 4, 8), net, net, 2), 8};
  PackingModel packing;
  packing.idle_efficiency = 0.5;
  // Four replicas on two cores: two cores' worth of one replica's rate.
  const BackgroundPrediction ind = predict_background(fg, {&spec, &profile, 4, true}, packing, net, net);
  const Simulation one = simulate(spec, profile, data_parallel_plan(spec, 1, 4), net, net);
  EXPECT_NEAR(ind.alone_samples_per_second, 2 * 4 / one.iteration_s, 1e-9);
  EXPECT_NEAR(ind.usable_idle_share, sum / head.iteration_s, 1e-12);
  EXPECT_NEAR(ind.shared_samples_per_second, 0.5 * ind.usable_idle_share * ind.alone_samples_per_second, 1e-9);
  // Data parallel over the four ranks, on the two cores.
  const BackgroundPrediction dp = predict_background(fg, {&spec, &profile, 8, false}, packing, net, net);
  const Simulation alone = simulate(spec, profile, data_parallel_plan(spec, 4, 8), net, net, 2);
  EXPECT_NEAR(dp.alone_samples_per_second, 8 / alone.iteration_s, 1e-9);
}

// Two branches of a fork on disjoint ranks run at the same time: slices are
// sent as soon as they are made, so rank 1 starts branch b while rank 0 runs
// branch a, and each rank's gradient piece waits only for its own branch.
TEST(Simulator, BranchesOnDisjointRanksOverlap) {
  ModelSpec spec = parse_model_ini(
      "[data]\ntype = input\nshape = 4\n[a]\ntype = linear\ninputs = data\nout_features = 3\n"
      "[b]\ntype = linear\ninputs = data\nout_features = 3\n[sum]\ntype = add\ninputs = a, b\n"
      "[loss]\ntype = softmax_cross_entropy\ninputs = sum\n",
      "fork.ini");
  Plan plan = data_parallel_plan(spec, 2, 8);
  plan.layer_ranks[spec.find("a")] = {0};
  plan.layer_ranks[spec.find("b")] = {1};
  const LinkModel net{1e-5, 1e9};
  const Simulation s = simulate(spec, profile_of(spec), plan, net, net);
  const double move = 1e-5 + 4 * 1000 / 1e9;  // half the batch, either way
  // data forward on 4 samples; its other half in; a (rank 0) and b (rank 1) on
  // 8 samples at once; their halves out; sum and loss on 4, backward of loss
  // and sum; the gradient halves back; a and b backward at once; data's backward.
  const double ms = 0.4 + 8 + 0.4 + 0.4 + 0.8 + 0.8 + 16 + 0.8;
  EXPECT_NEAR(s.iteration_s, ms * 1e-3 + 3 * move, 1e-9);
  EXPECT_NEAR(s.busy_s[0], s.busy_s[1], 1e-12);
}

TEST(Simulator, MovingSlicesCostsTransferTime) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  Plan plan = data_parallel_plan(spec, 2, 8);
  plan.layer_ranks[1] = {1};  // fc on rank 1 only: rank 0's 4 samples move there and back
  plan.layer_ranks[2] = {1};
  const LinkModel net{1e-5, 1e9};
  Simulation s = simulate(spec, profile_of(spec), plan, net, net);
  const double move = 1e-5 + 4 * 1000 / 1e9;
  // data (0.4 ms on each rank), move 4 samples to rank 1, fc and loss on 8 samples there,
  // backward of loss and fc; data needs no gradient, so nothing moves back.
  const double expected = 4 * 0.1e-3 + move + 8 * (1.0 + 0.1) * 1e-3 + 8 * (0.2 + 2.0) * 1e-3 + 4 * 0.2e-3;
  EXPECT_NEAR(s.iteration_s, expected, 1e-9);
  EXPECT_GT(s.idle_s[0], 0.9 * s.iteration_s - 1e-3);  // rank 0 only runs the data layer
}

// Rank 0 only runs the data layer: idle for most of the step.
Plan head_on_rank_1(const ModelSpec& spec) {
  Plan plan = data_parallel_plan(spec, 2, 8);
  plan.layer_ranks[1] = {1};
  plan.layer_ranks[2] = {1};
  return plan;
}

TEST(Simulator, IdleStretchesAreListedPerRankAndJoinAcrossSteps) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  const double move = 1e-5 + 4 * 1000 / 1e9;
  // Rank 1 waits once, for rank 0's 4 samples after data's forward; rank 0
  // works 1.2 ms (data forward and backward on its 4 samples) and then waits
  // out the step: one stretch each.
  const Simulation head = simulate(spec, profile_of(spec), head_on_rank_1(spec), net, net);
  ASSERT_EQ(head.idle_gaps_s.size(), 2u);
  ASSERT_EQ(head.idle_gaps_s[1].size(), 1u);
  EXPECT_NEAR(head.idle_gaps_s[1][0], move, 1e-12);
  ASSERT_EQ(head.idle_gaps_s[0].size(), 1u);
  EXPECT_NEAR(head.idle_gaps_s[0][0], head.iteration_s - 1.2e-3, 1e-12);
  // Data on rank 1 alone: rank 0 waits at the start of the step for its
  // slice (data's forward on 8 samples and a move) and at its end for rank
  // 1's data backward and fc's gradient sum. The two are one stretch, since
  // the next step's wait follows this step's.
  Plan tail = data_parallel_plan(spec, 2, 8);
  tail.layer_ranks[0] = {1};
  const Simulation s = simulate(spec, profile_of(spec), tail, net, net);
  ASSERT_EQ(s.idle_gaps_s[0].size(), 1u);
  const double start = 8 * 0.1e-3 + move;
  const double work = 4 * (1.0 + 0.1 + 0.2 + 2.0) * 1e-3;
  EXPECT_NEAR(s.idle_gaps_s[0][0], s.iteration_s - work, 1e-12);
  EXPECT_GT(s.idle_gaps_s[0][0], start + 1e-5);
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (double g : s.idle_gaps_s[r]) sum += g;
    EXPECT_NEAR(sum, s.idle_s[r], 1e-12) << "rank " << r;
  }
}

TEST(Simulator, BackgroundFillsIdleRankTimeAsThePackingModelSays) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  const ModelProfile profile = profile_of(spec);
  ForegroundRun fg{simulate(spec, profile, head_on_rank_1(spec), net, net),
                   simulate(spec, profile, data_parallel_plan(spec, 2, 8), net, net), 8};
  PackingModel packing;
  packing.idle_efficiency = 0.5;
  packing.foreground_slowdown = 1.25;
  const BackgroundPrediction b = predict_background(fg, {&spec, &profile, 8, false}, packing, net, net);
  const Simulation alone = simulate(spec, profile, data_parallel_plan(spec, 2, 8), net, net);
  EXPECT_NEAR(b.alone_samples_per_second, 8 / alone.iteration_s, 1e-9);
  const Simulation& s = fg.own_plan;
  EXPECT_NEAR(b.idle_share, (s.idle_s[0] + s.idle_s[1]) / (2 * s.iteration_s), 1e-12);
  EXPECT_GT(b.idle_share, 0.4);
  // The mean idle share of the ranks, at half efficiency.
  EXPECT_NEAR(b.shared_samples_per_second, 0.5 * b.idle_share * b.alone_samples_per_second, 1e-9);
  EXPECT_NEAR(b.foreground_shared_samples_per_second, 8 / s.iteration_s / 1.25, 1e-9);
  const double bg_share = b.shared_samples_per_second / b.alone_samples_per_second;
  EXPECT_NEAR(b.cluster_throughput_vs_own_plan, 1 / 1.25 + bg_share, 1e-12);
  // This plan is slower than data parallel, which the honest figure charges it for.
  const double dp_rate = 8 / fg.data_parallel.iteration_s;
  EXPECT_GT(dp_rate, b.foreground_alone_samples_per_second);
  EXPECT_NEAR(b.cluster_throughput_vs_data_parallel, b.foreground_shared_samples_per_second / dp_rate + bg_share, 1e-12);
  EXPECT_LT(b.cluster_throughput_vs_data_parallel, b.cluster_throughput_vs_own_plan);
  // Independent replicas: rate alone is 2x one rank's.
  const BackgroundPrediction ind = predict_background(fg, {&spec, &profile, 4, true}, packing, net, net);
  const Simulation one = simulate(spec, profile, data_parallel_plan(spec, 1, 4), net, net);
  EXPECT_NEAR(ind.alone_samples_per_second, 2 * 4 / one.iteration_s, 1e-9);
  EXPECT_NEAR(ind.shared_samples_per_second, 0.5 * ind.idle_share * ind.alone_samples_per_second, 1e-9);
  // Each idle stretch less a gap cost: 1 ms, more than rank 1's one wait, less than rank 0's.
  packing.gap_cost_s = 1e-3;
  const BackgroundPrediction costed = predict_background(fg, {&spec, &profile, 8, false}, packing, net, net);
  EXPECT_NEAR(costed.usable_idle_share, (s.idle_gaps_s[0][0] - 1e-3) / s.iteration_s / 2, 1e-12);
  EXPECT_LT(costed.usable_idle_share, costed.idle_share);
  EXPECT_NEAR(costed.shared_samples_per_second, 0.5 * costed.usable_idle_share * costed.alone_samples_per_second,
              1e-9);
}

TEST(Simulator, DefaultPackingIsTheOldAssumptionAndDataParallelLeavesNothing) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  const LinkModel net{1e-5, 1e9};
  const ModelProfile profile = profile_of(spec);
  const Simulation dp = simulate(spec, profile, data_parallel_plan(spec, 2, 8), net, net);
  const BackgroundPrediction b = predict_background({dp, dp, 8}, {&spec, &profile, 8, false}, PackingModel{}, net, net);
  EXPECT_LT(b.idle_share, 0.05);
  EXPECT_NEAR(b.cluster_throughput_vs_data_parallel, b.cluster_throughput_vs_own_plan, 1e-12);
  EXPECT_NEAR(b.cluster_throughput_vs_data_parallel, 1 + b.shared_samples_per_second / b.alone_samples_per_second,
              1e-12);
}

TEST(Simulator, SlackIsTheCapacitySmallBatchesLeaveUnused) {
  ModelSpec spec = parse_model_ini(kModel, "m.ini");
  ModelProfile profile = profile_of(spec);
  // fc: 4 ms at every batch up to 4, then linear: at batch 2 it uses half the device, at 1 a quarter.
  profile.layers[1].forward_ms = {4, 4, 4, 8};
  profile.layers[1].backward_ms = {4, 4, 4, 8};
  EXPECT_NEAR(utilisation(profile, profile.layers[1].forward_ms, 2), 0.5, 1e-12);
  EXPECT_NEAR(utilisation(profile, profile.layers[1].forward_ms, 1), 0.25, 1e-12);
  EXPECT_NEAR(utilisation(profile, profile.layers[1].forward_ms, 8), 1.0, 1e-12);
  const LinkModel net{0, 1e12};
  const Simulation s = simulate(spec, profile, data_parallel_plan(spec, 4, 8), net, net);
  // Each rank: fc on 2 samples, 4 ms forward + 4 ms backward, half of it unused;
  // data and loss (0.1 and 0.2 ms per sample, linear) use the device fully.
  EXPECT_NEAR(s.slack_s[0], 0.5 * 8e-3, 1e-9);
  EXPECT_NEAR(s.slack_s[3], 0.5 * 8e-3, 1e-9);
}

}  // namespace
}  // namespace burstpool
