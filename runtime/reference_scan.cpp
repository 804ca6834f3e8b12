// Reference kernels for scans (ir/ops.def's scan rows: cumsum, cumprod,
// logcumsumexp): along `dim`, each output the running fold of the elements up
// to it, started at the row's identity and combined in order with the row's
// combine op, in the result's dtype (the compiled kernels fold in the same
// order and type). Parallel over the positions outside `dim`; long lines fold
// in chunks, in parallel (ir/scan_chunks.h), as the compiled scans do.
#include <algorithm>
#include <limits>

#include "ir/error.h"
#include "ir/scan_chunks.h"
#include "runtime/reference.h"
#include "runtime/reference_functors.h"
#include "runtime/reference_impl.h"
#include "runtime/strided_loop.h"
#include "runtime/thread_pool.h"

namespace kiln::detail {
namespace {

constexpr int64_t kScanGrain = 1 << 14;

}  // namespace

void ref_scan(OpKind k, const Attrs& attrs, const View& in, const View& out) {
  KILN_CHECK(out.shape == in.shape, op_name(k), ": output ", shape_str(out.shape), " for input ",
             shape_str(in.shape));
  const OpInfo& info = op_info(k);
  KILN_CHECK(info.scalar == ScalarRule::scan, "reference kernel: ", op_name(k), " is not a scan");
  std::vector<std::shared_ptr<Storage>> keep;
  const View x = in.dtype == out.dtype ? in : [&] {
    View c = scratch(in.shape, out.dtype, keep);
    copy_to(in, c);
    return c;
  }();
  if (out.numel() == 0) return;
  const int64_t rank = out.rank();
  const int64_t d = normalize_dim(attrs.i(AttrKey::dim), std::max<int64_t>(rank, 1));
  const bool reverse = attrs.i(AttrKey::reverse, 0) != 0;
  const int64_t n = rank == 0 ? 1 : out.shape[size_t(d)];
  const int64_t xs = rank == 0 ? 0 : x.strides[size_t(d)],
                os = rank == 0 ? 0 : out.strides[size_t(d)];
  // The lines along d: every position with coordinate d at 0.
  Shape lines = out.shape;
  if (rank > 0) lines[size_t(d)] = 1;
  // Long lines fold in chunks (ir/scan_chunks.h), as the compiled scans do.
  const int64_t chunk = rank == 0 ? 0 : scan_chunk(out.shape, d);
  const int64_t per_line = chunk == 0 ? 1 : (n + chunk - 1) / chunk;
  const int64_t span = chunk == 0 ? n : chunk;
  visit_dtype(out.dtype, [&](auto t) {
    using T = decltype(t);
    // Folds with f, the combine op's scalar functor (reference_functors.h).
    auto scan_with = [&](auto f) {
      const T start = identity_value<T>(info.identity);
      const int64_t xstep = reverse ? -xs : xs, ostep = reverse ? -os : os;
      // A line's first element in the scan's order, in x and in out.
      auto x_line = [&](int64_t line) {
        return x.ptr<T>() + offsets_at(line, lines, x.strides, out.strides).first +
               (reverse ? (n - 1) * xs : 0);
      };
      auto out_line = [&](int64_t line) {
        return out.ptr<T>() + offsets_at(line, lines, x.strides, out.strides).second +
               (reverse ? (n - 1) * os : 0);
      };
      auto combine = [&](T a, T b) { return static_cast<T>(f(a, b)); };
      // Every chunk (every line when lines fold whole) folded from the identity.
      parallel_for(numel(lines) * per_line, std::max<int64_t>(1, kScanGrain / span),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t u = begin; u < end; ++u) {
                       const int64_t line = u / per_line, first = (u % per_line) * span;
                       const int64_t len = std::min(span, n - first), xd = xstep, od = ostep;
                       const T* xp = x_line(line) + first * xd;
                       T* op_out = out_line(line) + first * od;
                       T acc = start;
                       for (int64_t p = 0; p < len; ++p, xp += xd, op_out += od) {
                         acc = combine(acc, *xp);
                         *op_out = acc;
                       }
                     }
                   });
      if (per_line == 1) return;
      // The running value before each chunk, then each chunk after the first
      // combined with it.
      std::vector<T> before(size_t(numel(lines) * per_line));
      for (int64_t line = 0; line < numel(lines); ++line) {
        const T* op_out = out_line(line);
        T acc = start;
        for (int64_t c = 1; c < per_line; ++c) {
          acc = combine(acc, op_out[(c * span - 1) * ostep]);
          before[size_t(line * per_line + c)] = acc;
        }
      }
      parallel_for(numel(lines) * per_line, 1, [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t line = u / per_line, c = u % per_line, first = c * span;
          if (c == 0) continue;
          const int64_t len = std::min(span, n - first);
          const T b = before[size_t(u)];
          // The chunk's elements in memory order (the combine is elementwise).
          T* o = out_line(line) + first * ostep;
          if (ostep < 0) o += (len - 1) * ostep;
          const int64_t step = ostep < 0 ? -ostep : ostep;
          if (step == 1) {
            for (int64_t p = 0; p < len; ++p) o[p] = combine(b, o[p]);
          } else {
            for (int64_t p = 0; p < len; ++p) o[p * step] = combine(b, o[p * step]);
          }
        }
      });
    };
    // Sums and products fold with their functor inlined; any other combine op
    // through its scalar functor's function.
    if (info.combine == OpKind::add) return scan_with(Add{});
    if (info.combine == OpKind::mul) return scan_with(Mul{});
    const CombineFn<T> fn = combine_fn<T>(info.combine);
    KILN_CHECK(fn, "reference scan: ", op_name(k), "'s combine op ", op_name(info.combine),
               " has no scalar functor");
    scan_with(fn);
  });
}

}  // namespace kiln::detail
