// Every op in the table has a reference kernel (except graph inputs and custom
// calls, which refuse with a clear kiln::Error): each runs on a tiny input.
#include <doctest/doctest.h>

#include "ir/error.h"
#include "runtime_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Tiny operands and attributes that make op k well-formed.
struct Case {
  std::vector<Arr> inputs;
  Attrs attrs;
};

Case tiny_case(OpKind k) {
  Arr x = f32({2, 3}, {0.5, 1, 1.5, 2, 2.5, 3});
  switch (op_info(k).category) {
    case OpCategory::Creation:
      switch (k) {
        case OpKind::constant:
          return {{}, Attrs{{AttrKey::value, 1.0}}};
        case OpKind::literal:
          return {{}, Attrs{{AttrKey::data, std::vector<double>{1, 2, 3, 4, 5, 6}}}};
        default:  // arange
          return {{}, Attrs{{AttrKey::start, 0.0}, {AttrKey::step, 1.0}}};
      }
    case OpCategory::Unary:
      if (k == OpKind::cast) return {{x}, Attrs{{AttrKey::dtype, DType::i64}}};
      return {{x}, {}};
    case OpCategory::Binary:
      return {{x, f32({3}, {1, 2, 3})}, {}};
    case OpCategory::Ternary:
      return {{arr(DType::b8, {2, 1}, {1, 0}), x, f32({}, {0})}, {}};
    case OpCategory::Collective:  // a world of one process: the operand itself
      return {{x}, Attrs{{AttrKey::reduce, std::string("sum")}, {AttrKey::root, int64_t{0}},
                         {AttrKey::world, int64_t{1}}}};
    case OpCategory::Reduce:
      if (k == OpKind::argmax || k == OpKind::argmin)
        return {{x}, Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::keepdim, int64_t{0}}}};
      return {{x}, Attrs{{AttrKey::dims, std::vector<int64_t>{0}}, {AttrKey::keepdim, int64_t{1}}}};
    case OpCategory::Movement:
      switch (k) {
        case OpKind::reshape:
          return {{x}, Attrs{{AttrKey::shape, std::vector<int64_t>{3, 2}}}};
        case OpKind::expand:
          return {{x}, Attrs{{AttrKey::shape, std::vector<int64_t>{4, 2, 3}}}};
        case OpKind::permute:
          return {{x}, Attrs{{AttrKey::perm, std::vector<int64_t>{1, 0}}}};
        case OpKind::rebind:
          return {{x, x}, {}};
        case OpKind::slice:
          return {{x},
                  Attrs{{AttrKey::dim, int64_t{1}},
                        {AttrKey::start, int64_t{0}},
                        {AttrKey::end, int64_t{2}},
                        {AttrKey::step, int64_t{1}}}};
        case OpKind::unfold:
          return {{x},
                  Attrs{{AttrKey::dim, int64_t{1}},
                        {AttrKey::size, int64_t{2}},
                        {AttrKey::step, int64_t{1}}}};
        default:
          return {{x},
                  Attrs{{AttrKey::dim, int64_t{0}},
                        {AttrKey::low, int64_t{1}},
                        {AttrKey::high, int64_t{1}},
                        {AttrKey::interior, int64_t{1}}}};
      }
    case OpCategory::Matmul:
      return {{x, f32({3, 2}, {1, 2, 3, 4, 5, 6})}, {}};
    case OpCategory::Scan:
      return {{x}, Attrs{{AttrKey::dim, int64_t{1}}}};
    case OpCategory::Gather:
      return {{x, arr(DType::i64, {2, 2}, {1, 0, 1, 1})}, Attrs{{AttrKey::dim, int64_t{0}}}};
    case OpCategory::Scatter:
      return {{x, arr(DType::i64, {2, 3}, {1, 0, 1, 1, 1, 0}), x}, Attrs{{AttrKey::dim, int64_t{0}}}};
    case OpCategory::Attention: {
      Attrs a{{AttrKey::scale, 0.5}, {AttrKey::causal, int64_t{1}}, {AttrKey::which, int64_t{7}}};
      if (k == OpKind::cluster_logprob || k == OpKind::cluster_logprob_grad) {
        // Rows 0 and 1 with targets 3 and 9: row 0 in the cluster [2, 4), row 1 not.
        const Attrs c{{AttrKey::start, int64_t{2}}, {AttrKey::which, int64_t{3}}};
        const Arr t = arr(DType::i64, {2}, {3, 9});
        if (k == OpKind::cluster_logprob) return {{x, x, t}, c};
        return {{x, x, t, f32({2}, {1, 1})}, c};
      }
      if (k == OpKind::attention) return {{x, x, x}, a};
      return {{x, x, x, x, x}, a};
    }
    case OpCategory::Sort:
      return {{x}, Attrs{{AttrKey::dim, int64_t{1}}, {AttrKey::descending, int64_t{0}}, {AttrKey::count, int64_t{2}}}};
    case OpCategory::Check:  // indices in [0, 6), none of them zero; weights
      if (k == OpKind::check_distribution)
        return {{f32({2, 3}, {0.5f, 0, 2, 1, 1, 1})},
                Attrs{{AttrKey::count, int64_t{2}}, {AttrKey::name, std::string("multinomial")}}};
      return {{arr(DType::i64, {2, 3}, {1, 2, 3, 4, 5, 5})},
              Attrs{{AttrKey::high, int64_t{6}}, {AttrKey::name, std::string("gather")}}};
    default:
      return {};
  }
}

}  // namespace

