// split_column_sums: IR text in, expected IR text out; the split graph computes
// the one sum's values (the interpreter runs the reference kernels).
#include <doctest/doctest.h>

#include <cmath>

#include "pass_test_util.h"
#include "passes/split_column_sums.h"

using namespace kiln;
using passtest::ir;
using passtest::run_on;

TEST_CASE("split_column_sums sums chunks of rows, then the chunks") {
  // 256 rows of 1024: 8 chunks of 32 rows.
  CHECK(run_on(split_column_sums, R"(
    %x = arg {index=0} : f32[256,1024]
    %y = sum %x {dims=[0], keepdim=0}
    return %y
  )") == "%0 = arg {index=0} : f32[256,1024]\n"
         "%1 = reshape %0 {shape=[8,32,1024]} : f32[8,32,1024]\n"
         "%2 = sum %1 {dims=[1], keepdim=0} : f32[8,1024]\n"
         "%3 = sum %2 {dims=[0], keepdim=0} : f32[1024]\n"
         "return %3\n");
}

TEST_CASE("split_column_sums pads the last chunk with zero rows and keeps the sum's shape") {
  // 70 * 9 = 630 rows of 600 columns: chunks of at most 54 rows, so 12 of 53, 6 rows of padding.
  const std::string out = run_on(split_column_sums, R"(
    %x = arg {index=0} : f64[70,9,3,200]
    %y = sum %x {dims=[0,1], keepdim=1}
    return %y
  )");
  CHECK(out.find("reshape %0 {shape=[630,600]}") != std::string::npos);
  CHECK(out.find("pad %1 {dim=0, low=0, high=6, interior=0} : f64[636,600]") != std::string::npos);
  CHECK(out.find("reshape %2 {shape=[12,53,600]}") != std::string::npos);
  CHECK(out.find("sum %3 {dims=[1], keepdim=0} : f64[12,600]") != std::string::npos);
  CHECK(out.find("sum %4 {dims=[0], keepdim=0} : f64[600]") != std::string::npos);
  CHECK(out.find(": f64[1,1,3,200]\nreturn") != std::string::npos);
}

TEST_CASE("split_column_sums leaves other sums alone") {
  for (const char* text : {
           // too few rows for four chunks, rows wider than 4096 columns, few columns
           "%0 = arg {index=0} : f32[127,1024]\n%1 = sum %0 {dims=[0], keepdim=0} : "
           "f32[1024]\nreturn %1\n",
           "%0 = arg {index=0} : f32[300,4097]\n%1 = sum %0 {dims=[0], keepdim=0} : "
           "f32[4097]\nreturn %1\n",
           "%0 = arg {index=0} : f32[100000,15]\n%1 = sum %0 {dims=[0], keepdim=0} : "
           "f32[15]\nreturn %1\n",
           // not the leading dims, all dims, an integer sum, a max
           "%0 = arg {index=0} : f32[8,256,1024]\n%1 = sum %0 {dims=[1], keepdim=0} : "
           "f32[8,1024]\nreturn %1\n",
           "%0 = arg {index=0} : f32[256,1024]\n%1 = sum %0 {dims=[0,1], keepdim=0} : "
           "f32[]\nreturn %1\n",
           "%0 = arg {index=0} : i64[256,1024]\n%1 = sum %0 {dims=[0], keepdim=0} : "
           "i64[1024]\nreturn %1\n",
           "%0 = arg {index=0} : f32[256,1024]\n%1 = max %0 {dims=[0], keepdim=0} : "
           "f32[1024]\nreturn %1\n",
       }) {
    CAPTURE(text);
    CHECK(run_on(split_column_sums, text) == text);
  }
  CHECK(column_sum_rows_per_chunk({256, 1024}, {0}) == 32);
  CHECK(column_sum_rows_per_chunk({128, 1024}, {0}) == 32);
  CHECK(column_sum_rows_per_chunk({127, 1024}, {0}) == 0);
  CHECK(column_sum_rows_per_chunk({7711, 17}, {0}) == 1543);
  CHECK(column_sum_rows_per_chunk({2049, 33}, {0}) == 0);
  CHECK(column_sum_rows_per_chunk({256, 1024}, {1}) == 0);
}

TEST_CASE("a split column sum computes the one sum's values, f32 and f64") {
  for (const char* type : {"f32[256,1024]", "f32[7711,17]", "f64[4099,33]", "f64[70,9,600]"}) {
    const std::string t = type;
    const std::string dims = t.find(",9,") != std::string::npos ? "[0,1]" : "[0]";
    const std::string text =
        "%0 = arg {index=0} : " + t + "\n%1 = sum %0 {dims=" + dims + ", keepdim=0}\nreturn %1\n";
    CAPTURE(text);
    const Graph before = ir(text), after = split_column_sums(before);
    REQUIRE(after.size() > before.size());
    passtest::Inputs in = passtest::random_inputs(before, 3);
    const HostArray a = interpret(before, in.args, in.params).at(0);
    const HostArray b = interpret(after, in.args, in.params).at(0);
    REQUIRE(a.type == b.type);
    const double tol = t[1] == '3' ? 1e-4 : 1e-12;
    for (int64_t i = 0; i < a.type.numel(); ++i) {
      const double x = a.type.dtype == DType::f32 ? a.data<float>()[i] : a.data<double>()[i];
      const double y = b.type.dtype == DType::f32 ? b.data<float>()[i] : b.data<double>()[i];
      CHECK(std::abs(x - y) <= tol * (1 + std::abs(x)));
    }
  }
}
