// N ranks against 1 rank: training a few steps under any plan must give the
// parameters (and batch-norm statistics) of one rank training the same global
// batch. Tolerance: |a - b| <= 2e-5 + 1e-4 |b| per value after 3 SGD steps;
// the only differences are float summation orders (slice-wise GEMMs, the
// allreduce, batch-norm sums). Every plan, data parallel too, also runs
// layer by layer through the executor's device path with the twin device (a
// second model in host memory, src/run/twin_device.cpp), once with slices and
// gradient sums staged through the host and once carried by its transport
// between its own buffers, which must both give the CPU path's results bit
// for bit: a copy between host and twin that the executor forgets leaves
// stale values on one side.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>

#include "burstpool/executor.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/optimizer.hpp"
#include "burstpool/planner.hpp"
#include "layers/kernels.hpp"

namespace burstpool {
namespace {

// Residual join (add) and channel join (concat) whose inputs can live on
// different rank sets, batch norm (group statistics) and dropout (masks by
// global sample index).
const char* kModel = R"(
[data]
type = input
shape = 2,6,6
[stem]
type = conv2d
inputs = data
out_channels = 4
kernel = 3
padding = 1
[bn]
type = batchnorm2d
inputs = stem
[relu]
type = relu
inputs = bn
[conv_a]
type = conv2d
inputs = relu
out_channels = 4
kernel = 3
padding = 1
[res]
type = add
inputs = conv_a, relu
[pool_b]
type = maxpool2d
inputs = relu
kernel = 3
stride = 1
padding = 1
[join]
type = concat
inputs = res, pool_b
[gap]
type = global_avgpool
inputs = join
[drop]
type = dropout
inputs = gap
p = 0.25
[fc]
type = linear
inputs = drop
out_features = 5
[loss]
type = softmax_cross_entropy
inputs = fc
)";

// One producer feeding a join twice, on other rank sets than the join:
// twice = conv + conv, cat = (twice, conv, twice).
const char* kSameProducerTwice = R"(
[data]
type = input
shape = 2,6,6
[conv]
type = conv2d
inputs = data
out_channels = 2
kernel = 3
padding = 1
[twice]
type = add
inputs = conv, conv
[cat]
type = concat
inputs = twice, conv, twice
[gap]
type = global_avgpool
inputs = cat
[fc]
type = linear
inputs = gap
out_features = 5
[loss]
type = softmax_cross_entropy
inputs = fc
)";

constexpr int kBatch = 7;  // divides by none of 2, 3, 4
constexpr int kSteps = 3;

int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

Batch batch_of_step(const Model& m, int step) {
  Batch b;
  const size_t per = m.sample_shape().count();
  b.images.resize(kBatch * per);
  for (size_t i = 0; i < b.images.size(); ++i) b.images[i] = 2 * cpu::uniform01(cpu::mix64(step) + i) - 1;
  for (int i = 0; i < kBatch; ++i) b.labels.push_back(static_cast<int32_t>(cpu::mix64(step * 100 + i) % 5));
  return b;
}

// Trains kSteps on `comm` under `plan`; returns every parameter and state
// value as the layers' owners hold them.
enum class Path { cpu, device_staged, device_moves_slices };

