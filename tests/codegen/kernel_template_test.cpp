// Kernel templates: kernels of one group lowered at several batch sizes share a
// skeleton; the template made from two of them has the differing constants as
// parameters, binds any other size, and its code computes every size as the
// reference kernels do.
#include <doctest/doctest.h>

#include <bit>

#include "codegen/kernel_template.h"
#include "codegen/lower.h"
#include "codegen_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Row softmax of x [batch, width] and the mean of x over the batch (a sum over
// the batch dimension times 1/batch): the batch size appears as the outer range,
// an inner trip count and a floating constant.
struct BatchCase {
  Graph g;
  FusionGroup softmax, mean;
  std::vector<Buf> vals;
  BatchCase(int64_t batch, int64_t width, uint64_t seed) {
    Builder b(g);
    Value x = b.arg(0, ty(DType::f32, {batch, width}));
    Value m = b.op(OpKind::max, {x},
                   Attrs{{AttrKey::dims, std::vector<int64_t>{1}}, {AttrKey::keepdim, int64_t(1)}});
    Value e = b.unary(OpKind::exp, b.sub(x, m));
    Value y = b.div(e, b.sum(e, {1}, true));
    const size_t softmax_end = g.size();
    Value avg = b.mul(b.sum(x, {0}, false), b.constant(1.0 / double(batch), DType::f32));
    g.outputs = {y, avg};
    std::vector<NodeId> first, second;
    for (NodeId id : all_compute_nodes(g)) (id < softmax_end ? first : second).push_back(id);
    softmax = make_group(g, GroupKind::Reduction, first);
    mean = make_group(g, GroupKind::Reduction, second);
    std::mt19937_64 rng(seed);
    Buf a = make_buf(ty(DType::f32, {batch, width}));
    fill_random(a, rng, {-5, 5});
    vals = reference_eval(g, {a});
  }
};

kir::Kernel lowered(const BatchCase& c, const FusionGroup& grp) {
  return lower_group(c.g, grp, {});
}


// A dynamic dimension's probe (record the kernel, compile nothing) and its
// later compiles (templates), both with `cache`.
CpuCompileOptions probe_options(KernelTemplateCache* cache) {
  CpuCompileOptions o;
  o.record_only = true;
  o.templates = cache;
  return o;
}
CpuCompileOptions dynamic_options(KernelTemplateCache* cache) {
  CpuCompileOptions o;
  o.dynamic_sizes = true;
  o.templates = cache;
  return o;
}

}  // namespace

TEST_CASE("kernels of one group at three batch sizes: one skeleton, one template binding all") {
  BatchCase b64(64, 10, 1), b50(50, 10, 2), b37(37, 10, 3);
  const kir::Kernel k64 = lowered(b64, b64.mean), k50 = lowered(b50, b50.mean),
                    k37 = lowered(b37, b37.mean);
  CHECK(kir::skeleton(k64) == kir::skeleton(k50));
  CHECK(kir::skeleton(k64) == kir::skeleton(k37));
  CHECK(kir::print_kernel(k64) != kir::print_kernel(k50));
  CHECK(kir::count_differences(k64, k50) >= 2);  // the batch trip count and 1/batch

  const kir::Kernel t = kir::generalize(k64, k50);
  kir::verify_kernel(t);
  const std::string text = kir::print_kernel(t);
  CAPTURE(text);
  CHECK(text.find("= param f64") != std::string::npos);  // 1/batch
  CHECK(text.find("in [0, p") != std::string::npos);     // the batch loop
  CHECK(text.find("sized at run time") != std::string::npos);
  CHECK(text.find("parallel i0 in [0, range)") != std::string::npos);

  auto p = kir::bind(t, k37);
  REQUIRE(p.has_value());
  bool extent = false, scale = false;
  for (size_t i = 0; i < p->size(); ++i) {
    extent = extent || (t.params[i] == DType::i64 && (*p)[i] == 37);
    scale = scale ||
            (t.params[i] == DType::f64 && float(std::bit_cast<double>((*p)[i])) == float(1.0 / 37));
  }
  CHECK(extent);
  CHECK(scale);
  // Its own instances bind too, with their own values.
  CHECK(kir::bind(t, k64).has_value());
  CHECK(kir::bind(t, k50).has_value());

  // A kernel of the same skeleton that differs where the template has no
  // parameter (the row width) is not an instance.
  BatchCase wide(37, 12, 4);
  const kir::Kernel kw = lowered(wide, wide.mean);
  REQUIRE(kir::skeleton(kw) == kir::skeleton(k64));
  CHECK_FALSE(kir::bind(t, kw).has_value());
  // Generalised with t as well, the template varies in both: any batch, any width.
  const kir::Kernel both = kir::generalize(kw, k37, &t);
  CHECK(both.params.size() > t.params.size());
  BatchCase other(20, 7, 5);
  for (const kir::Kernel* k : {&k64, &k50, &k37, &kw}) CHECK(kir::bind(both, *k).has_value());
  CHECK(kir::bind(both, lowered(other, other.mean)).has_value());
}

