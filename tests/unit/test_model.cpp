// Models as DAGs: topological order, fan-out gradient accumulation (checked
// against finite differences on a whole residual + concat model), INI parsing
// errors with lines, the HDF5 round trip and checkpoints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>

#include <hdf5.h>

#include "burstpool/checkpoint.hpp"
#include "burstpool/error.hpp"
#include "burstpool/model.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/optimizer.hpp"
#include "layers/kernels.hpp"

namespace burstpool {
namespace {

// A residual join whose trunk fans out to three consumers, and a concat of two
// branches; every layer is smooth so finite differences are reliable.
const char* kBranchy = R"(
[model]
name = branchy
[data]
type = input
shape = 2,5,5
[stem]
type = conv2d
inputs = data
out_channels = 3
kernel = 3
padding = 1
[bn]
type = batchnorm2d
inputs = stem
[conv_a]
type = conv2d
inputs = bn
out_channels = 3
kernel = 3
padding = 1
[res]
type = add
inputs = conv_a, bn
[pool_b]
type = avgpool2d
inputs = bn
kernel = 3
stride = 1
padding = 1
[join]
type = concat
inputs = res, pool_b
[gap]
type = global_avgpool
inputs = join
[fc]
type = linear
inputs = gap
out_features = 4
[loss]
type = softmax_cross_entropy
inputs = fc
)";

std::string temp_path(const std::string& name) {
  return fmt::format("/tmp/burstpool_test_{}_{}", getpid(), name);
}

struct Batch {
  std::vector<float> images;
  std::vector<int32_t> labels;
};

Batch random_batch(const Model& m, int n, uint64_t seed) {
  Batch b;
  b.images.resize(n * m.sample_shape().count());
  for (size_t i = 0; i < b.images.size(); ++i) b.images[i] = 2 * cpu::uniform01(seed + i) - 1;
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<int32_t>(cpu::mix64(seed + 1000 + i) % m.classes()));
  return b;
}

double model_loss(Model& m, const Batch& b) {
  Context ctx;
  ctx.labels = b.labels.data();
  ctx.loss_scale = 1.0 / m.batch();
  m.load_batch(b.images.data());
  // Batch norm running statistics do not affect training-mode outputs.
  return m.forward(ctx);
}

TEST(Model, TopologicalOrderFollowsInputsNotFileOrder) {
  ModelSpec spec = parse_model_ini(R"(
[loss]
type = softmax_cross_entropy
inputs = fc
[fc]
type = linear
inputs = data
out_features = 3
[data]
type = input
shape = 4
)", "reversed.ini");
  Model m(spec, 2, 1);
  EXPECT_EQ(m.layer(0).name(), "data");
  EXPECT_EQ(m.layer(1).name(), "fc");
  EXPECT_EQ(m.layer(2).name(), "loss");
}

