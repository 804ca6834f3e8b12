// The sort and attention library kernels (codegen/cuda_library.h) and their
// launchers (runtime/cuda_library.h): the source compiles with NVRTC, and the
// launchers' whole sequence of kernels runs under the host emulation against
// the reference kernels (every sort dtype, both directions, ties, NaN, -0.0,
// counts below n, lines short and long, lines along inner dims; attention
// forward and every gradient, causal or not, tq != tk, d != dv, several row,
// key and column blocks, f32 and f64; cluster log-probabilities forward and
// every gradient, rows outside the cluster, more columns than a block's
// threads). On a GPU the same cases run for real.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include "codegen/cuda_backend.h"
#include "codegen/cuda_emulation.h"
#include "codegen/cuda_library.h"
#include "cuda_device_util.h"
#include "runtime/allocator.h"
#include "runtime/cuda_driver.h"
#include "runtime/runtime_test_util.h"
#include "sort_inputs.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// The library source compiled for the host once per test binary.
const CudaHostModule& host_module() {
  static const CudaHostModule m({cuda_library_source()});
  return m;
}

// Runs the launchers' kernels under the host emulation, on at most `max_grid`
// blocks (so blocks stride over the rest), with host memory as "device" memory.
class EmulatedLauncher final : public CudaLibraryLauncher {
 public:
  explicit EmulatedLauncher(int max_grid = 3) : max_grid_(max_grid) {}
  void launch(const char* name, int64_t grid, int block, const void* args, size_t bytes) override {
    REQUIRE(grid >= 1);
    std::vector<char> copy(static_cast<const char*>(args), static_cast<const char*>(args) + bytes);
    void* buffers[] = {copy.data()};
    host_module().launch(name, int(std::min<int64_t>(grid, max_grid_)), block, buffers, 0, 0);
    ++launches;
  }
  void* alloc(size_t bytes) override {
    void* p = std::malloc(bytes);
    std::memset(p, 0x7f, bytes);  // poison: nothing may read scratch before writing it
    ++allocs;
    return p;
  }
  void free(void* p, size_t) override {
    std::free(p);
    --allocs;
  }
  int launches = 0, allocs = 0;

 private:
  int max_grid_;
};

struct SortSize {
  int64_t outer, n, inner, count;
};

// Short lines (one block each, several strided over), and long ones (radix
// passes over tiles of 2048: 3 tiles a line, 2 lines, and a few wanted of many).
const SortSize kSortSizes[] = {{3, 17, 1, 17},  {2, 300, 2, 300},   {5, 40, 1, 2},   {3, 1, 2, 1},
                               {1, 2000, 1, 9}, {1, 5000, 2, 5000}, {2, 2100, 1, 10}};
const DType kSortTypes[] = {DType::f32, DType::f64, DType::i32, DType::i64,
                            DType::b8,  DType::u8,  DType::i8,  DType::i16};

Arr attention_randoms(DType dt, const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<double> n(0, 1);
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (double& x : v) x = n(rng);
  return arr(dt, shape, v);
}

struct AttentionSize {
  int64_t batch, tq, tk, d, dv;
};

// Several key tiles (64) and query blocks (16), d past one 32-column chunk, dv
// past one 128-column block, tq > tk and tq < tk.
const AttentionSize kAttentionSizes[] = {
    {1, 5, 7, 3, 2}, {2, 37, 70, 40, 5}, {1, 20, 18, 4, 130}, {1, 70, 33, 6, 7}};