TEST_CASE("with dynamic sizes a new batch size runs the template: compiled once, then shared") {
  KernelTemplateCache cache;
  CpuCompileOptions fixed;  // no disk cache
  fixed.templates = &cache;
  CpuCompileOptions dynamic = fixed;
  dynamic.dynamic_sizes = true;
  dynamic.want_artifacts = true;
  // Widths of their own, so no kernel already loaded by another test is in the way.
  BatchCase b64(64, 23, 5), b50(50, 23, 6), b37(37, 23, 7), b128(128, 23, 8), b1(1, 23, 9);
  for (const FusionGroup BatchCase::*grp : {&BatchCase::softmax, &BatchCase::mean}) {
    const CpuKernel first = check_group(b64.g, b64.*grp, b64.vals, {}, fixed);
    CHECK_FALSE(first.artifacts.templated);
    CHECK(first.params.empty());

    const CpuKernel second = check_group(b50.g, b50.*grp, b50.vals, {}, dynamic);
    CHECK(second.artifacts.templated);
    CHECK_FALSE(second.artifacts.reused);
    CHECK(second.artifacts.kernel_ir.find("sized at run time") != std::string::npos);
    // The softmax rows are the outer range, which the caller passes: its template
    // has no parameters. The mean has the batch as a trip count and in 1/batch.
    const bool rows = grp == &BatchCase::softmax;
    CHECK(second.params.empty() == rows);
    CHECK(second.artifacts.kernel_ir.find(rows ? "; no parameters" : "; run with") !=
          std::string::npos);
    CHECK(second.info.range == (rows ? 50 : 23));

    for (BatchCase* c : {&b37, &b128}) {
      const CpuKernel k = check_group(c->g, c->*grp, c->vals, {}, dynamic);
      CHECK(k.artifacts.templated);
      CHECK(k.artifacts.reused);
      CHECK(reinterpret_cast<void*>(k.fn) == reinterpret_cast<void*>(second.fn));
      if (!rows) CHECK(k.params != second.params);
    }
    // Whatever batch 1 lowers to, it computes the reference's values.
    check_group(b1.g, b1.*grp, b1.vals, {}, dynamic);
    // Without dynamic sizes every size keeps a kernel of its own.
    const CpuKernel own = check_group(b37.g, b37.*grp, b37.vals, {}, fixed);
    CHECK_FALSE(own.artifacts.templated);
    CHECK(reinterpret_cast<void*>(own.fn) != reinterpret_cast<void*>(second.fn));
  }
}

