// uint8, int8 and int16 tensors against PyTorch 1.13's results for the same
// inputs (the numbers below are its outputs): wrapping arithmetic, unsigned
// comparisons and reductions, fmod/remainder, abs/neg/sign, type promotion
// (uint8 with int8 is int16), conversions from floats (through int64,
// wrapping), sums into int64; eagerly and traced; and .npy, archive and
// safetensors round trips, item(), accessor and from_blob.
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "frontend/archive.h"
#include "frontend/npy.h"
#include "frontend/safetensors.h"
#include "test_util.h"

namespace kiln {
namespace {

Tensor ints(std::vector<int64_t> v, DType t) {
  return tensor(v).to(t);
}

std::vector<int64_t> values(const Tensor& t) {
  return t.to(kInt64).to_vector<int64_t>();
}

// f(a, b) eagerly, and traced (compiled by the CPU backend).
template <class F>
void both_ways(F f, const Tensor& a, const Tensor& b, const std::vector<int64_t>& want,
               DType want_dtype) {
  Tensor eager = f(a, b);
  CHECK(eager.dtype() == want_dtype);
  CHECK(values(eager) == want);
  auto traced = jit([f](Tensor x, Tensor y) { return f(x, y); }, "small_int");
  Tensor t = traced(a, b);
  CHECK(t.dtype() == want_dtype);
  CHECK(values(t) == want);
}

TEST_CASE("uint8 wraps, compares and reduces unsigned, as PyTorch's") {
  const Tensor a = ints({200, 100, 7, 255, 0, 128}, kUInt8),
               b = ints({100, 200, 255, 2, 9, 3}, kUInt8);
  CHECK(a.dtype() == kUInt8);
  both_ways([](Tensor x, Tensor y) { return x + y; }, a, b, {44, 44, 6, 1, 9, 131}, kUInt8);
  both_ways([](Tensor x, Tensor y) { return x - y; }, a, b, {100, 156, 8, 253, 247, 125}, kUInt8);
  both_ways([](Tensor x, Tensor y) { return x * y; }, a, b, {32, 32, 249, 254, 0, 128}, kUInt8);
  both_ways([](Tensor x, Tensor y) { return x.fmod(y); }, a, b, {0, 100, 7, 1, 0, 2}, kUInt8);
  both_ways([](Tensor x, Tensor y) { return x.remainder(y); }, a, b, {0, 100, 7, 1, 0, 2}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.neg(); }, a, b, {56, 156, 249, 1, 0, 128}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.abs(); }, a, b, {200, 100, 7, 255, 0, 128}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.sign(); }, a, b, {1, 1, 1, 1, 0, 1}, kUInt8);
  both_ways([](Tensor x, Tensor y) { return x.lt(y); }, a, b, {0, 1, 1, 0, 1, 0}, kBool);
  both_ways([](Tensor x, Tensor y) { return x.maximum(y); }, a, b, {200, 200, 255, 255, 9, 128},
            kUInt8);
  both_ways([](Tensor x, Tensor) { return x.max(); }, a, b, {255}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.argmax(); }, a, b, {3}, kInt64);
  both_ways([](Tensor x, Tensor) { return x.sum(); }, a, b, {690}, kInt64);
  both_ways([](Tensor x, Tensor) { return x.mul(3); }, a, b, {88, 44, 21, 253, 0, 128}, kUInt8);
  both_ways(
      [](Tensor x, Tensor y) {
        return x.pow(ints({2, 3, 1, 2, 5, 1}, kUInt8));
      },
      a, b, {64, 64, 7, 1, 0, 128}, kUInt8);
  CHECK(a.mul(2.5).dtype() == kFloat32);
  CHECK(a.div(2).dtype() == kFloat32);
}

