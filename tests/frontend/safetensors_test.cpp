// safetensors (frontend/safetensors.h): a CNN trained and saved by PyTorch
// (tests/frontend/data/make_safetensors_model.py) loads into the same model
// written with Kiln, whose outputs equal PyTorch's eagerly and traced; round
// trips; half-precision conversion; every kind of damage and every mismatch
// with the module an error that leaves the module unchanged.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/safetensors.h"
#include "runtime/binary_io.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/frontend/data/";

std::string temp_path(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_safetensors_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return (d / name).string();
}

// The model make_safetensors_model.py trains, with the same names.
struct DigitsCnn : nn::Module {
  DigitsCnn() : conv1(nn::Conv2dOptions(1, 4, 3).padding(1)), bn1(4), fc1(64, 16), fc2(16, 10) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) {
    Tensor h = max_pool2d(bn1(conv1(x)).relu(), 2);
    return fc2(fc1(h.flatten(1)).relu());
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Linear fc1, fc2;
};

// A safetensors file from a header and data.
std::string file_of(const std::string& header, const std::string& data) {
  io::ByteWriter w;
  w.u64(header.size());
  w.bytes(header);
  w.bytes(data);
  return w.str();
}

TEST_CASE("a CNN trained by PyTorch gives PyTorch's outputs in Kiln, eagerly and traced") {
  auto model = std::make_shared<DigitsCnn>();
  const std::vector<std::string> loaded =
      load_safetensors(*model, kData + "digits_cnn.safetensors");
  CHECK(loaded.size() == 11);  // 8 parameters, 2 running statistics, bn1.num_batches_tracked
  CHECK(model->bn1->num_batches_tracked.item<int64_t>() == 60);  // PyTorch's 60 Adam steps
  model->eval();
  auto io_tensors = read_safetensors(kData + "digits_cnn_io.safetensors");
  const Tensor input = io_tensors.at("input"), expected = io_tensors.at("output");
  REQUIRE(input.sizes() == Shape{16, 1, 8, 8});
  Tensor eager;
  {
    NoGradGuard no_grad;
    eager = model->forward(input);
  }
  CHECK(allclose(eager, expected, 1e-4, 1e-5));
  auto traced = jit([&](Tensor x) { return model->forward(x); }, "digits_cnn");
  CHECK(allclose(traced(input), expected, 1e-4, 1e-5));
  // The predictions, too.
  CHECK(equal(eager.argmax(1), expected.argmax(1)));
  CHECK(safetensors_metadata(kData + "digits_cnn.safetensors").at("format") == "pt");
}

TEST_CASE("write_safetensors and read_safetensors round-trip every dtype exactly") {
  const std::string path = temp_path("all.safetensors");
  std::vector<std::pair<std::string, Tensor>> ts = {
      {"f32", randn({2, 3})},
      {"f64", randn({4}, kFloat64)},
      {"i64", tensor(std::vector<int64_t>{int64_t(1) << 62, -1})},
      {"i32", scalar_tensor(-7, kInt32)},
      {"bool", tensor({true, false})},
      {"empty", zeros({0, 5})},
      {"strided", randn({3, 2}).t()}};
  write_safetensors(path, ts, {{"who", "kiln"}});
  auto back = read_safetensors(path);
  REQUIRE(back.size() == ts.size());
  for (const auto& [name, t] : ts) {
    CHECK(back.at(name).dtype() == t.dtype());
    CHECK(equal(back.at(name), t));
  }
  CHECK(safetensors_metadata(path).at("who") == "kiln");
  KILN_CHECK_ERROR(write_safetensors(path, {{"x", ones({1})}, {"x", ones({1})}}),
                   "reserved or given twice");
}