std::vector<float> train(const ModelSpec& spec, const Plan& plan, MPI_Comm comm, Path path, size_t bucket_bytes) {
  Executor exec(spec, plan, comm, 42, bucket_bytes);
  Model& m = exec.model();
  TwinCounts counts;
  if (path != Path::cpu)  // layer by layer, data-parallel plans too ([job] device_calls = per_layer)
    exec.use_device(make_twin_model(m, {path == Path::device_moves_slices, &counts}), {false, false});
  const SgdOptions options{0.9f, true, 0.01f};
  Sgd sgd(m, options);
  Context ctx;
  ctx.seed = 5;
  ctx.loss_scale = 1.0 / kBatch;
  for (int step = 0; step < kSteps; ++step) {
    Batch b = batch_of_step(m, step);
    const Slice in = exec.input_slice(kBatch), ls = exec.loss_slice(kBatch);
    ctx.step = step;
    exec.forward(kBatch, b.images.data() + in.offset * m.sample_shape().count(), b.labels.data() + ls.offset, ctx);
    exec.backward(ctx);
    if (exec.on_accelerator())
      exec.device().sgd_step(0.1f, options, exec.held_param_ranges());
    else
      sgd.step(0.1f, exec.held_param_ranges());
  }
  if (path == Path::device_moves_slices) {  // every held layer of a group summed once a step, through the transport
    size_t expected = 0;
    for (int i = 0; i < m.size(); ++i)
      if (exec.holds(i) && exec.ranks_of(i).size() > 1) expected += kSteps * m.param_range(i).second;
    EXPECT_EQ(counts.floats_summed, expected) << "parameter gradients not summed through the device's transport";
    EXPECT_EQ(counts.parameter_gradient_copies, 0u) << "parameter gradients went through the host despite a transport";
  }
  exec.device().to_host(sgd.velocity().data());  // the twin's parameters and state (the CPU's: nothing to move)
  exec.share_from_owners(m.params().data(), m.params().size(), false);
  exec.share_from_owners(m.state().data(), m.state().size(), true);
  std::vector<float> out(m.params().data(), m.params().data() + m.params().size());
  out.insert(out.end(), m.state().data(), m.state().data() + m.state().size());
  return out;
}

Plan plan_from(const ModelSpec& spec, const std::map<std::string, RankSet>& sets) {
  Plan p = data_parallel_plan(spec, world_size(), kBatch);
  p.source = "test plan";
  for (size_t i = 0; i < p.layer_names.size(); ++i) {
    auto it = sets.find(p.layer_names[i]);
    if (it != sets.end()) p.layer_ranks[i] = it->second;
  }
  validate_plan(p, spec, world_size());
  return p;
}

// bucket_bytes: tiny by default, so many reductions run.
void expect_same_as_one_rank(const Plan& plan, size_t bucket_bytes = 64, const char* model = kModel) {
  ModelSpec spec = parse_model_ini(model, "equivalence.ini");
  const std::vector<float> reference = train(spec, data_parallel_plan(spec, 1, kBatch), MPI_COMM_SELF, Path::cpu, 64);
  const std::vector<float> parallel = train(spec, plan, MPI_COMM_WORLD, Path::cpu, bucket_bytes);
  ASSERT_EQ(reference.size(), parallel.size());
  int bad = 0;
  double worst = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double diff = std::fabs(parallel[i] - reference[i]);
    worst = std::max(worst, diff);
    if (diff > 2e-5 + 1e-4 * std::fabs(reference[i]) && bad++ < 5)
      ADD_FAILURE() << "rank " << world_rank() << " value " << i << ": " << parallel[i] << " vs one rank "
                    << reference[i];
  }
  EXPECT_EQ(bad, 0) << "largest difference " << worst;
  const std::vector<float> staged = train(spec, plan, MPI_COMM_WORLD, Path::device_staged, bucket_bytes);
  EXPECT_EQ(staged, parallel) << "the device's per-layer path (slices through the host) differs from the CPU path";
  const std::vector<float> carried = train(spec, plan, MPI_COMM_WORLD, Path::device_moves_slices, bucket_bytes);
  EXPECT_EQ(carried, parallel)
      << "the device's per-layer path (slices between device buffers) differs from the CPU path";
  // The run must have changed the parameters, or the comparison proves nothing.
  ModelSpec again = parse_model_ini(model, "equivalence.ini");
  Model fresh(again, 1, 42);
  double moved = 0;
  for (size_t i = 0; i < fresh.params().size(); ++i) moved += std::fabs(fresh.params().data()[i] - reference[i]);
  EXPECT_GT(moved, 1e-2);
}