TEST_CASE("every op in the table has a reference kernel") {
  int covered = 0;
  for (OpKind k : all_ops()) {
    CAPTURE(op_name(k));
    OpCategory c = op_info(k).category;
    // Composites are expanded before any kernel runs (ir/decompose.h).
    if (c == OpCategory::Input || c == OpCategory::Custom || is_composite(k)) {
      Arr out = empty(DType::f32, {2});
      CHECK_THROWS_AS(reference_kernel(k, {}, {}, out.v), Error);
      continue;
    }
    if (c == OpCategory::Collective && !collectives::started())
      collectives::start(make_self_communicator, 10);
    Case tc = tiny_case(k);
    Arr out;
    if (c == OpCategory::Creation) {
      CHECK_NOTHROW(out = create(k, DType::f32, {2, 3}, tc.attrs));
    } else {
      CHECK_NOTHROW(out = run(k, tc.inputs, tc.attrs));
    }
    CHECK(out.v.numel() > 0);
    ++covered;
  }
  int composites = 0;
  for (OpKind k : all_ops()) composites += is_composite(k);
  CHECK(covered == kNumOps - 3 - composites);  // all but arg, param, custom and the composites
}

TEST_CASE("check_nonzero copies a divisor without zeros and names the op for a zero") {
  const Attrs attrs{{AttrKey::name, std::string("remainder")}};
  Arr in = arr(DType::i32, {3}, {-1, 2, 7});
  Arr out = run(OpKind::check_nonzero, {in}, attrs);
  CHECK(values(out.v) == std::vector<double>{-1, 2, 7});
  CHECK_THROWS_WITH_AS(run(OpKind::check_nonzero, {arr(DType::i64, {2}, {3, 0})}, attrs),
                       doctest::Contains("remainder: integer division by zero"), Error);
}

TEST_CASE("fmod and remainder: C's and Python's signs, integers exact in their own type") {
  const std::vector<double> a{5.5, -5.5, 5.5, -5.5}, b{2, 2, -2, -2};
  CHECK(values(run(OpKind::fmod, {arr(DType::f64, {4}, a), arr(DType::f64, {4}, b)}).v) ==
        std::vector<double>{1.5, -1.5, 1.5, -1.5});
  CHECK(values(run(OpKind::remainder, {arr(DType::f64, {4}, a), arr(DType::f64, {4}, b)}).v) ==
        std::vector<double>{1.5, 0.5, -0.5, -1.5});
  const int64_t big = (int64_t(1) << 53) + 1;
  Arr x = arr(DType::i64, {3}, {0, -7, 7}), y = arr(DType::i64, {3}, {2, 3, -3});
  x.v.ptr<int64_t>()[0] = big;  // not a double
  CHECK(values(run(OpKind::fmod, {x, y}).v) == std::vector<double>{1, -1, 1});
  CHECK(values(run(OpKind::remainder, {x, y}).v) == std::vector<double>{1, 2, -2});
}