TEST_CASE("int8 and int16 wrap; promotion and conversions follow PyTorch") {
  const Tensor c = ints({-128, 127, -7, 5, -1, 100}, kInt8), d = ints({-1, 1, 2, -3, 2, 7}, kInt8);
  both_ways([](Tensor x, Tensor y) { return x + y; }, c, d, {127, -128, -5, 2, 1, 107}, kInt8);
  both_ways([](Tensor x, Tensor y) { return x.fmod(y); }, c, d, {0, 0, -1, 2, -1, 2}, kInt8);
  both_ways([](Tensor x, Tensor y) { return x.remainder(y); }, c, d, {0, 0, 1, -1, 1, 2}, kInt8);
  both_ways([](Tensor x, Tensor) { return x.abs(); }, c, d, {-128, 127, 7, 5, 1, 100}, kInt8);
  both_ways([](Tensor x, Tensor) { return x.neg(); }, c, d, {-128, -127, 7, -5, 1, -100}, kInt8);

  const Tensor a = ints({200, 100, 7, 255, 0, 128}, kUInt8);
  both_ways([](Tensor x, Tensor y) { return x + y; }, a, c, {72, 227, 0, 260, -1, 228}, kInt16);
  CHECK((a * ints({1000, 1000, 1000, 1000, 1000, 1000}, kInt16)).dtype() == kInt16);
  CHECK(promote_types(kUInt8, kInt8) == kInt16);
  CHECK(promote_types(kUInt8, kInt32) == kInt32);
  CHECK(promote_types(kInt8, kInt16) == kInt16);
  CHECK(promote_types(kBool, kUInt8) == kUInt8);
  CHECK(promote_types(kInt16, kFloat32) == kFloat32);
  CHECK(promote_types(kInt8, kFloat64) == kFloat64);

  const Tensor f = tensor({-1.0f, 300.7f, 255.9f, -129.5f, 0.5f, 65535.0f});
  both_ways([](Tensor x, Tensor) { return x.to(kUInt8); }, f, f, {255, 44, 255, 127, 0, 255},
            kUInt8);
  both_ways([](Tensor x, Tensor) { return x.to(kInt8); }, f, f, {-1, 44, -1, 127, 0, -1}, kInt8);
  both_ways([](Tensor x, Tensor) { return x.to(kInt16); }, f, f, {-1, 300, 255, -129, 0, -1},
            kInt16);
  both_ways([](Tensor x, Tensor) { return x.to(kInt8); }, a, a, {-56, 100, 7, -1, 0, -128}, kInt8);
  both_ways([](Tensor x, Tensor) { return x.to(kUInt8); }, c, c, {128, 127, 249, 5, 255, 100},
            kUInt8);
  CHECK(a.to(kFloat32).to_vector<float>() == std::vector<float>{200, 100, 7, 255, 0, 128});
  const Tensor s = ints({30000, 30000, 30000}, kInt16);
  CHECK(s.sum().item<int64_t>() == 90000);
  CHECK(values(s.narrow(0, 0, 1) + s.narrow(0, 1, 1)) == std::vector<int64_t>{-5536});
}

TEST_CASE("small integer tensors in files, item(), accessor and from_blob") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln_small_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(dir);
  for (DType t : {kUInt8, kInt8, kInt16}) {
    CAPTURE(dtype_name(t));
    const Tensor x = ints({-3, 0, 250, 7}, t).reshape({2, 2});
    write_npy(dir + "/x.npy", x);
    CHECK(read_npy(dir + "/x.npy").dtype() == t);
    CHECK(equal(read_npy(dir + "/x.npy"), x));
    serialize::OutputArchive out;
    out.write("x", x);
    serialize::InputArchive in;
    in.load_from_bytes(out.bytes(), "archive");
    Tensor back;
    in.read("x", back);
    CHECK(back.dtype() == t);
    CHECK(equal(back, x));
    write_safetensors(dir + "/x.safetensors", {{"x", x}});
    CHECK(read_safetensors(dir + "/x.safetensors").at("x").dtype() == t);
  }
  std::filesystem::remove_all(dir);
  CHECK(ints({250}, kUInt8).item<uint8_t>() == 250);
  CHECK(ints({-5}, kInt8).item<int8_t>() == -5);
  CHECK(ints({-300}, kInt16).item<int16_t>() == -300);
  CHECK(ints({250}, kUInt8).item().toLong() == 250);
  std::vector<uint8_t> pixels = {0, 128, 255, 7};
  Tensor img = from_blob(pixels.data(), {2, 2}, kUInt8);
  auto acc = img.accessor<uint8_t, 2>();
  CHECK(acc[1][0] == 255);
  CHECK(img.to(kFloat32).div(255).to_vector<float>()[2] == 1.0f);
  CHECK(parse_dtype("uint8") == kUInt8);
  CHECK(parse_dtype("i16") == kInt16);
}

