// Dtypes and promotion, devices, shapes and broadcasting, errors and locations.
#include <doctest/doctest.h>

#include "ir/device.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/shape.h"

using namespace kiln;

TEST_CASE("dtype names, sizes and parsing") {
  CHECK(dtype_size(DType::b8) == 1);
  CHECK(dtype_size(DType::i32) == 4);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(dtype_size(DType::f32) == 4);
  CHECK(dtype_size(DType::f64) == 8);
  CHECK(dtype_size(DType::u8) == 1);
  CHECK(dtype_size(DType::i8) == 1);
  CHECK(dtype_size(DType::i16) == 2);
  for (DType t : kAllDTypes) {
    CHECK(parse_dtype(dtype_name(t)) == t);
    CHECK(parse_dtype(dtype_long_name(t)) == t);
  }
  CHECK(std::string(dtype_name(DType::b8)) == "bool");
  CHECK(std::string(dtype_long_name(DType::f32)) == "float32");
  CHECK_FALSE(parse_dtype("f16").has_value());
  CHECK(is_floating(DType::f64));
  CHECK_FALSE(is_floating(DType::i64));
  CHECK(is_integral(DType::b8));
  CHECK(dtype_of<float>() == DType::f32);
  CHECK(visit_dtype(DType::i64, [](auto x) { return sizeof(x); }) == 8);
  CHECK(std::string(dtype_name(DType::u8)) == "u8");
  CHECK(std::string(dtype_long_name(DType::i16)) == "int16");
  CHECK(parse_dtype("uint8") == DType::u8);
  CHECK(parse_dtype("i8") == DType::i8);
  CHECK(is_unsigned(DType::u8));
  CHECK_FALSE(is_unsigned(DType::i8));
  CHECK(dtype_of<uint8_t>() == DType::u8);
  CHECK(dtype_of<int16_t>() == DType::i16);
  CHECK(visit_dtype(DType::i16, [](auto x) { return sizeof(x); }) == 2);
}

// Every pair against c10::promoteTypes of libtorch 1.13 (rows and columns in
// kAllDTypes' order: bool, uint8, int8, int16, int32, int64, float32, float64).
TEST_CASE("promote_types matches libtorch's promoteTypes for every pair") {
  using D = DType;
  const D want[8][8] = {
      {D::b8, D::u8, D::i8, D::i16, D::i32, D::i64, D::f32, D::f64},
      {D::u8, D::u8, D::i16, D::i16, D::i32, D::i64, D::f32, D::f64},
      {D::i8, D::i16, D::i8, D::i16, D::i32, D::i64, D::f32, D::f64},
      {D::i16, D::i16, D::i16, D::i16, D::i32, D::i64, D::f32, D::f64},
      {D::i32, D::i32, D::i32, D::i32, D::i32, D::i64, D::f32, D::f64},
      {D::i64, D::i64, D::i64, D::i64, D::i64, D::i64, D::f32, D::f64},
      {D::f32, D::f32, D::f32, D::f32, D::f32, D::f32, D::f32, D::f64},
      {D::f64, D::f64, D::f64, D::f64, D::f64, D::f64, D::f64, D::f64},
  };
  for (size_t i = 0; i < 8; ++i)
    for (size_t j = 0; j < 8; ++j) {
      CAPTURE(dtype_name(kAllDTypes[i]));
      CAPTURE(dtype_name(kAllDTypes[j]));
      CHECK(promote_types(kAllDTypes[i], kAllDTypes[j]) == want[i][j]);
    }
  CHECK(promote_with_scalar(DType::u8, ScalarKind::integer) == DType::u8);
  CHECK(promote_with_scalar(DType::i8, ScalarKind::floating) == DType::f32);
}

TEST_CASE("promote_types matches torch.promote_types") {
  struct Row {
    DType a, b, want;
  };
  const Row rows[] = {
      {DType::b8, DType::b8, DType::b8},    {DType::b8, DType::i32, DType::i32},
      {DType::b8, DType::f32, DType::f32},  {DType::i32, DType::i32, DType::i32},
      {DType::i32, DType::i64, DType::i64}, {DType::i64, DType::f32, DType::f32},
      {DType::i32, DType::f64, DType::f64}, {DType::f32, DType::f64, DType::f64},
      {DType::f32, DType::f32, DType::f32}, {DType::i64, DType::b8, DType::i64},
  };
  for (const Row& r : rows) {
    CAPTURE(dtype_name(r.a));
    CAPTURE(dtype_name(r.b));
    CHECK(promote_types(r.a, r.b) == r.want);
    CHECK(promote_types(r.b, r.a) == r.want);
  }
}

