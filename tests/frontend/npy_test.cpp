// NumPy .npy files: round trips for every dtype, NumPy's exact bytes, and
// clear errors for what Kiln does not read.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frontend/npy.h"
#include "frontend/tensor_impl.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

std::string npy_dir() {
  fs::path d = fs::temp_directory_path() / ("kiln_npy_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  size_t n = static_cast<size_t>(x.numel()) * dtype_size(x.dtype());
  return n == 0 || std::memcmp(x.impl()->view().data, y.impl()->view().data, n) == 0;
}

// A .npy file's bytes from a header dict (padded as NumPy does) and raw data.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict + std::string(64 - (prefix + dict.size() + 1) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string f32_data(std::initializer_list<float> v) {
  return std::string(reinterpret_cast<const char*>(std::data(v)), v.size() * sizeof(float));
}

}  // namespace

TEST_CASE("npy: every dtype and rank round trips bit for bit") {
  std::string dir = npy_dir();
  manual_seed(5);
  std::vector<Tensor> cases = {
      randn({3, 4}),
      randn({2, 3, 2}, kFloat64),
      tensor({-7, 0, 2147483647}, kInt32),
      tensor({int64_t{-1}, int64_t{1} << 40}),
      tensor({true, false, true}),
      scalar_tensor(2.5),
      zeros({0, 3}),
      randn({4, 5}).t(),  // strided: written in C order
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string path = dir + "/t" + std::to_string(i) + ".npy";
    write_npy(path, cases[i]);
    Tensor back = read_npy(path);
    CHECK_MESSAGE(same_bytes(back, cases[i]), "case ", i, ": ", back.str());
  }
}

TEST_CASE("npy: writes exactly what numpy.save writes") {
  Tensor t = arange(0.0, 6.0).reshape({2, 3});
  std::string want = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                              f32_data({0, 1, 2, 3, 4, 5}));
  CHECK(want.size() == 128 + 24);  // np.save's 128-byte header for this array
  CHECK(npy_bytes(t) == want);
  CHECK(npy_bytes(tensor({1.f})).substr(10, 60).find("'shape': (1,), }") != std::string::npos);
  CHECK(npy_bytes(scalar_tensor(1.0)).find("'shape': (), }") != std::string::npos);
}

TEST_CASE("npy: reads version 2.0, Python 2 headers and 1-d Fortran order") {
  Tensor want = tensor({1.f, 2.f});
  Tensor a = parse_npy(
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32_data({1, 2}), 2),
      "v2.npy");
  CHECK(same_bytes(a, want));
  Tensor b = parse_npy(
      npy_file("{\"shape\": (2L,), \"fortran_order\": True, \"descr\": \"<f4\"}", f32_data({1, 2})),
      "py2.npy");
  CHECK(same_bytes(b, want));
}

TEST_CASE("npy: unsupported and malformed files are clear errors") {
  auto f32 = f32_data({1, 2, 3, 4});
  auto err = [&](const std::string& dict, const std::string& data = "") {
    return test::error_of([&] { parse_npy(npy_file(dict, data), "x.npy"); });
  };
  auto has = [](const std::string& msg, const char* piece) {
    CHECK_MESSAGE(msg.find(piece) != std::string::npos, msg, "\n  lacks: ", piece);
  };
  has(err("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", f32),
      "x.npy: fortran_order=True (column-major) arrays are not supported");
  has(err("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", f32),
      "big-endian data ('>f4') is not supported");
  has(err("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", f32),
      "dtype '<f2' is not supported (expected one of <f4 <f8 |u1 |i1 <i2 <i4 <i8 |b1)");
  has(err("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", f32),
      "structured dtypes");
  has(err("{'descr': '<f4', 'fortran_order': False, }", f32), "the header has no 'shape' key");
  has(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", f32),
      "unexpected key 'extra'");
  has(err("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,), }", f32),
      "malformed .npy header at column 35: expected True or False");
  has(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4, -1), }", f32),
      "expected a dimension");
  has(err("{'descr': '<f4' 'fortran_order': False, 'shape': (4,), }", f32),
      "expected ',' or '}' after the value of 'descr'");
  has(err("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", f32),
      "truncated: expected 20 bytes of data");
  has(err("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f32),
      "expected exactly 12 bytes of data");
  has(test::error_of([] { parse_npy("KILN-GRAPH\n", "y.npy"); }), "y.npy: not a NumPy .npy file");
  has(test::error_of([] { parse_npy(std::string("\x93NUMPY\x05\x00", 8), "y.npy"); }),
      "format version 5.0 is not supported");
  std::string cut = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f32);
  has(test::error_of([&] { parse_npy(cut.substr(0, 40), "y.npy"); }),
      "truncated: the header says it is 118 bytes long");
  has(test::error_of([&] { read_npy(npy_dir() + "/missing.npy"); }), "missing.npy: cannot open");
  has(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", f32),
      "x.npy: shape [4294967296,4294967296,2] is too large");
  has(test::error_of([] { read_npy("/dev/zero"); }), "/dev/zero: is a character device");
  // Any truncation of a valid file is an error, never a crash.
  for (size_t n = 0; n < cut.size(); ++n)
    CHECK_THROWS_AS(parse_npy(cut.substr(0, n), "cut.npy"), Error);
}

}  // namespace kiln
