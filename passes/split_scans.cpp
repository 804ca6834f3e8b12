// split_scans (see split_scans.h): the rewrite of one long scan into its chunks.
#include "passes/split_scans.h"

#include "ir/builder.h"
#include "ir/scan_chunks.h"
#include "passes/graph_copy.h"

namespace kiln {

namespace {

Value slice(Builder& b, Value x, int64_t dim, int64_t start, int64_t end) {
  return b.op(OpKind::slice, {x},
              Attrs{{AttrKey::dim, dim},
                    {AttrKey::start, start},
                    {AttrKey::end, end},
                    {AttrKey::step, int64_t(1)}});
}

Value pad(Builder& b, Value x, int64_t dim, int64_t low, int64_t high) {
  if (low == 0 && high == 0) return x;
  return b.op(OpKind::pad, {x},
              Attrs{{AttrKey::dim, dim},
                    {AttrKey::low, low},
                    {AttrKey::high, high},
                    {AttrKey::interior, int64_t(0)}});
}

// The scan `n` of x, whose lines fold in chunks of `chunk` elements.
Value split(Builder& b, const Node& n, Value x, int64_t chunk) {
  const TensorType& t = n.type();
  const int64_t d = normalize_dim(n.attrs.i(AttrKey::dim), t.rank());
  const int64_t reverse = n.attrs.i(AttrKey::reverse, 0) != 0 ? 1 : 0;
  const int64_t len = t.shape[size_t(d)], lines = t.numel() / len;
  const int64_t m = (len + chunk - 1) / chunk, extra = m * chunk - len;
  auto scan = [&](Value v, int64_t dim) {
    return b.op(n.op, {v}, Attrs{{AttrKey::dim, dim}, {AttrKey::reverse, reverse}});
  };
  // The padding goes where the scan ends: after the line, before it with reverse.
  const int64_t low = reverse ? extra : 0;
  const Value chunks =
      b.reshape(pad(b, b.reshape(x, {lines, len}), 1, low, extra - low), {lines, m, chunk});
  const Value local = scan(chunks, 2);
  // Each chunk's fold of its own elements: its last value in the scan's direction.
  const int64_t last = reverse ? 0 : chunk - 1;
  const Value incl = scan(slice(b, local, 2, last, last + 1), 1);  // [lines, m, 1]
  // The running value before each chunk: incl of the chunk before it (the first
  // chunk's slot is a zero that `where` does not pick).
  const Value before = reverse ? pad(b, slice(b, incl, 1, 1, m), 1, 0, 1)
                               : pad(b, slice(b, incl, 1, 0, m - 1), 1, 1, 0);
  const Shape full{lines, m, chunk};
  const Value combined = b.binary(op_info(n.op).combine, b.expand(before, full), local);
  const Value index =
      b.op_typed(OpKind::arange, {}, Attrs{{AttrKey::start, 0.0}, {AttrKey::step, 1.0}},
                 TensorType{DType::i64, {m}, t.device});
  const Value first =
      b.op(OpKind::eq, {index, b.constant(double(reverse ? m - 1 : 0), DType::i64, {}, t.device)});
  const Value out = b.where(b.expand(b.reshape(first, {1, m, 1}), full), local, combined);
  const Value flat = b.reshape(out, {lines, m * chunk});
  return b.reshape(extra == 0 ? flat : slice(b, flat, 1, low, low + len), t.shape);
}

}  // namespace

Graph split_scans(const Graph& g) {
  return replace_nodes(g, [](Builder& b, const Node& n, Value x) -> std::optional<Value> {
    if (op_info(n.op).category != OpCategory::Scan || n.type().rank() == 0) return std::nullopt;
    const int64_t d = normalize_dim(n.attrs.i(AttrKey::dim), n.type().rank());
    const int64_t chunk = scan_chunk(n.type().shape, d);
    if (chunk == 0) return std::nullopt;
    return split(b, n, x, chunk);
  });
}

}  // namespace kiln