TEST(Model, WholeModelGradientsMatchFiniteDifferences) {
  ModelSpec spec = parse_model_ini(kBranchy, "branchy.ini");
  Model m(spec, 3, 11);
  Batch b = random_batch(m, 3, 5);
  model_loss(m, b);
  Context ctx;
  ctx.labels = b.labels.data();
  ctx.loss_scale = 1.0 / 3;
  m.backward(ctx);
  std::vector<float> analytic(m.grads().data(), m.grads().data() + m.grads().size());
  float* w = m.params().data();
  int failures = 0;
  const double h = 1e-2;
  for (size_t i = 0; i < analytic.size(); ++i) {
    const float orig = w[i];
    w[i] = orig + static_cast<float>(h);
    const double up = model_loss(m, b);
    w[i] = orig - static_cast<float>(h);
    const double down = model_loss(m, b);
    w[i] = orig;
    const double numeric = (up - down) / (2 * h);
    if (std::fabs(numeric - analytic[i]) > 3e-4 + 5e-2 * std::fabs(numeric) && failures++ < 5)
      ADD_FAILURE() << "parameter " << i << ": analytic " << analytic[i] << " numeric " << numeric;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Model, SmallerBatchReusesBuffers) {
  Model m(parse_model_ini(kBranchy, "branchy.ini"), 4, 1);
  m.set_batch(2);
  EXPECT_EQ(m.activation(m.logits_layer()).shape().n, 2);
  EXPECT_THROW(m.set_batch(5), Error);
}

// Each malformed model names the file and line of the problem.
struct BadModel {
  const char* text;
  const char* expected;  // substring of the error
};

class BadModelTest : public ::testing::TestWithParam<BadModel> {};

TEST_P(BadModelTest, ErrorNamesFileAndLine) {
  try {
    ModelSpec spec = parse_model_ini(GetParam().text, "bad.ini");
    Model m(spec, 1, 1);
    FAIL() << "no error for: " << GetParam().text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().expected), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ini, BadModelTest,
    ::testing::Values(
        BadModel{"[data]\ntype = input\nshape = 4\n[fc]\ntype = linear\ninputs = data\nout_features = 3\nbais = no\n",
                 "bad.ini:8: layer 'fc' (linear), key 'bais': unknown key"},
        BadModel{"[data]\ntype = input\nshape = 4\n[fc]\ntype = linear\ninputs = data\nout_features =\n",
                 "bad.ini:7: [fc] key 'out_features' has no value"},
        BadModel{"[data]\ntype = input\nshape = 4\n[fc]\ntype = linaer\ninputs = data\n",
                 "bad.ini:5: layer 'fc' has unknown type 'linaer'"},
        BadModel{"[data]\ntype = input\nshape = 4\n[fc]\ntype = linear\ninputs = dta\nout_features = 2\n",
                 "bad.ini:6: layer 'fc' has unknown input 'dta'"},
        BadModel{"[data]\ntype = input\nshape = 4\nnonsense line\n", "bad.ini:4: syntax error"},
        BadModel{"[data]\ntype = input\nshape = 1,4,4\n[a]\ntype = conv2d\ninputs = data\nout_channels = 2\n"
                 "kernel = 3\n[b]\ntype = conv2d\ninputs = data\nout_channels = 3\nkernel = 3\n[sum]\ntype = add\n"
                 "inputs = a, b\n[loss]\ntype = softmax_cross_entropy\ninputs = sum\n",
                 "bad.ini:14: layer 'sum' (add): all inputs must have the same shape"},
        BadModel{"[data]\ntype = input\nshape = 4\n[fc]\ntype = linear\ninputs = fc2\nout_features = 2\n"
                 "[fc2]\ntype = linear\ninputs = fc\nout_features = 2\n",
                 "is part of a cycle"},
        BadModel{"[data]\ntype = input\nshape = 4\n[fc]\ntype = linear\ninputs = data\nout_features = x\n",
                 "bad.ini:7: layer 'fc' (linear), key 'out_features': 'x' is not an integer"}));

TEST(ModelFiles, IniToHdf5ToIniRoundTrip) {
  for (const char* name : {"mlp", "lenet5", "vgg_small", "resnet20", "vgg16", "inception"}) {
    const std::string src = fmt::format("{}/jobs/models/{}.ini", BURSTPOOL_SOURCE_DIR, name);
    ModelSpec a = load_model_spec(src);
    const std::string h5 = temp_path(std::string(name) + ".h5"), ini = temp_path(std::string(name) + ".ini");
    save_model_hdf5(a, h5);
    ModelSpec b = load_model_spec(h5);
    save_model_ini(b, ini);
    ModelSpec c = load_model_spec(ini);
    ASSERT_EQ(a.layers.size(), c.layers.size()) << name;
    EXPECT_EQ(a.name, c.name);
    for (size_t i = 0; i < a.layers.size(); ++i) {
      EXPECT_EQ(a.layers[i].name, c.layers[i].name);
      EXPECT_EQ(a.layers[i].type, c.layers[i].type);
      EXPECT_EQ(a.layers[i].inputs, c.layers[i].inputs);
      EXPECT_EQ(a.layers[i].attrs, c.layers[i].attrs);
    }
    EXPECT_EQ(model_ini_text(a), model_ini_text(c)) << name;
    std::remove(h5.c_str());
    std::remove(ini.c_str());
  }
}

TEST(ModelFiles, Hdf5WeightsRoundTrip) {
  ModelSpec spec = parse_model_ini(kBranchy, "branchy.ini");
  Model a(spec, 2, 3), b(spec, 2, 4);
  a.state().data()[0] = 0.75f;
  const std::string path = temp_path("weights.h5");
  save_model_hdf5(spec, path, &a);
  ASSERT_TRUE(has_weights(path));
  load_weights(path, b);
  for (size_t i = 0; i < a.params().size(); ++i) ASSERT_EQ(a.params().data()[i], b.params().data()[i]);
  for (size_t i = 0; i < a.state().size(); ++i) ASSERT_EQ(a.state().data()[i], b.state().data()[i]);
  std::remove(path.c_str());
}

TEST(ModelFiles, TruncatedHdf5IsRefusedWithFileName) {
  ModelSpec spec = load_model_spec(fmt::format("{}/jobs/models/lenet5.ini", BURSTPOOL_SOURCE_DIR));
  Model m(spec, 1, 1);
  const std::string path = temp_path("full.h5"), cut = temp_path("cut.h5");
  save_model_hdf5(spec, path, &m);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  try {
    ModelSpec again = load_model_spec(cut);
    Model other(again, 1, 1);
    load_weights(cut, other);
    FAIL() << "a truncated file was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(cut), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
  std::remove(cut.c_str());
}

// Replaces (or adds) one dataset of an HDF5 file: type, dims and values.
void put_dataset(const std::string& file, const std::string& path, hid_t type, const std::vector<hsize_t>& dims,
                 const void* data) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  if (H5Lexists(f, path.c_str(), H5P_DEFAULT) > 0) H5Ldelete(f, path.c_str(), H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(f, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
}

// Weights are checked in full: shape (trailing 1s aside), type, finiteness, and
// no dataset the model does not have.
TEST(ModelFiles, WeightsAreCheckedBeforeUse) {
  const char* linear = "[data]\ntype = input\nshape = 7\n[fc]\ntype = linear\ninputs = data\nout_features = 5\n"
                       "[loss]\ntype = softmax_cross_entropy\ninputs = fc\n";
  ModelSpec spec = parse_model_ini(linear, "linear.ini");
  Model m(spec, 1, 1);
  const std::string path = temp_path("checked.h5");
  auto error_after = [&](const std::function<void()>& change) {
    save_model_hdf5(spec, path, &m);
    change();
    Model other(spec, 1, 2);
    try {
      load_weights(path, other);
    } catch (const Error& e) {
      return std::string(e.what()).substr(path.size());
    }
    return std::string("no error");
  };
  const std::vector<float> values(35, 0.5f);
  EXPECT_EQ(error_after([] {}), "no error");
  EXPECT_EQ(error_after([&] { put_dataset(path, "/weights/fc/weight", H5T_NATIVE_FLOAT, {5, 7, 1}, values.data()); }),
            "no error") << "a trailing 1 may be dropped or kept";
  EXPECT_EQ(error_after([&] { put_dataset(path, "/weights/fc/weight", H5T_NATIVE_FLOAT, {7, 5}, values.data()); }),
            ": dataset '/weights/fc/weight' has shape (7, 5), the model expects (5, 7)");
  EXPECT_EQ(error_after([&] { put_dataset(path, "/weights/fc/weight", H5T_NATIVE_FLOAT, {35}, values.data()); }),
            ": dataset '/weights/fc/weight' has shape (35), the model expects (5, 7)");
  const std::vector<int> ints(35, 1);
  EXPECT_EQ(error_after([&] { put_dataset(path, "/weights/fc/weight", H5T_NATIVE_INT, {5, 7}, ints.data()); }),
            ": dataset '/weights/fc/weight' is not floating point; weights are stored as float32");
  std::vector<float> nan = values;
  nan[3] = NAN;
  EXPECT_EQ(error_after([&] { put_dataset(path, "/weights/fc/weight", H5T_NATIVE_FLOAT, {5, 7}, nan.data()); }),
            ": dataset '/weights/fc/weight' holds a non-finite value (nan at index 3)");
  EXPECT_EQ(error_after([&] { put_dataset(path, "/weights/fc/extra", H5T_NATIVE_FLOAT, {5, 7}, values.data()); }),
            ": dataset '/weights/fc/extra' belongs to no layer or parameter of the model");
  std::remove(path.c_str());
}

// More parameters than a tensor dimension holds: refused by name before any allocation.
TEST(Model, TooManyParametersAreRefusedBeforeAllocating) {
  const char* huge = "[data]\ntype = input\nshape = 65536\n[fc]\ntype = linear\ninputs = data\nout_features = 65536\n"
                     "[loss]\ntype = softmax_cross_entropy\ninputs = fc\n";
  try {
    Model m(parse_model_ini(huge, "huge.ini"), 1, 1);
    FAIL() << "a model of 2^32 parameters was built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("huge.ini: the model has 4295032832 parameters"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, WritesWeightsAndVelocityAtomically) {
  ModelSpec spec = parse_model_ini(kBranchy, "branchy.ini");
  Model a(spec, 2, 3), b(spec, 2, 9);
  Sgd sa(a, {}), sb(b, {});
  for (size_t i = 0; i < sa.velocity().size(); ++i) sa.velocity().data()[i] = 0.001f * i;
  const std::string path = temp_path("ckpt.h5");
  write_checkpoint(path, a, sa, {42, 7});
  EXPECT_NE(access((path + fmt::format(".tmp.{}", getpid())).c_str(), F_OK), 0) << "temporary file left behind";
  CheckpointInfo info = read_checkpoint(path, b, sb);
  EXPECT_EQ(info.step, 42);
  EXPECT_EQ(info.seed, 7u);
  for (size_t i = 0; i < a.params().size(); ++i) {
    ASSERT_EQ(a.params().data()[i], b.params().data()[i]);
    ASSERT_EQ(sa.velocity().data()[i], sb.velocity().data()[i]);
  }
  // The checkpoint is itself a model file: its architecture loads back.
  EXPECT_EQ(load_model_spec(path).layers.size(), spec.layers.size());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace burstpool