// Every sort case through `run` (OnHost: the emulation; OnDevice: a GPU).
template <class Runner>
void check_sorts(Runner& run) {
  std::mt19937 rng(42);
  for (DType dt : kSortTypes)
    for (const SortSize& sz : kSortSizes)
      for (bool descending : {false, true}) {
        CAPTURE(dtype_name(dt));
        CAPTURE(sz.n);
        CAPTURE(sz.inner);
        CAPTURE(sz.count);
        CAPTURE(descending);
        const Shape shape{sz.outer, sz.n, sz.inner};
        const Arr x = arr(dt, shape, test::sort_inputs(dt, numel(shape), rng));
        const Attrs attrs{{AttrKey::dim, int64_t{1}},
                          {AttrKey::descending, int64_t(descending)},
                          {AttrKey::count, sz.count}};
        Arr want = empty(DType::i64, {sz.outer, sz.count, sz.inner});
        const std::vector<View> in{x.v};
        reference_kernel(OpKind::argsort, attrs, in, want.v);
        Arr got = empty(DType::i64, want.v.shape);
        run.sort(sort_lines_for(x.type(), attrs), x, got);
        CHECK(values(got.v) == values(want.v));
      }
}

// Every attention case through `run`.
template <class Runner>
void check_attention(Runner& run) {
  std::mt19937 rng(7);
  for (DType dt : {DType::f32, DType::f64})
    for (const AttentionSize& z : kAttentionSizes)
      for (bool causal : {false, true}) {
        CAPTURE(dtype_name(dt));
        CAPTURE(z.tq);
        CAPTURE(z.tk);
        CAPTURE(z.d);
        CAPTURE(z.dv);
        CAPTURE(causal);
        const Arr q = attention_randoms(dt, {z.batch, z.tq, z.d}, rng),
                  k = attention_randoms(dt, {z.batch, z.tk, z.d}, rng),
                  v = attention_randoms(dt, {z.batch, z.tk, z.dv}, rng),
                  g = attention_randoms(dt, {z.batch, z.tq, z.dv}, rng);
        const Attrs attrs{{AttrKey::scale, 0.4}, {AttrKey::causal, int64_t(causal)}};
        const AttentionShape s = attention_shape(q.type(), k.type(), v.type(), attrs);
        const double tol = dt == DType::f32 ? 1e-4 : 1e-11;
        Arr want = empty(dt, {z.batch, z.tq, z.dv}), got = empty(dt, want.v.shape);
        const std::vector<View> fwd{q.v, k.v, v.v};
        reference_kernel(OpKind::attention, attrs, fwd, want.v);
        run.forward(s, q, k, v, got);
        const std::vector<double> w = values(want.v), o = values(got.v);
        for (size_t i = 0; i < w.size(); ++i)
          REQUIRE(std::abs(o[i] - w[i]) <= tol * (1 + std::abs(w[i])));
        // Every gradient in one backward, and each alone.
        Arr grads[3] = {empty(dt, q.v.shape), empty(dt, k.v.shape), empty(dt, v.v.shape)};
        Arr wants[3] = {empty(dt, q.v.shape), empty(dt, k.v.shape), empty(dt, v.v.shape)};
        for (int which = 0; which < 3; ++which) {
          Attrs ga = attrs;
          ga.set(AttrKey::which, int64_t(1) << which);  // a mask: 1 q, 2 k, 4 v
          const std::vector<View> bwd{q.v, k.v, v.v, want.v, g.v};
          reference_kernel(OpKind::attention_grad, ga, bwd, wants[which].v);
        }
        for (int mask : {7, 1, 2, 4}) {
          CAPTURE(mask);
          for (Arr& a : grads) std::memset(a.v.data, 0x7f, size_t(a.type().bytes()));
          run.backward(s, q, k, v, want, g, mask & 1 ? &grads[0] : nullptr,
                       mask & 2 ? &grads[1] : nullptr, mask & 4 ? &grads[2] : nullptr);
          for (int which = 0; which < 3; ++which) {
            if (!(mask >> which & 1)) continue;
            CAPTURE(which);
            const std::vector<double> a = values(wants[which].v), b = values(grads[which].v);
            for (size_t i = 0; i < a.size(); ++i)
              REQUIRE(std::abs(b[i] - a[i]) <= 5 * tol * (1 + std::abs(a[i])));
          }
        }
      }
}