// Creation, selection, sorting and products of small integers; every number is
// what libtorch 1.13 gives for the same call.
TEST_CASE("small integers through creation, where, cat, sort, clamp and matmul") {
  const Tensor a = tensor(std::vector<uint8_t>{200, 100, 7});
  CHECK(a.dtype() == kUInt8);
  CHECK(tensor(std::vector<int8_t>{-1, 2}).dtype() == kInt8);
  CHECK(tensor(std::vector<int16_t>{-1, 2}).dtype() == kInt16);
  CHECK(tensor(std::vector<int>{1, 2}).dtype() == kInt64);
  const Tensor c = tensor({-128, 127, -7}, kInt8);
  CHECK(c.dtype() == kInt8);
  CHECK(values(full({2}, -1, kUInt8)) == std::vector<int64_t>{255, 255});
  CHECK(values(arange(250, 256, 1, kUInt8)) == std::vector<int64_t>{250, 251, 252, 253, 254, 255});
  CHECK(values(ones({2}, kInt16)) == std::vector<int64_t>{1, 1});
  const Tensor r = randint(0, 256, {64}, kUInt8);
  CHECK(r.dtype() == kUInt8);
  CHECK(r.to(kInt64).max().item<int64_t>() <= 255);
  KILN_CHECK_ERROR(randint(-1, 5, {2}, kUInt8), "randint: the range [-1, 5) does not fit dtype u8");
  KILN_CHECK_ERROR(randint(0, 129, {2}, kInt8), "does not fit dtype i8 (expected values from -128 to 127)");
  CHECK(randint(-32768, 32768, {8}, kInt16).dtype() == kInt16);
  both_ways([](Tensor x, Tensor y) { return where(x.gt(50), x, y); }, a, c, {200, 100, -7}, kInt16);
  both_ways(
      [](Tensor x, Tensor y) {
        return cat({x, y});
      },
      a, c, {200, 100, 7, -128, 127, -7}, kInt16);
  both_ways([](Tensor x, Tensor) { return std::get<0>(x.sort()); }, c, c, {-128, -7, 127}, kInt8);
  both_ways([](Tensor x, Tensor) { return std::get<0>(x.sort()); }, a, a, {7, 100, 200}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.argsort(0, true); }, a, a, {0, 1, 2}, kInt64);
  both_ways([](Tensor x, Tensor) { return x.cumsum(0); }, a, a, {200, 300, 307}, kInt64);
  // Long lines sort by radix on each type's order (uint8 unsigned, int8/int16 signed).
  for (DType t : {kUInt8, kInt8, kInt16}) {
    CAPTURE(dtype_name(t));
    std::vector<int64_t> v(600);
    for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i * 7919 % 600) - 300;
    const Tensor x = ints(v, t);
    std::vector<int64_t> want = values(x);
    std::sort(want.begin(), want.end());
    both_ways([](Tensor y, Tensor) { return std::get<0>(y.sort()); }, x, x, want, t);
  }
  both_ways([](Tensor x, Tensor) { return x.clamp(10, 150); }, a, a, {150, 100, 10}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.relu(); }, c, c, {0, 127, 0}, kInt8);
  both_ways([](Tensor x, Tensor) { return x.add(300); }, a, a, {244, 144, 51}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.eq(200); }, a, a, {1, 0, 0}, kBool);
  both_ways([](Tensor x, Tensor) { return x.to(kInt8).eq(200); }, a, a, {1, 0, 0}, kBool);
  both_ways([](Tensor x, Tensor) { return x.matmul(x); }, a, a, {129}, kUInt8);
  both_ways([](Tensor x, Tensor) { return x.sum(); }, c, c, {-8}, kInt64);
  const Tensor idx = tensor({2, 0, 2});
  both_ways([idx](Tensor x, Tensor) { return x.index_select(0, idx); }, a, a, {7, 200, 7}, kUInt8);
  both_ways([idx](Tensor x, Tensor) { return x.gather(0, idx); }, c, c, {-7, -128, -7}, kInt8);
  both_ways([idx](Tensor x, Tensor y) { return x.index_add(0, idx, y); }, a, a, {44, 100, 214}, kUInt8);
  both_ways([idx](Tensor x, Tensor y) { return x.scatter_add(0, idx, y); }, c, c, {-1, 127, 114},
            kInt8);
  both_ways([](Tensor x, Tensor) { return x.argmin(); }, c, c, {0}, kInt64);
  both_ways([](Tensor x, Tensor) { return x.prod(); }, a, a, {140000}, kInt64);
  both_ways([](Tensor x, Tensor y) { return x.pow(y); }, c, tensor({-1, 2, -2}, kInt8), {0, 1, 0},
            kInt8);
  CHECK(a.div(3).dtype() == kFloat32);
  CHECK((ints({-3, 5}, kInt16) * 1.5).dtype() == kFloat32);
  CHECK(a.mul(tensor({1.5f})).to_vector<float>() == std::vector<float>{300, 150, 10.5f});
}

