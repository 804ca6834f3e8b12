// split_column_sums (see split_column_sums.h): a sum over the leading dims in
// chunks of rows, then over the chunks.
#include "passes/split_column_sums.h"

#include "ir/builder.h"
#include "passes/graph_copy.h"

namespace kiln {

int64_t column_sum_rows_per_chunk(const Shape& shape, const std::vector<int64_t>& dims) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != int64_t(i)) return 0;
  if (dims.empty() || dims.size() >= shape.size()) return 0;
  int64_t rows = 1, cols = 1;
  for (size_t d = 0; d < shape.size(); ++d) (d < dims.size() ? rows : cols) *= shape[d];
  if (cols < 16 || cols > kColumnSumMaxColumns) return 0;
  const int64_t target = kColumnSumChunk / cols;  // >= 8
  if (rows < 4 * target) return 0;
  const int64_t chunks = (rows + target - 1) / target;
  return (rows + chunks - 1) / chunks;
}

namespace {

Value reshape(Builder& b, Value x, const Shape& s) {
  return b.type(x).shape == s ? x : b.reshape(x, s);
}

// The sum `n` of x over its `lead` leading dims, in chunks of h rows.
Value split(Builder& b, const Node& n, Value x, int64_t lead, int64_t h) {
  const Shape& in = b.type(x).shape;
  int64_t rows = 1, cols = 1;
  for (size_t d = 0; d < in.size(); ++d) (int64_t(d) < lead ? rows : cols) *= in[d];
  const int64_t k = (rows + h - 1) / h, extra = k * h - rows;
  Value flat = reshape(b, x, {rows, cols});
  if (extra > 0)
    flat = b.op(OpKind::pad, {flat},
                Attrs{{AttrKey::dim, int64_t(0)},
                      {AttrKey::low, int64_t(0)},
                      {AttrKey::high, extra},
                      {AttrKey::interior, int64_t(0)}});
  const Value partial = b.sum(b.reshape(flat, {k, h, cols}), {1}, false);
  return reshape(b, b.sum(partial, {0}, false), n.type().shape);
}

// Its reduced dims, when sum `n` splits (f32 or f64 in and out), else none.
std::vector<int64_t> split_dims(const Graph& g, const Node& n) {
  if (n.op != OpKind::sum) return {};
  const DType t = n.type().dtype;
  const TensorType& in = g.type(n.operands[0]);
  if ((t != DType::f32 && t != DType::f64) || in.dtype != t) return {};
  return normalize_dims(n.attrs.ints(AttrKey::dims), in.rank());
}

}  // namespace

Graph split_column_sums(const Graph& g) {
  return replace_nodes(g, [&](Builder& b, const Node& n, Value x) -> std::optional<Value> {
    const std::vector<int64_t> dims = split_dims(g, n);
    const int64_t h =
        dims.empty() ? 0 : column_sum_rows_per_chunk(g.type(n.operands[0]).shape, dims);
    if (h == 0) return std::nullopt;
    return split(b, n, x, int64_t(dims.size()), h);
  });
}

}  // namespace kiln