struct ClusterSize {
  int64_t rows, width, columns, start;
};

// More columns than a block's 256 threads (and than a dw block), width past
// one thread's share, rows outside the cluster on both sides.
const ClusterSize kClusterSizes[] = {{1, 1, 1, 0}, {9, 3, 20, 5}, {6, 2, 600, 100}, {5, 300, 7, 2}};

// Every cluster log-probability case through `run`: the forward, then each
// mask of gradients.
template <class Runner>
void check_cluster(Runner& run) {
  std::mt19937 rng(9);
  for (DType dt : {DType::f32, DType::f64})
    for (const ClusterSize& z : kClusterSizes) {
      CAPTURE(dtype_name(dt));
      CAPTURE(z.rows);
      CAPTURE(z.width);
      CAPTURE(z.columns);
      const Arr h = attention_randoms(dt, {z.rows, z.width}, rng),
                w = attention_randoms(dt, {z.columns, z.width}, rng),
                g = attention_randoms(dt, {z.rows}, rng);
      std::vector<double> tv(size_t(z.rows));
      for (int64_t r = 0; r < z.rows; ++r)  // every third row outside, below or above
        tv[size_t(r)] = double(r % 3 == 1   ? z.start - 1 - r
                               : r % 3 == 2 ? z.start + z.columns + r
                                            : z.start + (r * 7) % z.columns);
      const Arr t = arr(DType::i64, {z.rows}, tv);
      const Attrs attrs{{AttrKey::start, z.start}};
      const ClusterShape s = cluster_logprob_shape(h.type(), w.type(), attrs);
      const double tol = dt == DType::f32 ? 1e-4 : 1e-11;
      Arr want = empty(dt, {z.rows}), got = empty(dt, {z.rows});
      const std::vector<View> fwd{h.v, w.v, t.v};
      reference_kernel(OpKind::cluster_logprob, attrs, fwd, want.v);
      run.cluster_forward(s, h, w, t, got);
      const std::vector<double> a = values(want.v), b = values(got.v);
      for (size_t i = 0; i < a.size(); ++i)
        REQUIRE(std::abs(b[i] - a[i]) <= tol * (1 + std::abs(a[i])));
      Arr wants[2] = {empty(dt, h.v.shape), empty(dt, w.v.shape)};
      for (int which = 0; which < 2; ++which) {
        Attrs ga = attrs;
        ga.set(AttrKey::which, int64_t(1) << which);  // a mask: 1 h, 2 w
        const std::vector<View> bwd{h.v, w.v, t.v, g.v};
        reference_kernel(OpKind::cluster_logprob_grad, ga, bwd, wants[which].v);
      }
      for (int mask : {3, 1, 2}) {
        CAPTURE(mask);
        Arr grads[2] = {empty(dt, h.v.shape), empty(dt, w.v.shape)};
        for (Arr& x : grads) std::memset(x.v.data, 0x7f, size_t(x.type().bytes()));
        run.cluster_backward(s, h, w, t, g, mask & 1 ? &grads[0] : nullptr,
                             mask & 2 ? &grads[1] : nullptr);
        for (int which = 0; which < 2; ++which) {
          if (!(mask >> which & 1)) continue;
          CAPTURE(which);
          const std::vector<double> r = values(wants[which].v), l = values(grads[which].v);
          for (size_t i = 0; i < r.size(); ++i)
            REQUIRE(std::abs(l[i] - r[i]) <= 5 * tol * (1 + std::abs(r[i])));
        }
      }
    }
}

