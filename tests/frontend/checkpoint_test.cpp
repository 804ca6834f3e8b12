// Module weights files (kiln::save / kiln::load) and Module::to: weights round
// trip bit-exactly into the same tensor handles, damaged or mismatched files are
// clean kiln::Errors that leave the module as it was, and writes are atomic.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/tensor_impl.h"
#include "runtime/binary_io.h"
#include "runtime/cuda_driver.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// A fresh directory for one test's files.
std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_checkpoint_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Same dtype, shape and bytes.
bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  size_t n = static_cast<size_t>(x.numel()) * dtype_size(x.dtype());
  return n == 0 || std::memcmp(x.impl()->view().data, y.impl()->view().data, n) == 0;
}

// Every parameter and buffer of a and b: the same names, bit-identical data.
bool same_state(const nn::Module& a, const nn::Module& b) {
  auto sa = a.named_parameters(), sb = b.named_parameters();
  for (auto& nb : a.named_buffers()) sa.push_back(nb);
  for (auto& nb : b.named_buffers()) sb.push_back(nb);
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i].first != sb[i].first || !bit_equal(sa[i].second, sb[i].second)) return false;
  return true;
}

// Linear -> BatchNorm1d -> ReLU -> Linear, its batch-norm statistics moved off
// their initial values by two training-mode forwards.
nn::Sequential make_net(uint64_t seed) {
  manual_seed(seed);
  nn::Sequential net(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Linear(8, 3));
  for (int i = 0; i < 2; ++i) net(randn({16, 4}));
  return net;
}

}  // namespace

TEST_CASE("checkpoint: a Sequential with batch norm round trips bit-exactly, in place") {
  nn::Sequential net = make_net(1);
  std::string path = temp_dir("round_trip") + "/net.kiln";
  save(net, path);
  CHECK(io::read_file(path).starts_with("KILN-WEIGHTS\n"));

  nn::Sequential fresh = make_net(2);
  REQUIRE_FALSE(same_state(*net, *fresh));
  auto lin = std::dynamic_pointer_cast<nn::LinearImpl>(fresh->children()[0]);
  auto bn = std::dynamic_pointer_cast<nn::BatchNormImpl>(fresh->children()[1]);
  REQUIRE(lin);
  REQUIRE(bn);
  TensorImpl* weight = lin->weight.impl();
  TensorImpl* running_var = bn->running_var.impl();
  load(fresh, path);
  CHECK(same_state(*net, *fresh));
  // In place: the handles the module (and its public members) held are the loaded ones.
  CHECK(lin->weight.impl() == weight);
  CHECK(fresh->named_parameters()[0].second.impl() == weight);
  CHECK(bn->running_var.impl() == running_var);
  CHECK(bit_equal(bn->running_mean,
                  std::dynamic_pointer_cast<nn::BatchNormImpl>(net->children()[1])->running_mean));
  for (const Tensor& p : fresh->parameters()) CHECK(p.requires_grad());
  for (const Tensor& b : fresh->buffers()) CHECK_FALSE(b.requires_grad());

  // The same outputs, in evaluation mode (running statistics) and in training mode.
  Tensor x = randn({5, 4});
  net->eval();
  fresh->eval();
  CHECK(bit_equal(net(x), fresh(x)));
  net->train();
  fresh->train();
  CHECK(bit_equal(net(x), fresh(x)));

  // Equal modules save to the same bytes.
  std::string dir = fs::path(path).parent_path().string();
  save(net, dir + "/a.kiln");
  save(fresh, dir + "/b.kiln");
  CHECK(io::read_file(dir + "/a.kiln") == io::read_file(dir + "/b.kiln"));
}

TEST_CASE("checkpoint: an optimizer built before load trains the loaded values") {
  nn::Sequential trained = make_net(3);
  std::string path = temp_dir("optim") + "/w.kiln";
  save(trained, path);

  nn::Sequential a = make_net(4), b = make_net(5);
  optim::SGD opt_a(a->parameters(), 0.1);  // built before load
  load(a, path);
  load(b, path);
  optim::SGD opt_b(b->parameters(), 0.1);  // built after load
  Tensor x = randn({16, 4}), y = randn({16, 3});
  for (int step = 0; step < 2; ++step) {
    for (auto [m, opt] : {std::pair{a, &opt_a}, std::pair{b, &opt_b}}) {
      opt->zero_grad();
      nn::functional::mse_loss(m(x), y).backward();
      opt->step();
    }
  }
  CHECK(same_state(*a, *b));
  CHECK_FALSE(same_state(*a, *trained));  // it did train
}

