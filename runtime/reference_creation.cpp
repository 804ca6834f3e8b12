// Creation ops: constant (one value broadcast), literal (inline row-major
// data), arange; and the Philox draws behind the op table's philox.
#include "ir/error.h"
#include "runtime/reference.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

// Writes f(i) to every element of the dense output.
template <class F>
void generate(const View& out, int64_t grain, F f) {
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    T* o = out.ptr<T>();
    parallel_for(out.numel(), grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = f(T{}, i);
    });
  });
}

bool is_int_attr(const Attrs& attrs, AttrKey k) {
  const AttrValue* v = attrs.find(k);
  return v && std::holds_alternative<int64_t>(*v);
}

void fill_constant(const Attrs& attrs, const View& out) {
  if (is_int_attr(attrs, AttrKey::value)) {
    const int64_t v = attrs.i(AttrKey::value);
    generate(out, kElementwiseGrain,
             [v](auto t, int64_t) { return detail::convert<decltype(t)>(v); });
  } else {
    const double v = attrs.f(AttrKey::value);
    generate(out, kElementwiseGrain,
             [v](auto t, int64_t) { return detail::convert<decltype(t)>(v); });
  }
}

void fill_literal(const Attrs& attrs, const View& out) {
  const AttrValue* v = attrs.find(AttrKey::data);
  KILN_CHECK(v, "literal: missing attribute `data`");
  auto fill = [&](const auto& data) {
    const int64_t n = static_cast<int64_t>(data.size());
    KILN_CHECK(n == out.numel() || n == 1, "literal: ", n, " values for a result of shape ",
               shape_str(out.shape), " (", out.numel(), " elements)");
    generate(out, kElementwiseGrain,
             [&](auto t, int64_t i) { return detail::convert<decltype(t)>(data[n == 1 ? 0 : i]); });
  };
  if (const auto* ints = std::get_if<std::vector<int64_t>>(v)) {
    fill(*ints);
  } else if (const auto* floats = std::get_if<std::vector<double>>(v)) {
    fill(*floats);
  } else if (const auto* i = std::get_if<int64_t>(v)) {
    fill(std::vector<int64_t>{*i});
  } else if (const auto* f = std::get_if<double>(v)) {
    fill(std::vector<double>{*f});
  } else {
    KILN_CHECK(false, "literal: attribute `data` must be a list of numbers");
  }
}

void fill_arange(const Attrs& attrs, const View& out) {
  if (is_integral(out.dtype) && is_int_attr(attrs, AttrKey::start) &&
      (!attrs.has(AttrKey::step) || is_int_attr(attrs, AttrKey::step))) {
    const int64_t start = attrs.i(AttrKey::start), step = attrs.i(AttrKey::step, 1);
    generate(out, kElementwiseGrain,
             [=](auto t, int64_t i) { return detail::convert<decltype(t)>(start + i * step); });
  } else {
    const double start = attrs.f(AttrKey::start, 0.0), step = attrs.f(AttrKey::step, 1.0);
    generate(out, kElementwiseGrain, [=](auto t, int64_t i) {
      return detail::convert<decltype(t)>(start + double(i) * step);
    });
  }
}

}  // namespace

uint64_t philox_bits(int64_t key, int64_t counter, uint32_t attempt) {
  const auto ctr = static_cast<uint64_t>(counter), k = static_cast<uint64_t>(key);
  uint32_t c0 = uint32_t(ctr), c1 = uint32_t(ctr >> 32), c2 = attempt, c3 = 0;
  uint32_t k0 = uint32_t(k), k1 = uint32_t(k >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1);
    c3 = uint32_t(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return uint64_t(c0) << 32 | c1;
}

float philox_uniform(int64_t key, int64_t counter) {
  return static_cast<float>(philox_bits(key, counter) >> 40) * 0x1p-24f;
}

double philox_uniform_f64(int64_t key, int64_t counter) {
  return static_cast<double>(philox_bits(key, counter) >> 11) * 0x1p-53;
}

// Lemire's multiply-shift (ACM TOMACS 2019): the high word of x * bound is
// uniform in [0, bound) unless the low word falls below 2^64 mod bound, where
// x is rejected and the next attempt's block is drawn.
uint64_t philox_below(int64_t key, int64_t counter, uint64_t bound) {
  KILN_CHECK(bound != 0, "philox_below: the bound must be at least 1");
  for (uint32_t attempt = 0;; ++attempt) {
    const unsigned __int128 m =
        static_cast<unsigned __int128>(philox_bits(key, counter, attempt)) * bound;
    const auto low = static_cast<uint64_t>(m);
    if (low >= bound || low >= (0 - bound) % bound) return static_cast<uint64_t>(m >> 64);
  }
}

namespace detail {

void ref_creation(OpKind k, const Attrs& attrs, const View& out) {
  KILN_CHECK(out.contiguous(), op_name(k), ": the output buffer must be dense");
  switch (k) {
    case OpKind::constant:
      return fill_constant(attrs, out);
    case OpKind::literal:
      return fill_literal(attrs, out);
    case OpKind::arange:
      return fill_arange(attrs, out);
    default:
      break;
  }
  KILN_CHECK(false, "reference kernel: ", op_name(k), " is not a creation op");
}

}  // namespace detail
}  // namespace kiln