// The cases run on host buffers under the emulation.
struct OnHost {
  EmulatedLauncher l;
  void sort(const SortLines& s, const Arr& x, Arr& out) {
    std::memset(out.v.data, 0x7f, size_t(out.type().bytes()));
    cuda_sort_lines(s, x.v.data, out.v.ptr<int64_t>(), l);
    CHECK(l.allocs == 0);
  }
  void forward(const AttentionShape& s, const Arr& q, const Arr& k, const Arr& v, Arr& out) {
    std::memset(out.v.data, 0x7f, size_t(out.type().bytes()));
    cuda_attention_forward(s, q.v.data, k.v.data, v.v.data, out.v.data, l);
  }
  void backward(const AttentionShape& s, const Arr& q, const Arr& k, const Arr& v, const Arr& out,
                const Arr& g, Arr* dq, Arr* dk, Arr* dv) {
    auto p = [](Arr* a) { return a ? a->v.data : nullptr; };
    cuda_attention_backward(s, q.v.data, k.v.data, v.v.data, out.v.data, g.v.data, p(dq), p(dk),
                            p(dv), l);
    CHECK(l.allocs == 0);
  }
  void cluster_forward(const ClusterShape& s, const Arr& h, const Arr& w, const Arr& t, Arr& out) {
    std::memset(out.v.data, 0x7f, size_t(out.type().bytes()));
    cuda_cluster_logprob_forward(s, h.v.data, w.v.data, t.v.ptr<int64_t>(), out.v.data, l);
  }
  void cluster_backward(const ClusterShape& s, const Arr& h, const Arr& w, const Arr& t,
                        const Arr& g, Arr* dh, Arr* dw) {
    cuda_cluster_logprob_backward(s, h.v.data, w.v.data, t.v.ptr<int64_t>(), g.v.data,
                                  dh ? dh->v.data : nullptr, dw ? dw->v.data : nullptr, l);
    CHECK(l.allocs == 0);
  }
};

// The same cases on a GPU: operands uploaded, results read back.
class DeviceLauncher final : public CudaLibraryLauncher {
 public:
  explicit DeviceLauncher(std::shared_ptr<const CudaLibraryFunctions> fns) : fns_(std::move(fns)) {}
  void launch(const char* name, int64_t grid, int block, const void* args, size_t) override {
    void* params[] = {const_cast<void*>(args)};
    cuda::launch(fns_->find(name), unsigned(grid), unsigned(block), 0, params, 0);
  }
  void* alloc(size_t bytes) override { return cuda_alloc(bytes, 0); }
  void free(void* p, size_t bytes) override { cuda_free(p, bytes, 0); }

 private:
  std::shared_ptr<const CudaLibraryFunctions> fns_;
};

struct OnDevice {
  DeviceLauncher l{cuda_library_functions(0, "")};
  std::vector<std::pair<void*, size_t>> live;
  void* up(const Arr& a) {
    const size_t bytes = std::max<size_t>(1, size_t(a.type().bytes()));
    void* p = cuda_alloc(bytes, 0);
    cuda::copy_to_device(p, a.v.data, size_t(a.type().bytes()), 0);
    live.emplace_back(p, bytes);
    return p;
  }
  void down(Arr& a, const void* p) { cuda::copy_to_host(a.v.data, p, size_t(a.type().bytes()), 0); }
  void done() {
    cuda::synchronize(0);
    for (auto [p, b] : live) cuda_free(p, b, 0);
    live.clear();
  }
  void sort(const SortLines& s, const Arr& x, Arr& out) {
    void* o = up(out);
    cuda_sort_lines(s, up(x), static_cast<int64_t*>(o), l);
    down(out, o);
    done();
  }
  void forward(const AttentionShape& s, const Arr& q, const Arr& k, const Arr& v, Arr& out) {
    void* o = up(out);
    cuda_attention_forward(s, up(q), up(k), up(v), o, l);
    down(out, o);
    done();
  }
  void backward(const AttentionShape& s, const Arr& q, const Arr& k, const Arr& v, const Arr& out,
                const Arr& g, Arr* dq, Arr* dk, Arr* dv) {
    void* d[3] = {dq ? up(*dq) : nullptr, dk ? up(*dk) : nullptr, dv ? up(*dv) : nullptr};
    cuda_attention_backward(s, up(q), up(k), up(v), up(out), up(g), d[0], d[1], d[2], l);
    Arr* a[3] = {dq, dk, dv};
    for (int i = 0; i < 3; ++i)
      if (a[i]) down(*a[i], d[i]);
    done();
  }
  void cluster_forward(const ClusterShape& s, const Arr& h, const Arr& w, const Arr& t, Arr& out) {
    void* o = up(out);
    cuda_cluster_logprob_forward(s, up(h), up(w), static_cast<const int64_t*>(up(t)), o, l);
    down(out, o);
    done();
  }
  void cluster_backward(const ClusterShape& s, const Arr& h, const Arr& w, const Arr& t,
                        const Arr& g, Arr* dh, Arr* dw) {
    void* d[2] = {dh ? up(*dh) : nullptr, dw ? up(*dw) : nullptr};
    cuda_cluster_logprob_backward(s, up(h), up(w), static_cast<const int64_t*>(up(t)), up(g), d[0],
                                  d[1], l);
    Arr* a[2] = {dh, dw};
    for (int i = 0; i < 2; ++i)
      if (a[i]) down(*a[i], d[i]);
    done();
  }
};

}  // namespace