TEST_CASE("checkpoint: modules held by shared_ptr, and tied weights") {
  struct Net : nn::Module {
    Net() : Module("Net") {
      Tensor w = randn({3, 3});
      register_parameter("a", w);
      register_parameter("b", w);  // tied: one tensor under two names
      register_buffer("steps", tensor({7}, TensorOptions(kInt64)));
      register_buffer("mask", tensor({true, false}));
    }
  };
  manual_seed(6);
  auto net = std::make_shared<Net>();
  std::string path = temp_dir("shared") + "/net.kiln";
  save(net, path);
  auto other = std::make_shared<Net>();
  REQUIRE_FALSE(same_state(*net, *other));
  load(other, path);
  CHECK(same_state(*net, *other));
  auto params = other->parameters();
  CHECK(params[0].impl() == params[1].impl());
  CHECK(other->buffers()[0].item<int64_t>() == 7);
  KILN_CHECK_ERROR(save(std::shared_ptr<Net>(), path), "the module pointer is null");
}

TEST_CASE("checkpoint: damaged, truncated and foreign files are errors that change nothing") {
  nn::Sequential net = make_net(7);
  std::string dir = temp_dir("damage");
  std::string path = dir + "/w.kiln";
  save(net, path);
  const std::string good = io::read_file(path);
  std::string bad = dir + "/bad.kiln";
  nn::Sequential target = make_net(8);
  nn::Sequential before = make_net(8);

  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x04;
  spit(bad, flipped);
  KILN_CHECK_ERROR(load(target, bad), "bad.kiln: checksum mismatch (file damaged)");
  flipped = good;
  flipped[good.size() - 1] ^= 0x01;  // the checksum itself
  spit(bad, flipped);
  KILN_CHECK_ERROR(load(target, bad), "checksum mismatch");

  // Into the data of the last-but-one entry (the last is 1.num_batches_tracked).
  spit(bad, good.substr(0, good.size() - 70));
  KILN_CHECK_ERROR(load(target, bad), "bad.kiln: truncated at byte", "in entry 7 of 9",
                   "('1.running_var')", "bytes of data");
  spit(bad, good.substr(0, good.size() - 40));
  KILN_CHECK_ERROR(load(target, bad), "bad.kiln: truncated at byte", "in entry 8 of 9",
                   "bytes of name");
  spit(bad, good.substr(0, 20));
  KILN_CHECK_ERROR(load(target, bad), "bad.kiln: truncated at byte 20 in the header");
  spit(bad, good.substr(0, good.size() - 3));
  KILN_CHECK_ERROR(load(target, bad), "truncated at byte", "in the checksum");
  spit(bad, good + "extra");
  KILN_CHECK_ERROR(load(target, bad), "5 unexpected bytes after the end");

  std::string v2 = good;
  v2[13] = 2;
  spit(bad, v2);
  KILN_CHECK_ERROR(load(target, bad),
                   "bad.kiln: format version 2 is not supported (this build reads version 1)");

  spit(bad, "");
  KILN_CHECK_ERROR(load(target, bad), "not a Kiln weights file");
  spit(bad, "\x93NUMPY\x01\x00 whatever");
  KILN_CHECK_ERROR(load(target, bad), "not a Kiln weights file", "NumPy");
  // The two `load`s mixed up: each file says which it is.
  auto f = jit([&](Tensor x) { return (x * 2).sum(); }, "f");
  f.save(dir + "/graph.kiln", randn({2, 4}));
  KILN_CHECK_ERROR(load(target, dir + "/graph.kiln"), "not a Kiln weights file",
                   "a Kiln graph file, for kiln::load(path)");
  KILN_CHECK_ERROR(load(path), "not a Kiln graph file",
                   "a Kiln weights file, for kiln::load(module, path)");
  KILN_CHECK_ERROR(load(target, dir + "/missing.kiln"), "missing.kiln: cannot open");
  CHECK(same_state(*target, *before));
}