RankSet all_ranks() {
  RankSet s(world_size());
  for (int r = 0; r < world_size(); ++r) s[r] = r;
  return s;
}
RankSet tail_ranks() {  // 1..N-1: not a prefix
  RankSet s = all_ranks();
  s.erase(s.begin());
  return s;
}
RankSet head_ranks() {  // 0..N-2
  RankSet s = all_ranks();
  s.pop_back();
  return s;
}
int last() { return world_size() - 1; }

TEST(Equivalence, DataParallel) {
  ModelSpec spec = parse_model_ini(kModel, "equivalence.ini");
  expect_same_as_one_rank(plan_from(spec, {}));
}

// Non-prefix sets, layers on one rank, and joins whose inputs live on
// different sets: res = conv_a (last rank) + relu (all); join = res (1..N-1)
// and pool_b (rank 0).
TEST(Equivalence, BurstPlanWithSplitJoins) {
  ModelSpec spec = parse_model_ini(kModel, "equivalence.ini");
  expect_same_as_one_rank(plan_from(spec, {{"bn", {0}},
                                           {"relu", {0}},
                                           {"conv_a", {last()}},
                                           {"res", tail_ranks()},
                                           {"pool_b", {0}},
                                           {"join", all_ranks()},
                                           {"gap", {last()}},
                                           {"drop", {0, last()}},
                                           {"fc", tail_ranks()},
                                           {"loss", {0}}}));
}

// The trunk (relu) on every rank feeds branches on fewer ranks, so gradient
// slices coming back both stay on a rank (copied or added locally) and cross
// ranks, and several consumers add into one gradient.
TEST(Equivalence, BranchesOnSubsetsOfTheTrunk) {
  ModelSpec spec = parse_model_ini(kModel, "equivalence.ini");
  expect_same_as_one_rank(plan_from(spec, {{"conv_a", {last()}},
                                           {"res", tail_ranks()},
                                           {"pool_b", {0}},
                                           {"join", {0, last()}},
                                           {"fc", {last()}},
                                           {"loss", all_ranks()}}));
}

// Ranks 1..N-1 hold no layer from bn to gap, then take over the head.
TEST(Equivalence, RanksIdleForAStretch) {
  ModelSpec spec = parse_model_ini(kModel, "equivalence.ini");
  std::map<std::string, RankSet> sets;
  for (const char* l : {"bn", "relu", "conv_a", "res", "pool_b", "join", "gap"}) sets[l] = {0};
  sets["drop"] = tail_ranks();
  sets["fc"] = tail_ranks();
  sets["loss"] = tail_ranks();
  expect_same_as_one_rank(plan_from(spec, sets));
}

// Large buckets: fc's gradients wait in the whole group's open bucket while
// conv_a, on ranks 0..N-2 only, finishes its backward, and bn then sums its
// statistics over the whole group. Every member must issue the group's
// collectives (the bucket's allreduce, the statistics sum) in one order,
// though only some of them run conv_a in between. Needs a group of two or
// more ranks that leaves a rank out: 3 ranks or more.
TEST(Equivalence, SubgroupLayersBetweenTheWholeGroupsReductions) {
  if (world_size() < 3) GTEST_SKIP() << "needs 3 ranks or more";
  ModelSpec spec = parse_model_ini(kModel, "equivalence.ini");
  expect_same_as_one_rank(plan_from(spec, {{"conv_a", head_ranks()}}), 1 << 20);
}

// Both of a join's inputs from one producer on another rank set: their
// gradients go back one after the other, the second adding to the first
// (grouped into one exchange, the device path's staging read a stale
// gradient for the second).
TEST(Equivalence, OneProducerTwiceIntoJoinsOnOtherSets) {
  ModelSpec spec = parse_model_ini(kSameProducerTwice, "same_producer.ini");
  expect_same_as_one_rank(plan_from(spec, {{"conv", {0}},
                                           {"twice", {last()}},
                                           {"cat", all_ranks()},
                                           {"gap", {0}},
                                           {"fc", {last()}}}),
                          64, kSameProducerTwice);
}

