// Archives (frontend/archive.h): exact round trips of tensors of every dtype,
// values and nested archives, through files and streams; modules and
// optimizers saved and restored in place; every kind of damage an error.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "frontend/archive.h"
#include "runtime/binary_io.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;
using serialize::InputArchive;
using serialize::OutputArchive;

std::string temp_path(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_archive_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return (d / name).string();
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

TEST_CASE("an archive round-trips tensors, values and nested archives exactly") {
  Tensor f = tensor({1.5f, -0.0f, std::numeric_limits<float>::quiet_NaN(), 1e-40f});
  Tensor d = randn({2, 3}, kFloat64).t();  // not contiguous
  Tensor i = tensor(std::vector<int64_t>{int64_t(1) << 60, -3});
  Tensor b = tensor({true, false, true});
  Tensor s = scalar_tensor(7, kInt32);
  OutputArchive inner, empty_one, out;
  inner.write("weight", d, true);
  inner.write("note", std::string("hello"));
  out.write("f", f);
  out.write("i", i);
  out.write("b", b);
  out.write("s", s);
  out.write("pi", 3.141592653589793);
  out.write("n", int64_t(-5));
  out.write("flag", true);
  out.write("inner", inner);
  out.write("nothing", empty_one);
  KILN_CHECK_ERROR(out.write("f", f), "written twice");
  const std::string path = temp_path("a.kiln");
  out.save_to(path);

  InputArchive in;
  in.load_from(path);
  CHECK(in.keys() ==
        std::vector<std::string>{"f", "i", "b", "s", "pi", "n", "flag", "inner", "nothing"});
  Tensor rf, ri, rb, rs;
  in.read("f", rf);
  in.read("i", ri);
  in.read("b", rb);
  in.read("s", rs);
  CHECK(bits_equal(rf, f));
  CHECK(bits_equal(ri, i));
  CHECK(bits_equal(rb, b));
  CHECK(bits_equal(rs, s));
  double pi = 0;
  int64_t n = 0;
  bool flag = false;
  in.read("pi", pi);
  in.read("n", n);
  in.read("flag", flag);
  CHECK(pi == 3.141592653589793);
  CHECK(n == -5);
  CHECK(flag);
  InputArchive nested, nothing;
  in.read("inner", nested);
  CHECK(in.try_read("nothing", nothing));
  CHECK(nothing.keys().empty());
  Tensor w = zeros({3, 2}, kFloat64);  // read in place into a tensor of the same type
  const TensorImpl* before = w.impl();
  nested.read("weight", w);
  CHECK(w.impl() == before);
  CHECK(equal(w, d));
  std::string note;
  nested.read("note", note);
  CHECK(note == "hello");

  Tensor wrong = zeros({2, 2});
  KILN_CHECK_ERROR(in.read("f", wrong), path.c_str(), "'f' is f32[4]", "f32[2,2]");
  KILN_CHECK_ERROR(nested.read("missing", wrong), path.c_str(), "no tensor 'inner/missing'");
  KILN_CHECK_ERROR(in.read("pi", wrong), "'pi' is not a tensor");
  KILN_CHECK_ERROR(in.read("n", pi), "'n' is not a value of the type");
  Tensor untouched;
  CHECK(!in.try_read("absent", untouched));

  // Through streams too.
  std::stringstream stream;
  out.save_to(stream);
  InputArchive from_stream;
  from_stream.load_from(stream);
  Tensor again;
  from_stream.read("i", again);
  CHECK(bits_equal(again, i));
}

TEST_CASE("a damaged archive is an error naming the file") {
  OutputArchive out;
  out.write("x", arange(10).to(kFloat32));
  const std::string bytes = out.bytes();
  InputArchive in;
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  KILN_CHECK_ERROR(in.load_from_bytes(flipped, "flipped.pt"), "flipped.pt", "checksum");
  KILN_CHECK_ERROR(in.load_from_bytes(bytes.substr(0, bytes.size() - 9), "short.pt"), "short.pt");
  KILN_CHECK_ERROR(in.load_from_bytes("KILN-WEIGHTS\n" + bytes.substr(13), "other.pt"), "other.pt",
                   "Kiln archive file");
  KILN_CHECK_ERROR(in.load_from(temp_path("none.pt")), "none.pt");
}

TEST_CASE("a module saves into an archive and loads back in place") {
  manual_seed(0);
  nn::Sequential a(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::Linear(4, 2));
  nn::Sequential b(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::Linear(4, 2));
  a->forward(randn({5, 3}));  // moves the running statistics
  OutputArchive out;
  a->save(out);
  InputArchive in;
  in.load_from_bytes(out.bytes(), "module");
  CHECK(in.keys() == std::vector<std::string>{"0", "1", "2"});
  const Tensor w = b->named_parameters()[0].value();
  b->load(in);
  CHECK(b->named_parameters()[0].value().impl() == w.impl());
  for (size_t i = 0; i < a->named_parameters().size(); ++i)
    CHECK(equal(a->named_parameters()[i].value(), b->named_parameters()[i].value()));
  for (size_t i = 0; i < a->named_buffers().size(); ++i)
    CHECK(equal(a->named_buffers()[i].value(), b->named_buffers()[i].value()));
  nn::Sequential other(nn::Linear(3, 5));
  KILN_CHECK_ERROR(other->load(in), "'0/weight' is f32[4,3]");
}

TEST_CASE("an optimizer's state and learning rate round-trip, and the next step is the same") {
  auto make = [] {
    manual_seed(0);
    return nn::Linear(3, 2);
  };
  nn::Linear m1 = make(), m2 = make();
  optim::Adam o1(m1->parameters(), optim::AdamOptions(0.1).betas({0.5, 0.9}));
  optim::Adam o2(m2->parameters(), optim::AdamOptions(0.3));
  Tensor x = randn({4, 3});
  for (int i = 0; i < 3; ++i) {
    o1.zero_grad();
    m1(x).pow(2).sum().backward();
    o1.step();
  }
  for (auto& [name, p] : m2->named_parameters()) {
    NoGradGuard no_grad;
    p.copy_(m1->named_parameters()[name]);
  }
  OutputArchive out;
  o1.save(out);
  InputArchive in;
  in.load_from_bytes(out.bytes(), "adam");
  o2.load(in);
  CHECK(o2.lr() == 0.1);
  for (size_t i = 0; i < o1.state().size(); ++i) CHECK(equal(o1.state()[i], o2.state()[i]));
  // Same state, same hyperparameters for the next step (betas differ: set them alike).
  o2.options.betas({0.5, 0.9});
  for (auto pair : {std::make_pair(&m1, &o1), std::make_pair(&m2, &o2)}) {
    pair.second->zero_grad();
    (*pair.first)(x).pow(2).sum().backward();
    pair.second->step();
  }
  CHECK(equal(m1->weight, m2->weight));

  optim::SGD sgd(m1->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  KILN_CHECK_ERROR(sgd.load(in), "state of a Adam optimizer, this is a SGD");
  nn::Linear bigger(3, 5);
  optim::Adam wrong(bigger->parameters(), 0.1);
  KILN_CHECK_ERROR(wrong.load(in), "state tensor 1 is f32[2,3] in the archive, f32[5,3] here");
}

}  // namespace
}  // namespace kiln