TEST_CASE("checkpoint: a resealed file with a repeated name or a bad bool is malformed") {
  struct Flags : nn::Module {
    Flags() : Module("Flags") {
      register_buffer("first", tensor({true, false}));
      register_buffer("other", tensor({false, true}));
    }
  };
  nn::ModuleHolder<Flags> flags;
  std::string dir = temp_dir("resealed");
  save(flags, dir + "/f.kiln");
  const std::string good = io::read_file(dir + "/f.kiln");
  // A new checksum over the edited bytes, so the structural checks are reached.
  auto reseal = [](std::string b) {
    uint64_t sum = io::checksum64(b.data(), b.size() - 8);
    for (int i = 0; i < 8; ++i) b[b.size() - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
    return b;
  };
  std::string twice = good;
  twice.replace(twice.find("other"), 5, "first");
  spit(dir + "/bad.kiln", reseal(twice));
  KILN_CHECK_ERROR(load(flags, dir + "/bad.kiln"), "malformed entry 1 of 2 ('first')",
                   "a second entry of this name (the first is entry 0)");
  std::string two = good;
  two[two.find("first") + 5 + 1 + 4 + 8 + 8 + 1] = 2;  // name, dtype, rank, dim, length, [1]
  spit(dir + "/bad.kiln", reseal(two));
  KILN_CHECK_ERROR(load(flags, dir + "/bad.kiln"), "malformed entry 0 of 2 ('first')",
                   "bool element 1 holds byte 2 (expected 0 or 1)");
  CHECK(flags->buffers()[0].to_vector<int64_t>() == std::vector<int64_t>{1, 0});
}

TEST_CASE("checkpoint: names, dtypes and shapes must match the module's exactly") {
  manual_seed(9);
  nn::Sequential small(nn::Linear(4, 8), nn::Linear(8, 3));
  std::string dir = temp_dir("mismatch");
  std::string path = dir + "/small.kiln";
  save(small, path);

  nn::Sequential wider(nn::Linear(4, 16), nn::Linear(16, 3));
  Tensor weight_before = wider->parameters()[0].clone();
  KILN_CHECK_ERROR(load(wider, path),
                   "small.kiln: 0.weight: the file has shape [8,4], the module [16,4]",
                   "0.bias: the file has shape [8], the module [16]",
                   "1.weight: the file has shape [3,8], the module [3,16]");
  CHECK(bit_equal(wider->parameters()[0], weight_before));  // checked before any write

  nn::Sequential longer(nn::Linear(4, 8), nn::Linear(8, 3), nn::Linear(3, 2));
  KILN_CHECK_ERROR(load(longer, path),
                   "small.kiln: the names in the file do not match the module's",
                   "missing from the file: '2.weight', '2.bias'", "same structure");
  nn::Sequential shorter(nn::Linear(4, 8));
  KILN_CHECK_ERROR(load(shorter, path), "not in the module: '1.weight', '1.bias'");
  nn::Sequential no_bias(nn::Linear(4, 8, false), nn::Linear(8, 3));
  KILN_CHECK_ERROR(load(no_bias, path), "not in the module: '0.bias'");

  struct Doubles : nn::Module {
    Doubles() : Module("Doubles") {
      register_parameter("weight", zeros({8, 4}, kFloat64));
      register_parameter("bias", zeros({8}, kFloat32));
    }
    Tensor forward(const Tensor& x) { return x; }
  };
  nn::Sequential f64;
  f64->push_back(nn::ModuleHolder<Doubles>());
  f64->push_back(nn::Linear(8, 3));
  KILN_CHECK_ERROR(load(f64, path), "0.weight: the file has dtype f32, the module f64");
  CHECK(f64->parameters()[0].sum().item<double>() == 0);

  // A module naming two tensors alike cannot be saved (and the file stays).
  struct Twice : nn::Module {
    Twice() : Module("Twice") {
      register_parameter("w", zeros({2}));
      register_buffer("w", zeros({2}));
    }
  };
  const std::string bytes = io::read_file(path);
  KILN_CHECK_ERROR(save(nn::ModuleHolder<Twice>(), path), "two tensors named 'w'");
  CHECK(io::read_file(path) == bytes);
}

TEST_CASE("checkpoint: saving is atomic: a failed write leaves no file and no temporary") {
  nn::Sequential net = make_net(10);
  std::string dir = temp_dir("atomic");
  std::string path = dir + "/w.kiln";
  save(net, path);
  save(make_net(11), path);  // replaces it whole
  nn::Sequential check = make_net(12);
  load(check, path);
  CHECK(same_state(*check, *make_net(11)));

  // The parent is a regular file: nothing can be written there.
  std::string blocked = path + "/w.kiln";
  KILN_CHECK_ERROR(save(net, blocked), "w.kiln/w.kiln");
  CHECK_FALSE(fs::exists(blocked));
  // Missing directories are created (as for every Kiln file write).
  save(net, dir + "/new/sub/w.kiln");
  CHECK(fs::is_regular_file(dir + "/new/sub/w.kiln"));
  // Only the files written are there: no temporary was left behind.
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 2);
}

