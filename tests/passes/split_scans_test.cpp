// split_scans: IR text in, expected IR text out; the split graph computes the
// one scan's bits (the interpreter runs the reference kernels, which fold long
// lines in the same chunks).
#include <doctest/doctest.h>

#include <cstring>

#include "ir/scan_chunks.h"
#include "pass_test_util.h"
#include "passes/split_scans.h"

using namespace kiln;
using passtest::ir;
using passtest::run_on;

TEST_CASE("split_scans folds a long line in chunks: the chunks, their totals, then the carry") {
  // 100000 = 6 chunks of 16384 and 1696 more: padded to 7 chunks after the end.
  CHECK(run_on(split_scans, R"(
    %x = arg {index=0} : f32[100000]
    %y = cumsum %x {dim=0, reverse=0}
    return %y
  )") == "%0 = arg {index=0} : f32[100000]\n"
         "%1 = reshape %0 {shape=[1,100000]} : f32[1,100000]\n"
         "%2 = pad %1 {dim=1, low=0, high=14688, interior=0} : f32[1,114688]\n"
         "%3 = reshape %2 {shape=[1,7,16384]} : f32[1,7,16384]\n"
         "%4 = cumsum %3 {dim=2, reverse=0} : f32[1,7,16384]\n"
         "%5 = slice %4 {dim=2, start=16383, end=16384, step=1} : f32[1,7,1]\n"
         "%6 = cumsum %5 {dim=1, reverse=0} : f32[1,7,1]\n"
         "%7 = slice %6 {dim=1, start=0, end=6, step=1} : f32[1,6,1]\n"
         "%8 = pad %7 {dim=1, low=1, high=0, interior=0} : f32[1,7,1]\n"
         "%9 = expand %8 {shape=[1,7,16384]} : f32[1,7,16384]\n"
         "%10 = add %9, %4 : f32[1,7,16384]\n"
         "%11 = arange {start=0.0, step=1.0} : i64[7]\n"
         "%12 = constant {value=0.0} : i64[]\n"
         "%13 = eq %11, %12 : bool[7]\n"
         "%14 = reshape %13 {shape=[1,7,1]} : bool[1,7,1]\n"
         "%15 = expand %14 {shape=[1,7,16384]} : bool[1,7,16384]\n"
         "%16 = where %15, %4, %10 : f32[1,7,16384]\n"
         "%17 = reshape %16 {shape=[1,114688]} : f32[1,114688]\n"
         "%18 = slice %17 {dim=1, start=0, end=100000, step=1} : f32[1,100000]\n"
         "%19 = reshape %18 {shape=[100000]} : f32[100000]\n"
         "return %19\n");
}

TEST_CASE("split_scans pads before a reverse scan's line, and carries from the chunk after") {
  const std::string out = run_on(split_scans, R"(
    %x = arg {index=0} : f64[2,70000,1]
    %y = cumprod %x {dim=1, reverse=1}
    return %y
  )");
  CHECK(out.find("pad %1 {dim=1, low=11920, high=0, interior=0} : f64[2,81920]") !=
        std::string::npos);
  CHECK(out.find("cumprod %3 {dim=2, reverse=1} : f64[2,5,16384]") != std::string::npos);
  CHECK(out.find("slice %4 {dim=2, start=0, end=1, step=1}") != std::string::npos);
  CHECK(out.find("slice %6 {dim=1, start=1, end=5, step=1}") != std::string::npos);
  CHECK(out.find("pad %7 {dim=1, low=0, high=1, interior=0}") != std::string::npos);
  CHECK(out.find("mul %9, %4") != std::string::npos);
  CHECK(out.find("constant {value=4.0} : i64[]") != std::string::npos);
  CHECK(out.find("slice %17 {dim=1, start=11920, end=81920, step=1}") != std::string::npos);
}

TEST_CASE("split_scans leaves short lines, strided lines and many lines alone") {
  for (const char* text : {
           "%0 = arg {index=0} : f32[65535]\n%1 = cumsum %0 {dim=0, reverse=0} : "
           "f32[65535]\nreturn %1\n",
           "%0 = arg {index=0} : f32[70000,2]\n%1 = cumsum %0 {dim=0, reverse=0} : "
           "f32[70000,2]\nreturn %1\n",
           "%0 = arg {index=0} : f32[64,65536]\n%1 = cumsum %0 {dim=1, reverse=0} : "
           "f32[64,65536]\nreturn %1\n",
       }) {
    CAPTURE(text);
    CHECK(run_on(split_scans, text) == text);
  }
  CHECK(scan_chunk({65536}, 0) == kScanChunk);
  CHECK(scan_chunk({63, 65536}, 1) == kScanChunk);
  CHECK(scan_chunk({65536, 2}, 0) == 0);
}

TEST_CASE("a split scan computes the reference kernel's bits, every scan op, both directions") {
  for (const char* op : {"cumsum", "cumprod", "logcumsumexp"})
    for (int reverse : {0, 1})
      for (const char* type : {"f32[3,70001]", "f32[1,65536]", "f64[131072]", "i64[2,80000]"}) {
        if (std::string(op) == "logcumsumexp" && type[0] == 'i') continue;
        const std::string text = std::string("%0 = arg {index=0} : ") + type + "\n%1 = " + op +
                                 " %0 {dim=-1, reverse=" + std::to_string(reverse) +
                                 "}\nreturn %1\n";
        CAPTURE(text);
        const Graph before = ir(text), after = split_scans(before);
        REQUIRE(after.size() > before.size());
        passtest::Inputs in = passtest::random_inputs(before, 7);
        if (std::string(op) == "cumprod") {  // factors near 1, so the products stay finite
          HostArray& a = in.args[0];
          visit_dtype(a.type.dtype, [&](auto zero) {
            using T = decltype(zero);
            T* p = a.data<T>();
            for (int64_t i = 0; i < a.type.numel(); ++i)
              if constexpr (std::is_integral_v<T>)
                p[i] = T(p[i] % 2 == 0 ? 1 : 3);
              else
                p[i] = T(1 + double(p[i]) * 1e-4);
          });
        }
        const HostArray a = interpret(before, in.args, in.params).at(0);
        const HostArray b = interpret(after, in.args, in.params).at(0);
        REQUIRE(a.type == b.type);
        CHECK(std::memcmp(a.data<char>(), b.data<char>(), size_t(a.type.bytes())) == 0);
      }
}