TEST_CASE("promote_with_scalar follows PyTorch's Python-scalar rule") {
  CHECK(promote_with_scalar(DType::i32, ScalarKind::integer) == DType::i32);
  CHECK(promote_with_scalar(DType::i32, ScalarKind::floating) == DType::f32);
  CHECK(promote_with_scalar(DType::i64, ScalarKind::floating) == DType::f32);
  CHECK(promote_with_scalar(DType::f64, ScalarKind::floating) == DType::f64);
  CHECK(promote_with_scalar(DType::f32, ScalarKind::integer) == DType::f32);
  CHECK(promote_with_scalar(DType::b8, ScalarKind::integer) == DType::i64);
  CHECK(promote_with_scalar(DType::b8, ScalarKind::boolean) == DType::b8);
  CHECK(promote_with_scalar(DType::b8, ScalarKind::floating) == DType::f32);
  CHECK(promote_with_scalar(DType::i32, ScalarKind::boolean) == DType::i32);
}

TEST_CASE("devices print as cpu and cuda:N") {
  CHECK(Device().str() == "cpu");
  CHECK(Device(kCUDA).str() == "cuda:0");
  CHECK(Device(kCUDA, 1).str() == "cuda:1");
  CHECK(Device(kCUDA) != Device(kCPU));
  CHECK(TensorType{DType::f32, {64, 100}, {}}.str() == "f32[64,100]");
  CHECK(TensorType{DType::f32, {64}, Device(kCUDA)}.str() == "cuda:f32[64]");
  CHECK(TensorType{DType::b8, {}, Device(kCUDA, 2)}.str() == "cuda:2:bool[]");
}

TEST_CASE("numel, strides and contiguity") {
  CHECK(numel({}) == 1);
  CHECK(numel({2, 3, 4}) == 24);
  CHECK(numel({2, 0}) == 0);
  CHECK(contiguous_strides({2, 3, 4}) == Strides{12, 4, 1});
  CHECK(contiguous_strides({}).empty());
  CHECK(is_contiguous({2, 3}, {3, 1}));
  CHECK_FALSE(is_contiguous({2, 3}, {1, 2}));
  CHECK(is_contiguous({2, 1, 3}, {3, 99, 1}));  // size-1 dims' strides never matter
  CHECK(shape_str({64, 100}) == "[64,100]");
  CHECK(shape_str({}) == "[]");
}

TEST_CASE("sizes, strides and byte counts that overflow int64 are errors, not wrapped numbers") {
  const int64_t big = (int64_t(1) << 62) + 1;
  CHECK_THROWS_WITH_AS(numel({big, 4}),
                       doctest::Contains("shape [4611686018427387905,4] is too large"), Error);
  CHECK_THROWS_AS(numel({int64_t(1) << 40, int64_t(1) << 40}), Error);
  CHECK(numel({int64_t(1) << 40, 0, int64_t(1) << 40}) == 0);
  CHECK(numel({int64_t(1) << 31, int64_t(1) << 31}) == int64_t(1) << 62);
  CHECK_THROWS_WITH_AS(byte_size({int64_t(1) << 62}, 4), doctest::Contains("byte size"), Error);
  CHECK(byte_size({3, 5}, 8) == 120);
  CHECK_THROWS_WITH_AS(byte_size({2, -1}, 4), doctest::Contains("negative dimension"), Error);
  CHECK_THROWS_AS(contiguous_strides({int64_t(1) << 40, int64_t(1) << 40, 2}), Error);
  CHECK_THROWS_WITH_AS(checked_mul(int64_t(1) << 62, 4, "offset"),
                       doctest::Contains("offset overflows"), Error);
  CHECK(checked_mul(-3, 5, "x") == -15);
  CHECK_THROWS_AS(checked_add(INT64_MAX, 1, "extent"), Error);
  CHECK_THROWS_AS(infer_reshape({int64_t(1) << 40, int64_t(1) << 40, -1}, 0), Error);
  CHECK_THROWS_AS((TensorType{DType::f64, {int64_t(1) << 61}, {}}.bytes()), Error);
}