TEST_CASE("a probe recorded at a second size makes the first compile a template") {
  KernelTemplateCache cache;
  const CpuCompileOptions probe = probe_options(&cache), dynamic = dynamic_options(&cache);
  BatchCase at65(65, 31, 10), at64(64, 31, 11), at50(50, 31, 12);
  const CpuKernel recorded = compile_cpu_kernel(at65.g, at65.softmax, probe);
  CHECK_FALSE(static_cast<bool>(recorded.fn));
  CHECK(cache.families() == 1);
  const CpuKernel first = check_group(at64.g, at64.softmax, at64.vals, {}, dynamic);
  CHECK(first.artifacts.templated);
  CHECK_FALSE(first.artifacts.reused);
  const CpuKernel next = check_group(at50.g, at50.softmax, at50.vals, {}, dynamic);
  CHECK(next.artifacts.reused);
  CHECK(reinterpret_cast<void*>(next.fn) == reinterpret_cast<void*>(first.fn));
  // A cache that has seen none of these kernels: the first compile is for its own sizes.
  KernelTemplateCache empty;
  CpuCompileOptions elsewhere = dynamic;
  elsewhere.templates = &empty;
  BatchCase at40(40, 31, 13);
  CHECK_FALSE(check_group(at40.g, at40.softmax, at40.vals, {}, elsewhere).artifacts.templated);
}

TEST_CASE(
    "the cache is keyed by content: a kernel recorded for one function makes another's template") {
  KernelTemplateCache cache;
  const CpuCompileOptions probe = probe_options(&cache), dynamic = dynamic_options(&cache);
  // Two graphs built apart (two traced functions) whose mean kernels print alike
  // but for the batch size: one skeleton, one family.
  BatchCase one(65, 37, 20), other(48, 37, 21);
  compile_cpu_kernel(one.g, one.mean, probe);
  const CpuKernel k = check_group(other.g, other.mean, other.vals, {}, dynamic);
  CHECK(k.artifacts.templated);
  CHECK(cache.families() == 1);
}

TEST_CASE("a template widened by other kernels' sizes never displaces a narrower one that fits") {
  KernelTemplateCache cache;
  CpuCompileOptions fixed;
  fixed.templates = &cache;
  CpuCompileOptions dynamic = fixed;
  dynamic.dynamic_sizes = true;
  // One function's mean at width 41: batch 64, then 50, makes a template
  // varying in the batch alone.
  BatchCase b64(64, 41, 30), b50(50, 41, 31), b128(128, 41, 32);
  check_group(b64.g, b64.mean, b64.vals, {}, fixed);
  const CpuKernel narrow = check_group(b50.g, b50.mean, b50.vals, {}, dynamic);
  REQUIRE(narrow.artifacts.templated);
  // Another function's mean at width 43 (and a batch of its own): its template
  // varies in the width too (the row stride and the buffers' sizes).
  BatchCase w43(37, 43, 33);
  const CpuKernel wide = check_group(w43.g, w43.mean, w43.vals, {}, dynamic);
  REQUIRE(wide.artifacts.templated);
  CHECK(wide.params.size() > narrow.params.size());
  CHECK(reinterpret_cast<void*>(wide.fn) != reinterpret_cast<void*>(narrow.fn));
  // The first function's next batch size is an instance of both: it runs the
  // narrow template's code, as if the other function had never been compiled.
  const CpuKernel next = check_group(b128.g, b128.mean, b128.vals, {}, dynamic);
  CHECK(next.artifacts.templated);
  CHECK(next.params.size() == narrow.params.size());
  CHECK(reinterpret_cast<void*>(next.fn) == reinterpret_cast<void*>(narrow.fn));
  // And the wider template still computes the other function's next sizes.
  BatchCase w43b(90, 43, 34);
  const CpuKernel other_next = check_group(w43b.g, w43b.mean, w43b.vals, {}, dynamic);
  CHECK(reinterpret_cast<void*>(other_next.fn) == reinterpret_cast<void*>(wide.fn));
}