TEST_CASE("gather and scatter_add read and add only the named elements, in index order") {
  // x = [[0.5, inf], [2, 3]]: a gather of row 0 never touches the inf (a one-hot
  // product would give NaN there).
  Arr x = f32({2, 2}, {0.5, INFINITY, 2, 3});
  CHECK(values(run(OpKind::gather, {x, arr(DType::i64, {1, 2}, {1, 1})}, Attrs{{AttrKey::dim, int64_t{0}}}).v) ==
        std::vector<double>{2, 3});
  CHECK(values(run(OpKind::gather, {x, arr(DType::i64, {2, 1}, {0, 1})}, Attrs{{AttrKey::dim, int64_t{1}}}).v) ==
        std::vector<double>{0.5, 3});
  CHECK_THROWS_WITH_AS(run(OpKind::gather, {x, arr(DType::i64, {1, 1}, {2})}, Attrs{{AttrKey::dim, int64_t{0}}}),
                       doctest::Contains("gather: index 2 is out of range for size 2"), Error);
  // Repeated indices add up, in index order: 1e8 + 1 - 1e8 in f32 is 0, not 1.
  Arr base = f32({2}, {0, 0});
  Arr idx = arr(DType::i64, {3}, {1, 1, 1});
  Arr src = f32({3}, {1e8, 1, -1e8});
  CHECK(values(run(OpKind::scatter_add, {base, idx, src}, Attrs{{AttrKey::dim, int64_t{0}}}).v) ==
        std::vector<double>{0, 0});
  Arr rows = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  CHECK(values(run(OpKind::scatter_add, {f32({2, 2}, {0, 0, 0, 0}), arr(DType::i64, {3, 2}, {1, 0, 1, 1, 0, 0}), rows},
                   Attrs{{AttrKey::dim, int64_t{0}}})
                   .v) == std::vector<double>{5, 8, 4, 4});
}

TEST_CASE("scans fold each line in order from its start (or its end), in the result's dtype") {
  Arr x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Attrs rows{{AttrKey::dim, int64_t{1}}}, back{{AttrKey::dim, int64_t{1}}, {AttrKey::reverse, int64_t{1}}};
  CHECK(values(run(OpKind::cumsum, {x}, rows).v) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(values(run(OpKind::cumsum, {x}, back).v) == std::vector<double>{6, 5, 3, 15, 11, 6});
  CHECK(values(run(OpKind::cumprod, {x}, Attrs{{AttrKey::dim, int64_t{0}}}).v) ==
        std::vector<double>{1, 2, 3, 4, 10, 18});
  const std::vector<double> lse = values(run(OpKind::logcumsumexp, {arr(DType::f64, {3}, {0, 0, -INFINITY})},
                                             Attrs{{AttrKey::dim, int64_t{0}}})
                                             .v);
  CHECK(lse[0] == 0);
  CHECK(lse[1] == doctest::Approx(std::log(2.0)));
  CHECK(lse[2] == doctest::Approx(std::log(2.0)));
  // Integers in int64, wrapping: no f64 on the way (2^53 + 1 stays odd).
  Arr big = arr(DType::i64, {2}, {0, 1});
  big.v.ptr<int64_t>()[0] = int64_t(1) << 53;
  Arr out = empty(DType::i64, {2});
  reference_kernel(OpKind::cumsum, Attrs{{AttrKey::dim, int64_t{0}}}, std::vector<View>{big.v}, out.v);
  CHECK(out.v.ptr<int64_t>()[1] == (int64_t(1) << 53) + 1);
}

TEST_CASE("operand count mismatches are errors") {
  Arr x = f32({2}, {1, 2});
  Arr out = empty(DType::f32, {2});
  CHECK_THROWS_AS(reference_kernel(OpKind::add, {}, std::vector<View>{x.v}, out.v), Error);
  CHECK_THROWS_AS(reference_kernel(OpKind::neg, {}, std::vector<View>{x.v, x.v}, out.v), Error);
}

TEST_CASE("check_index copies indices in range and names the op for one out of range") {
  const Attrs attrs{{AttrKey::high, int64_t{4}}, {AttrKey::name, std::string("embedding")}};
  Arr in = arr(DType::i32, {2, 2}, {0, 3, 1, 2});
  Arr out = run(OpKind::check_index, {in}, attrs);
  CHECK(out.v.dtype == DType::i32);
  for (int i = 0; i < 4; ++i) CHECK(out.v.ptr<int32_t>()[i] == in.v.ptr<int32_t>()[i]);
  for (double bad : {4.0, -1.0}) {
    CAPTURE(bad);
    Arr b = arr(DType::i64, {3}, {0, bad, 1});
    const std::string want = "embedding: index " + std::to_string(int64_t(bad)) +
                             " is out of range for size 4 (expected 0 <= index < 4)";
    CHECK_THROWS_WITH_AS(run(OpKind::check_index, {b}, attrs), doctest::Contains(want.c_str()),
                         Error);
  }
  // Strided indices: the transposed view is checked element by element.
  Arr t = transposed(arr(DType::i64, {2, 2}, {0, 1, 2, 9}));
  CHECK_THROWS_WITH_AS(run(OpKind::check_index, {t}, attrs), doctest::Contains("index 9"), Error);
}