TEST_CASE("checkpoint: Module::to moves parameters, buffers and grads in place") {
  nn::Sequential net = make_net(13);
  auto lin = std::dynamic_pointer_cast<nn::LinearImpl>(net->children()[0]);
  REQUIRE(lin);
  nn::functional::mse_loss(net(randn({4, 4})), zeros({4, 3})).backward();
  REQUIRE(lin->weight.grad().defined());
  const void* data = lin->weight.impl()->view().data;
  nn::Sequential copy = make_net(14);
  const std::string dir = temp_dir("to");
  save(net, dir + "/w.kiln");
  load(copy, dir + "/w.kiln");

  // To the device it is on: nothing moves, nothing is copied.
  net->to(kCPU);
  net->to(Device(kCPU));
  CHECK(lin->weight.impl()->view().data == data);
  CHECK(lin->weight.requires_grad());
  CHECK(lin->weight.grad().defined());
  CHECK(same_state(*net, *copy));

  // Inside a trace it is an error naming the line.
  auto f = jit([&](Tensor x) {
    net->to(kCPU);
    return x;
  });
  KILN_CHECK_ERROR(f(ones({1})), "Module::to(cpu) inside a traced function");

  if (!cuda::available()) {
    // The error Tensor::to gives; the module stays where it was, and works.
    KILN_CHECK_ERROR(net->to(kCUDA), "to(cuda:0)", "CUDA is not available");
    for (const Tensor& t : net->parameters()) CHECK(t.device() == Device(kCPU));
    CHECK(lin->weight.impl()->view().data == data);
    CHECK(net(ones({2, 4})).sizes() == Shape{2, 3});
    MESSAGE("skipped the CUDA part: no CUDA device (" << cuda::unavailable_reason() << ")");
    return;
  }
  std::vector<TensorImpl*> handles;
  for (const Tensor& p : net->parameters()) handles.push_back(p.impl());
  Tensor grad = lin->weight.grad();
  net->to(kCUDA);
  auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].impl() == handles[i]);
    CHECK(params[i].is_cuda());
    CHECK(params[i].requires_grad());
  }
  for (const Tensor& b : net->buffers()) CHECK(b.is_cuda());
  CHECK(lin->weight.is_cuda());
  CHECK(grad.is_cuda());  // the gradient moved with its parameter, same handle
  CHECK(lin->weight.grad().impl() == grad.impl());
  CHECK(same_state(*net, *copy));  // compared on the host
  net->eval();
  copy->eval();
  Tensor x = randn({3, 4});
  CHECK(allclose(net(x.cuda()).cpu(), copy(x), 1e-5, 1e-6));

  // Loading into a module on CUDA goes through the host; it stays on CUDA.
  std::string path = dir + "/w15.kiln";
  save(make_net(15), path);
  load(net, path);
  for (const Tensor& t : net->parameters()) CHECK(t.is_cuda());
  CHECK(same_state(*net, *make_net(15)));
  net->to(kCPU);
  CHECK_FALSE(lin->weight.is_cuda());
  CHECK(same_state(*net, *make_net(15)));
}

}  // namespace kiln