TEST_CASE(
    "families: kernels of one plan alike but for sizes share a template; index strides stay "
    "constants") {
  BatchCase b64(64, 10, 1), b50(50, 10, 2), b37(37, 10, 3), wide(37, 12, 4);
  const kir::Kernel k64 = lowered(b64, b64.mean), k50 = lowered(b50, b50.mean),
                    k37 = lowered(b37, b37.mean);
  const kir::Kernel kw = lowered(wide, wide.mean), soft = lowered(b64, b64.softmax);
  REQUIRE(kir::skeleton(kw) == kir::skeleton(k64));
  const std::vector<kir::Family> fams = kir::families({&k64, &soft, &k50, &kw, &k37, &k64});
  // The wide kernel reads its rows with stride 12, not 10: as a parameter, the
  // stride would hide which loads are contiguous, so it is not a member. The
  // softmax has a skeleton of its own.
  REQUIRE(fams.size() == 1);
  const kir::Family& f = fams[0];
  CHECK(f.members == std::vector<size_t>{0, 2, 4, 5});
  CHECK_FALSE(f.templ.params.empty());
  const std::string text = kir::print_kernel(f.templ);
  CAPTURE(text);
  CHECK(text.find("const 10 : i64") != std::string::npos);  // the row stride
  REQUIRE(f.params.size() == f.members.size());
  const std::vector<const kir::Kernel*> given = {&k64, &soft, &k50, &kw, &k37, &k64};
  for (size_t m = 0; m < f.members.size(); ++m)
    CHECK(kir::bind(f.templ, *given[f.members[m]]) == f.params[m]);
  CHECK(f.params[0] == f.params[3]);  // k64 twice
  CHECK(f.params[1] != f.params[2]);
  // Identical kernels are a family whose template has no parameters.
  const std::vector<kir::Family> same = kir::families({&soft, &soft});
  REQUIRE(same.size() == 1);
  CHECK(same[0].templ.params.empty());
  CHECK(kir::families({&k64, &soft, &kw}).empty());
}

namespace {

// A chain of `ops` unary ops over x [batch, 8], one elementwise group: each
// length is a skeleton of its own.
struct Chain {
  Graph g;
  FusionGroup grp;
  Chain(int64_t ops, int64_t batch) {
    Builder b(g);
    Value v = b.arg(0, ty(DType::f32, {batch, 8}));
    for (int64_t i = 0; i < ops; ++i) v = b.unary(i % 2 ? OpKind::exp : OpKind::neg, v);
    g.outputs = {v};
    grp = make_group(g, GroupKind::Elementwise, all_compute_nodes(g));
  }
  kir::Kernel kernel() const { return lower_group(g, grp, {}); }
};

}  // namespace

TEST_CASE(
    "the templates' cache keeps within its bytes, forgetting the least recently used skeletons") {
  // Room for a few families only.
  KernelTemplateCache sizing;
  const kir::Kernel one = Chain(40, 16).kernel();
  sizing.remember(kir::skeleton(one), one);
  KernelTemplateCache cache(sizing.bytes() * 8);
  std::vector<int64_t> params;
  for (int64_t ops = 30; ops < 60; ++ops) {
    const kir::Kernel k = Chain(ops, 16).kernel();
    cache.remember(kir::skeleton(k), k);
    CHECK(cache.bytes() <= cache.max_bytes());
  }
  CHECK(cache.families() < 30);
  CHECK(cache.families() >= 2);
  // The newest skeleton still makes a template at another size; the oldest is gone.
  const kir::Kernel newest = Chain(59, 24).kernel(), oldest = Chain(30, 24).kernel();
  CHECK(cache.find_or_make(kir::skeleton(newest), newest, &params).has_value());
  CHECK_FALSE(cache.find_or_make(kir::skeleton(oldest), oldest, &params).has_value());
  // Using a family makes it the most recently used: remembered again, 58 outlives 57.
  const kir::Kernel k58 = Chain(58, 16).kernel();
  cache.remember(kir::skeleton(k58), k58);
  for (int64_t ops = 60; ops < 62; ++ops) {
    const kir::Kernel k = Chain(ops, 16).kernel();
    cache.remember(kir::skeleton(k), k);
  }
  const kir::Kernel at58 = Chain(58, 24).kernel(), at57 = Chain(57, 24).kernel();
  CHECK(cache.find_or_make(kir::skeleton(at58), at58, &params).has_value());
  CHECK_FALSE(cache.find_or_make(kir::skeleton(at57), at57, &params).has_value());
}