// An Inception-style block (three branches and a concat) planned by the
// planner with its branches at once: a profile where each branch costs the
// same whatever its batch puts them on disjoint ranks, which the executor
// runs at the same time (slices sent as soon as they are made, gradient
// pieces added when the fork needs them).
const char* kInceptionBlock = R"(
[data]
type = input
shape = 2,6,6
[stem]
type = conv2d
inputs = data
out_channels = 4
kernel = 3
padding = 1
[b1x1]
type = conv2d
inputs = stem
out_channels = 2
kernel = 1
[b3x3]
type = conv2d
inputs = stem
out_channels = 3
kernel = 3
padding = 1
[b3x3_bn]
type = batchnorm2d
inputs = b3x3
[bpool]
type = maxpool2d
inputs = stem
kernel = 3
stride = 1
padding = 1
[cat]
type = concat
inputs = b1x1, b3x3_bn, bpool
[gap]
type = avgpool2d
inputs = cat
kernel = 6
[fc]
type = linear
inputs = gap
out_features = 5
[loss]
type = softmax_cross_entropy
inputs = fc
)";

TEST(Equivalence, PlannerBranchesAtOnce) {
  if (world_size() < 3) GTEST_SKIP() << "three branches at once need 3 ranks or more";
  ModelSpec spec = parse_model_ini(kInceptionBlock, "inception_block.ini");
  ModelProfile profile;
  profile.batches = {1, 2, 4, 8};
  for (const LayerSpec& l : spec.layers) {
    LayerProfile lp;
    lp.name = l.name;
    lp.type = l.type;
    const bool branch = l.name.rfind('b', 0) == 0;
    lp.forward_ms.assign(4, branch ? 5.0 : 0.01);
    lp.backward_ms.assign(4, branch ? 5.0 : 0.01);
    lp.activation_bytes_per_sample = 400;
    profile.layers.push_back(lp);
  }
  PlannerOptions o;
  o.ranks = world_size();
  o.global_batch = kBatch;
  o.amp_limit = INFINITY;
  o.p2p = o.allreduce = {1e-6, 1e10};
  const Plan plan = plan_model(spec, profile, o).plan;
  const RankSet& a = plan.ranks_of("b1x1");
  const RankSet& b = plan.ranks_of("b3x3");
  const RankSet& c = plan.ranks_of("bpool");
  auto disjoint = [](const RankSet& x, const RankSet& y) { return x.back() < y.front() || y.back() < x.front(); };
  ASSERT_TRUE(disjoint(a, b) && disjoint(b, c) && disjoint(a, c)) << "the planner did not put the branches apart";
  expect_same_as_one_rank(plan, 64, kInceptionBlock);
}

// Random plans: every layer on a random non-empty set of ranks (the same
// draws on every rank), with tiny and large buckets; a few milliseconds each.
// 300 of them met the bucket-order bug of the test above on 3 ranks (about
// 1 plan in 200 has its shape), 24 did not.
TEST(Equivalence, RandomPlans) {
  constexpr int plans = 300;
  ModelSpec spec = parse_model_ini(kModel, "equivalence.ini");
  const int n = world_size();
  for (int k = 0; k < plans; ++k) {
    std::map<std::string, RankSet> sets;
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      const uint64_t mask = 1 + cpu::mix64(1000 * k + i) % ((uint64_t{1} << n) - 1);  // 1 .. 2^n - 1
      RankSet set;
      for (int r = 0; r < n; ++r)
        if (mask >> r & 1) set.push_back(r);
      sets[spec.layers[i].name] = set;
    }
    SCOPED_TRACE("random plan " + std::to_string(k));
    expect_same_as_one_rank(plan_from(spec, sets), k % 2 ? 64 : 1 << 20);
    int failed = HasFailure() ? 1 : 0, any = 0;  // stop at the first failing plan, on every rank
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) return;
  }
}

}  // namespace
}  // namespace burstpool