// PyTorch's result_type: a 0-d tensor beside a tensor with dims decides the
// dtype only when of a higher category (bool < integer < floating); the dtypes
// below are libtorch 1.13's.
TEST_CASE("a 0-d tensor operand promotes by category, as PyTorch's result_type") {
  CHECK((ones({2}) + tensor(1.0, kFloat64)).dtype() == kFloat32);
  CHECK((ones({2}, kInt32) + tensor(1.0, kFloat64)).dtype() == kFloat64);
  CHECK((ones({2}, kBool) + tensor(1, kInt64)).dtype() == kInt64);
  CHECK((ones({2}, kInt16) + tensor(1, kUInt8)).dtype() == kInt16);
  CHECK((tensor(1, kUInt8) * ones({2}, kInt16)).dtype() == kInt16);
  CHECK((tensor(2.0, kFloat64) + tensor(1, kInt32)).dtype() == kFloat64);  // both 0-d
  CHECK(where(ones({2}, kBool), ones({2}, kUInt8), tensor(-1.5, kFloat64)).dtype() == kFloat64);
  CHECK(where(ones({2}, kBool), ones({2}), tensor(-1.5, kFloat64)).dtype() == kFloat32);
  const Tensor a = tensor(std::vector<uint8_t>{200, 100, 7});
  both_ways([](Tensor x, Tensor y) { return x + y; }, a, tensor(300, kInt64), {244, 144, 51}, kUInt8);
  both_ways([](Tensor x, Tensor y) { return x.lt(y); }, a, tensor(-1, kInt64), {1, 1, 1}, kBool);
  both_ways([](Tensor x, Tensor y) { return x.mul(y); }, a.to(kInt32), tensor(2, kInt64), {400, 200, 14},
            kInt32);
  // Gradients reach a 0-d f64 weight in its own dtype.
  Tensor x = tensor({1.0f, 2.0f}).requires_grad_();
  Tensor w = tensor(3.0, kFloat64).requires_grad_();
  Tensor y = x * w;
  CHECK(y.dtype() == kFloat32);
  y.sum().backward();
  CHECK(w.grad().dtype() == kFloat64);
  CHECK(w.grad().item<double>() == 3.0);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 3});
}

// full, fill_, tensor(..., dtype) and clamp's bounds refuse values their dtype
// cannot hold, as libtorch does ("value cannot be converted to type uint8_t
// without overflow"); uint8 takes -255..-1, wrapping, as libtorch's does.
TEST_CASE("values that do not fit a small integer dtype are errors") {
  KILN_CHECK_ERROR(full({2}, 300, kUInt8), "full(): the value 300 does not fit dtype uint8",
                   "expected a value from 0 to 255");
  KILN_CHECK_ERROR(full({2}, -129, kInt8), "the value -129 does not fit dtype int8",
                   "expected a value from -128 to 127");
  KILN_CHECK_ERROR(full({2}, 255.5, kUInt8), "the value 255.5 does not fit dtype uint8");
  KILN_CHECK_ERROR(full({2}, -1.0, kUInt8), "the value -1 does not fit dtype uint8");
  KILN_CHECK_ERROR(full({2}, int64_t(1) << 40, kInt32), "does not fit dtype int32");
  KILN_CHECK_ERROR(full({2}, 40000, kInt16), "does not fit dtype int16");
  KILN_CHECK_ERROR(full({2}, NAN, kInt16), "the value nan does not fit dtype int16");
  KILN_CHECK_ERROR(tensor({300}, kUInt8), "tensor(): the value 300 does not fit dtype uint8");
  KILN_CHECK_ERROR(tensor(std::vector<int>{1, 70000}, kInt16), "tensor(): the value 70000");
  KILN_CHECK_ERROR(zeros({2}, kUInt8).fill_(300),
                   "fill_(): the value 300 does not fit dtype uint8");
  KILN_CHECK_ERROR(zeros({2}, kUInt8).clamp(0, 300),
                   "clamp(): the value 300 does not fit dtype uint8");
  Tensor z = zeros({2}, kUInt8);
  KILN_CHECK_ERROR(z[0] = 300, "does not fit dtype uint8");
  CHECK(values(full({2}, -255, kUInt8)) == std::vector<int64_t>{1, 1});
  CHECK(values(full({1}, 2, kBool)) == std::vector<int64_t>{1});
  CHECK(values(zeros({2}, kUInt8).clamp(-5, 3)) ==
        std::vector<int64_t>{3, 3});  // max(0, 251), then min(., 3)
  CHECK(zeros({2}, kUInt8).clamp(0.5, 300.5).dtype() == kFloat32);
  CHECK(values(full({1}, int64_t(1) << 40, kInt64)) == std::vector<int64_t>{int64_t(1) << 40});
}

}  // namespace
}  // namespace kiln