TEST_CASE("broadcasting") {
  CHECK(broadcast_shapes({3, 1}, {4}) == Shape{3, 4});
  CHECK(broadcast_shapes({}, {2, 3}) == Shape{2, 3});
  CHECK(broadcast_shapes({5, 1, 4}, {3, 1}) == Shape{5, 3, 4});
  CHECK(broadcast_shapes({0}, {1}) == Shape{0});
  CHECK_THROWS_WITH_AS(broadcast_shapes({3}, {4}), "shapes [3] and [4] cannot be broadcast", Error);
  CHECK(broadcastable({3, 1}, {2, 3, 4}));
  CHECK(broadcastable({}, {2}));
  CHECK_FALSE(broadcastable({2, 3}, {3}));
  CHECK_FALSE(broadcastable({3}, {4}));
}

TEST_CASE("dims and reshape inference") {
  CHECK(normalize_dim(-1, 3) == 2);
  CHECK(normalize_dim(0, 3) == 0);
  CHECK_THROWS_WITH_AS(normalize_dim(3, 2),
                       "dim 3 is out of range for a tensor of rank 2 (expected -2..1)", Error);
  CHECK_THROWS_AS(normalize_dim(0, 0), Error);
  CHECK(normalize_dims({-1, 0, 2}, 3) == std::vector<int64_t>{0, 2});
  CHECK(infer_reshape({-1, 4}, 12) == Shape{3, 4});
  CHECK(infer_reshape({2, 6}, 12) == Shape{2, 6});
  CHECK(infer_reshape({-1}, 0) == Shape{0});
  CHECK_THROWS_WITH_AS(infer_reshape({5, 2}, 12),
                       doctest::Contains("shape [5,2] is invalid for a tensor of 12 elements"),
                       Error);
  CHECK_THROWS_WITH_AS(infer_reshape({-1, -1}, 4), doctest::Contains("more than one -1"), Error);
  CHECK_THROWS_WITH_AS(infer_reshape({-1, 5}, 12), doctest::Contains("invalid"), Error);
}

TEST_CASE("SourceLoc and Error text") {
  SourceLoc loc("/a/b/mlp.cpp", 12);
  CHECK(loc.str() == "mlp.cpp:12");
  CHECK(SourceLoc().str() == "<unknown>");
  CHECK(SourceLoc::from(std::source_location::current()).known());

  Error plain("boom");
  CHECK(std::string(plain.what()) == "boom");
  CHECK(plain.message() == "boom");

  Error located("item() inside a trace", loc);
  CHECK(std::string(located.what()) == "item() inside a trace\n  at mlp.cpp:12");
  CHECK(located.message() == "item() inside a trace");
  CHECK(located.where() == loc);

  Error e("shapes [3] and [4] cannot be broadcast");
  e.attach(loc, "add");
  CHECK(std::string(e.what()) ==
        "add: shapes [3] and [4] cannot be broadcast\n  recorded at mlp.cpp:12");
  CHECK(e.message() == "add: shapes [3] and [4] cannot be broadcast");
  e.attach(SourceLoc("other.cpp", 1), "mul");  // the first attachment wins
  CHECK(std::string(e.what()) ==
        "add: shapes [3] and [4] cannot be broadcast\n  recorded at mlp.cpp:12");

  Error named("add: already named");
  named.attach(SourceLoc(), "add");
  CHECK(std::string(named.what()) == "add: already named");
  named.attach(loc);  // a location can still come later
  CHECK(std::string(named.what()) == "add: already named\n  recorded at mlp.cpp:12");

  CHECK_THROWS_WITH_AS(KILN_CHECK(1 + 1 == 3, "expected ", 3, ", got ", 2), "expected 3, got 2",
                       Error);
  const char* a = intern_string("x.cpp");
  CHECK(a == intern_string(std::string("x.cpp")));
}