TEST_CASE("the sort and attention library kernels compile with NVRTC, every kernel an entry") {
  if (nvrtc_version().empty()) {
    MESSAGE("skipped: this build has no NVRTC");
    return;
  }
  const std::vector<std::string>& names = cuda_library_kernel_names();
  for (int arch : {80, 90}) {
    CAPTURE(arch);
    const CudaBinary bin = nvrtc_compile(cuda_library_source(), names.front(), arch, true);
    CHECK(bin.log.find("warning") == std::string::npos);
    CHECK(bin.ptx.find(".maxntid 1024, 1, 1") !=
          std::string::npos);  // a block sort's 1024 threads fit
    for (const std::string& name : names) {
      CAPTURE(name);
      CHECK(bin.ptx.find(".entry " + name + "(") != std::string::npos);
    }
  }
}

TEST_CASE(
    "the sort launcher under emulation equals the reference argsort: every dtype, "
    "directions, ties, NaN, counts, short and long lines, inner dims") {
  for (const std::string& name : cuda_library_kernel_names()) CHECK(host_module().has_kernel(name));
  OnHost host;
  check_sorts(host);
  CHECK(host.l.launches > 0);
}

TEST_CASE(
    "the attention launchers under emulation equal the reference kernels: forward and "
    "gradients, causal or not, f32 and f64") {
  OnHost host;
  check_attention(host);
}

TEST_CASE(
    "the cluster log-probability launchers under emulation equal the reference kernels: forward "
    "and every mask of gradients, rows outside the cluster, f32 and f64") {
  OnHost host;
  check_cluster(host);
}

TEST_CASE("the sort and attention library kernels on a GPU equal the reference kernels") {
  KILN_REQUIRE_GPU();
  OnDevice dev;
  check_sorts(dev);
  check_attention(dev);
  check_cluster(dev);
  // A long line (one line of 2^20 elements: 8 radix passes over 512 tiles).
  std::mt19937 rng(3);
  const int64_t n = int64_t(1) << 20;
  const Arr x = arr(DType::f32, {n}, test::sort_inputs(DType::f32, n, rng));
  const Attrs attrs{
      {AttrKey::dim, int64_t{0}}, {AttrKey::descending, int64_t{0}}, {AttrKey::count, n}};
  Arr want = empty(DType::i64, {n}), got = empty(DType::i64, {n});
  const std::vector<View> in{x.v};
  reference_kernel(OpKind::argsort, attrs, in, want.v);
  dev.sort(sort_lines_for(x.type(), attrs), x, got);
  CHECK(values(got.v) == values(want.v));
}
