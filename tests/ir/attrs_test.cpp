// Attributes: typed access, equality and hashing, and exact float text.
#include <doctest/doctest.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "ir/attrs.h"
#include "ir/error.h"

using namespace kiln;

TEST_CASE("float_str is exact and always reads as a float") {
  CHECK(float_str(2.0) == "2.0");
  CHECK(float_str(1e-5) == "1e-05");
  CHECK(float_str(0.1) == "0.1");
  CHECK(float_str(-0.0) == "-0.0");
  CHECK(float_str(0.0) == "0.0");
  CHECK(float_str(1e20) == "1e+20");
  CHECK(float_str(std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(float_str(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(float_str(-std::numeric_limits<double>::infinity()) == "-inf");
  for (double v :
       {0.1, 1.0 / 3.0, 123456.789, 1e300, 5e-324, -2.5, 100.0, 1e16, static_cast<double>(0.1f)}) {
    std::string s = float_str(v);
    CAPTURE(s);
    CHECK(s.find_first_of(".e") != std::string::npos);
    double back = 0;
    std::from_chars(s.data(), s.data() + s.size(), back);
    CHECK(back == v);
  }
}

TEST_CASE("Attrs keep keys sorted and give typed values") {
  Attrs a{{AttrKey::keepdim, int64_t{1}}, {AttrKey::dims, std::vector<int64_t>{1}}};
  CHECK(attrs_str(a) == "{dims=[1], keepdim=1}");
  a.set(AttrKey::keepdim, int64_t{0});
  CHECK(a.i(AttrKey::keepdim) == 0);
  CHECK(a.items().size() == 2);
  CHECK(a.ints(AttrKey::dims) == std::vector<int64_t>{1});
  CHECK(a.i(AttrKey::dim, 7) == 7);
  CHECK(a.has(AttrKey::dims));
  CHECK_FALSE(a.has(AttrKey::dim));
  CHECK(attrs_str(Attrs{}) == "");

  Attrs b{{AttrKey::value, 2.5},
          {AttrKey::index, int64_t{3}},
          {AttrKey::dtype, DType::f64},
          {AttrKey::name, std::string("w\"1\n")},
          {AttrKey::data, std::vector<double>{1.0, 0.5}}};
  CHECK(attrs_str(b) == "{index=3, value=2.5, data=[1.0,0.5], dtype=f64, name=\"w\\\"1\\n\"}");
  CHECK(b.f(AttrKey::value) == 2.5);
  CHECK(b.f(AttrKey::index) == 3.0);  // ints read as floats
  CHECK(b.dtype(AttrKey::dtype) == DType::f64);
  CHECK(b.str(AttrKey::name) == "w\"1\n");
  CHECK(b.floats(AttrKey::data) == std::vector<double>{1.0, 0.5});
  CHECK(Attrs{{AttrKey::data, std::vector<int64_t>{1, 2}}}.floats(AttrKey::data) ==
        std::vector<double>{1.0, 2.0});

  CHECK_THROWS_WITH_AS(b.i(AttrKey::value), "attribute 'value' is a float, expected an int", Error);
  CHECK_THROWS_WITH_AS(b.i(AttrKey::dims), "attribute 'dims' is missing", Error);
  CHECK_THROWS_AS(b.ints(AttrKey::data), Error);

  AttrKey k;
  CHECK(parse_attr_key("interior", &k));
  CHECK(k == AttrKey::interior);
  CHECK(std::string(attr_key_name(AttrKey::perm)) == "perm");
  CHECK_FALSE(parse_attr_key("bogus", &k));
}

TEST_CASE("Attrs equality is bitwise on floats") {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Attrs a{{AttrKey::value, nan}}, b{{AttrKey::value, nan}};
  CHECK(a == b);
  CHECK(a.hash() == b.hash());
  CHECK_FALSE(Attrs{{AttrKey::value, 0.0}} == Attrs{{AttrKey::value, -0.0}});
  CHECK_FALSE(Attrs{{AttrKey::value, 1.0}} == Attrs{{AttrKey::value, int64_t{1}}});
  CHECK(Attrs{{AttrKey::data, std::vector<double>{nan}}} ==
        Attrs{{AttrKey::data, std::vector<double>{nan}}});
  CHECK_FALSE(Attrs{{AttrKey::dim, int64_t{0}}} ==
              Attrs{{AttrKey::dim, int64_t{0}}, {AttrKey::keepdim, int64_t{0}}});
}