TEST_CASE("F16 and BF16 tensors are read as float32") {
  // 1.0, -2.0, 0.5 and a subnormal in half precision; 1.0, -3.0 in bfloat16.
  const uint16_t halves[] = {0x3c00, 0xc000, 0x3800, 0x0001};
  const uint16_t bfloats[] = {0x3f80, 0xc040};
  std::string data(reinterpret_cast<const char*>(halves), 8);
  data.append(reinterpret_cast<const char*>(bfloats), 4);
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})";
  auto t = parse_safetensors(file_of(header, data), "half");
  CHECK(t.at("h").dtype() == kFloat32);
  const std::vector<float> h = t.at("h").to_vector<float>();
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 0.5f);
  CHECK(h[3] == doctest::Approx(5.960464477539063e-08));
  CHECK(t.at("b").to_vector<float>() == std::vector<float>{1.0f, -3.0f});
}

TEST_CASE("a damaged safetensors file is an error naming it and what is wrong") {
  const std::string four(16, '\0');
  auto parse = [](const std::string& bytes) { return parse_safetensors(bytes, "m.safetensors"); };
  KILN_CHECK_ERROR(parse("abc"), "m.safetensors", "too short");
  KILN_CHECK_ERROR(parse(file_of("{", "")), "m.safetensors", "not valid JSON");
  KILN_CHECK_ERROR(parse(file_of("[1]", "")), "not an object");
  io::ByteWriter w;
  w.u64(1000);
  KILN_CHECK_ERROR(parse(w.str() + "{}"), "header's length is 1000");
  KILN_CHECK_ERROR(
      parse(file_of(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,20]}})", four)), "'x'",
      "outside the 16 bytes");
  KILN_CHECK_ERROR(
      parse(file_of(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", four)),
      "'x' holds 16 bytes, but F32[3] is 12");
  KILN_CHECK_ERROR(parse(file_of(R"({"x":{"dtype":"U4","shape":[3],"data_offsets":[0,3]}})", four)),
                   "dtype U4");
  KILN_CHECK_ERROR(
      parse(file_of(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four)),
      "a dim is -1");
  KILN_CHECK_ERROR(parse(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                 four)),
                   "overlap");
  KILN_CHECK_ERROR(parse(file_of(R"({"x":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                                 std::string("\x01\x07", 2))),
                   "not a bool");
  KILN_CHECK_ERROR(parse(file_of(R"({"x":{"dtype":"F32","shape":[1]}})", four)), "data_offsets");
  KILN_CHECK_ERROR(read_safetensors(temp_path("none.safetensors")), "none.safetensors");
}

TEST_CASE(
    "loading into a module checks names, shapes and dtypes first, and changes nothing on an "
    "error") {
  manual_seed(0);
  nn::Sequential a(nn::Linear(3, 2), nn::BatchNorm1d(2));
  nn::Sequential b(nn::Linear(3, 2), nn::BatchNorm1d(2));
  const std::string path = temp_path("seq.safetensors");
  save_safetensors(*a, path);
  load_safetensors(b, path);
  for (size_t i = 0; i < a->parameters().size(); ++i)
    CHECK(equal(a->parameters()[i], b->parameters()[i]));

  nn::Sequential wider(nn::Linear(3, 4), nn::BatchNorm1d(4));
  const Tensor before = wider->parameters()[0].clone();
  KILN_CHECK_ERROR(load_safetensors(wider, path), path.c_str(),
                   "0.weight: the file has shape [2,3], the module [4,3]", "nothing was loaded");
  CHECK(equal(wider->parameters()[0], before));
  nn::Sequential more(nn::Linear(3, 2), nn::BatchNorm1d(2), nn::Linear(2, 2));
  KILN_CHECK_ERROR(load_safetensors(more, path), "'2.weight' is missing from the file");
  nn::Sequential fewer(nn::Linear(3, 2));
  KILN_CHECK_ERROR(load_safetensors(fewer, path),
                   "'1.weight' is in the file but not in the module");
  SafetensorsLoadOptions lax;
  lax.strict = false;
  CHECK(load_safetensors(fewer, path, lax).size() == 2);
  // A float64 module takes float32 weights, converted.
  nn::Sequential f64(nn::Linear(3, 2), nn::BatchNorm1d(2));
  f64->to(kFloat64);
  load_safetensors(f64, path);
  CHECK(f64->parameters()[0].dtype() == kFloat64);
  CHECK(allclose(f64->parameters()[0].to(kFloat32), a->parameters()[0]));
}

}  // namespace
}  // namespace kiln
