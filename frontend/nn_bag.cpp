// embedding_bag, bilinear, EmbeddingBag and Bilinear (frontend/nn_bag.h).
//
// embedding_bag numbers each index position with its bag: a 1 added at every
// bag's first position (index_add at the offsets), summed along the positions
// (cumsum), so the rows [n, D] gathered from the table are reduced by
// index_add into [B, D] (sum, mean) in O(n D). Max takes a running maximum
// within each bag (a segmented scan of log2(n) steps, each comparing a row
// with the one 2^k before it when both lie in one bag) and reads each bag's
// last row. No step depends on the offsets' values, so a trace holds for any.
#include "frontend/nn_bag.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"
#include "frontend/nn_parity.h"
#include "frontend/trace_state.h"

namespace kiln::nn {

using detail::here;

const char* embedding_bag_mode_name(EmbeddingBagMode mode) {
  switch (mode) {
    case EmbeddingBagMode::Sum:
      return "sum";
    case EmbeddingBagMode::Mean:
      return "mean";
    case EmbeddingBagMode::Max:
      return "max";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(const std::string& what, Loc l) {
  throw Error("embedding_bag: " + what, here(l));
}

// Row i of x [n, D] becomes the maximum of the rows j <= i with bag[j] == bag[i]
// (bags are runs of consecutive positions).
Tensor running_max_per_bag(Tensor x, const Tensor& bag, Loc l) {
  const int64_t n = x.size(0), dim = x.size(1);
  const TensorOptions like = TensorOptions(x.dtype()).device(x.device());
  for (int64_t k = 1; k < n; k *= 2) {
    Tensor before = cat({full({k, dim}, Scalar(-std::numeric_limits<double>::infinity()), like, l),
                         x.narrow(0, 0, n - k, l)},
                        0, l);
    Tensor bag_before =
        cat({full({k}, Scalar(-1), TensorOptions(bag.dtype()).device(bag.device()), l),
             bag.narrow(0, 0, n - k, l)},
            0, l);
    x = where(bag_before.eq(bag, l).unsqueeze(1, l), x.maximum(before, l), x, l);
  }
  return x;
}

}  // namespace

namespace functional {

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const EmbeddingBagFuncOptions& o,
                     Loc l) {
  const EmbeddingBagMode mode = o.mode();
  if (o.max_norm() || o.scale_grad_by_freq() || o.sparse())
    fail(
        "max_norm, scale_grad_by_freq and sparse are not supported (Kiln's embedding has dense "
        "gradients and leaves the table's norms alone)",
        l);
  if (weight.dim() != 2 || !is_floating(weight.dtype()))
    fail("expected a floating weight [num_embeddings, embedding_dim], got " +
             shape_str(weight.sizes()),
         l);
  if (is_floating(input.dtype()) || input.dtype() == kBool)
    fail(std::string("expected integer indices, got ") + dtype_name(input.dtype()), l);
  const int64_t table = weight.size(0), dim = weight.size(1);
  const TensorOptions like = TensorOptions(weight.dtype()).device(weight.device());
  const TensorOptions index_like = TensorOptions(kInt64).device(input.device());
  Tensor offsets = o.offsets();
  int64_t bags = 0;
  if (input.dim() == 2) {
    if (offsets.defined())
      fail("expected no offsets with a 2-D input [B, N] (each row is a bag), got offsets " +
               shape_str(offsets.sizes()),
           l);
    if (o.include_last_offset())
      fail("include_last_offset applies to a 1-D input with offsets, got a 2-D input " +
               shape_str(input.sizes()),
           l);
    bags = input.size(0);
    offsets = arange(Scalar(0), Scalar(bags * input.size(1)),
                     Scalar(std::max<int64_t>(input.size(1), 1)), index_like, l);
  } else if (input.dim() == 1) {
    if (!offsets.defined() || offsets.dim() != 1 || is_floating(offsets.dtype()))
      fail("expected integer offsets [B] (each bag's first position) with a 1-D input, got " +
               (offsets.defined() ? shape_str(offsets.sizes()) : std::string("none")),
           l);
    bags = offsets.size(0) - (o.include_last_offset() ? 1 : 0);
    if (bags < 0) fail("expected offsets [B + 1] with include_last_offset, got [0]", l);
    offsets = offsets.to(kInt64, l);
  } else {
    fail("expected a 1-D input with offsets or a 2-D input [B, N], got " + shape_str(input.sizes()),
         l);
  }
  const Tensor& psw = o.per_sample_weights();
  if (psw.defined()) {
    if (mode != EmbeddingBagMode::Sum)
      fail(std::string("per_sample_weights are only supported in mode sum, got mode ") +
               embedding_bag_mode_name(mode),
           l);
    if (psw.sizes() != input.sizes() || !is_floating(psw.dtype()))
      fail("expected floating per_sample_weights of the input's shape " + shape_str(input.sizes()) +
               ", got " + shape_str(psw.sizes()),
           l);
  }
  int64_t padding = -1;
  if (o.padding_idx()) {
    padding = *o.padding_idx();
    if (padding < -table || padding >= table)
      fail("padding_idx " + std::to_string(padding) + " is not a row of the table", l);
    if (padding < 0) padding += table;
  }
  const int64_t n = input.numel();
  const int64_t rows_out = offsets.size(0);  // B, or B + 1 with include_last_offset
  if (n == 0 || bags == 0) return zeros({bags, dim}, like, l);
  Tensor idx = input.reshape({n}, l);
  offsets = detail::checked_indices(offsets, n + 1, "embedding_bag offsets", l);
  if (!current_trace() && offsets.narrow(0, 0, 1, l).item<int64_t>() != 0)
    fail("expected offsets[0] == 0 (the first bag starts at position 0), got " +
             std::to_string(offsets.narrow(0, 0, 1, l).item<int64_t>()),
         l);

  // Each position's bag: how many bags start at or before it, less one.
  Tensor bag = zeros({n + 1}, index_like, l)
                   .index_add(0, offsets, ones({rows_out}, index_like, l), 1, l)
                   .narrow(0, 0, n, l)
                   .cumsum(0, l)
                   .sub(Scalar(1), l);
  Tensor rows = embedding(idx, weight, l);  // [n, D]
  Tensor keep = padding >= 0 ? idx.ne(Scalar(static_cast<long long>(padding)), l) : Tensor();
  Tensor count;  // the rows of each bag that take part
  if (mode != EmbeddingBagMode::Sum)
    count = zeros({rows_out}, like, l)
                .index_add(0, bag, keep.defined() ? keep.to(weight.dtype(), l) : ones({n}, like, l),
                           1, l);
  Tensor out;
  if (mode == EmbeddingBagMode::Max) {
    Tensor x = keep.defined()
                   ? rows.masked_fill(keep.logical_not(l).unsqueeze(1, l),
                                      Scalar(-std::numeric_limits<double>::infinity()), l)
                   : rows;
    x = running_max_per_bag(x, bag, l);
    // Each bag's last position: where the next bag starts (or the input ends), less one.
    Tensor ends =
        cat({offsets.narrow(0, 1, rows_out - 1, l), full({1}, Scalar(n), index_like, l)}, 0, l);
    Tensor last = ends.sub(Scalar(1), l).clamp_min(Scalar(0), l);
    out = where(count.gt(Scalar(0), l).unsqueeze(1, l), x.index_select(0, last, l),
                zeros({}, like, l), l);
  } else {
    Tensor w = psw.defined() ? psw.reshape({n}, l) : Tensor();
    if (keep.defined())
      w = w.defined() ? w.mul(keep.to(w.dtype(), l), l) : keep.to(weight.dtype(), l);
    Tensor terms = w.defined() ? rows.mul(w.unsqueeze(1, l), l) : rows;
    out = zeros({rows_out, dim}, like, l).index_add(0, bag, terms, 1, l);
    if (mode == EmbeddingBagMode::Mean)
      out = out.div(count.clamp_min(Scalar(1), l).unsqueeze(1, l), l);
  }
  return rows_out == bags ? out : out.narrow(0, 0, bags, l);
}

Tensor bilinear(const Tensor& input1, const Tensor& input2, const Tensor& weight,
                const Tensor& bias, Loc l) {
  if (weight.dim() != 3)
    throw Error("bilinear: expected a weight [out, in1, in2], got " + shape_str(weight.sizes()),
                here(l));
  const int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  Shape lead1 = input1.sizes(), lead2 = input2.sizes();
  if (input1.dim() == 0 || input2.dim() == 0 || lead1.back() != in1 || lead2.back() != in2 ||
      input1.dim() != input2.dim() || !std::equal(lead1.begin(), lead1.end() - 1, lead2.begin()))
    throw Error("bilinear: expected input1 [..., " + std::to_string(in1) + "] and input2 [..., " +
                    std::to_string(in2) + "] with the same leading dims, got " +
                    shape_str(input1.sizes()) + " and " + shape_str(input2.sizes()),
                here(l));
  if (bias.defined() && bias.sizes() != Shape{out})
    throw Error(
        "bilinear: expected a bias [" + std::to_string(out) + "], got " + shape_str(bias.sizes()),
        here(l));
  // (x1 W_o) for every o at once: x1 [M, in1] times W as [in1, out * in2].
  Tensor x1 = input1.reshape({-1, in1}, l), x2 = input2.reshape({-1, in2}, l);
  Tensor w = weight.permute({1, 0, 2}, l).reshape({in1, out * in2}, l);
  Tensor y =
      x1.matmul(w, l).reshape({-1, out, in2}, l).mul(x2.unsqueeze(1, l), l).sum(-1, false, l);
  if (bias.defined()) y = y.add(bias, 1, l);
  lead1.back() = out;
  return y.reshape(lead1, l);
}

}  // namespace functional

EmbeddingBagImpl::EmbeddingBagImpl(const EmbeddingBagOptions& o)
    : Module("EmbeddingBag"), options(o) {
  const int64_t padding = kiln::detail::register_embedding_table(
      *this,
      "EmbeddingBag(" + std::to_string(o.num_embeddings()) + ", " +
          std::to_string(o.embedding_dim()) + ")",
      o.num_embeddings(), o.embedding_dim(), o.padding_idx(), o._weight(),
      o.max_norm() || o.scale_grad_by_freq() || o.sparse(), weight);
  if (padding >= 0) options.padding_idx(padding);
}

Tensor EmbeddingBagImpl::forward(const Tensor& input, const Tensor& offsets,
                                 const Tensor& per_sample_weights, Loc l) {
  return functional::embedding_bag(input, weight,
                                   functional::EmbeddingBagFuncOptions()
                                       .offsets(offsets)
                                       .mode(options.mode())
                                       .per_sample_weights(per_sample_weights)
                                       .include_last_offset(options.include_last_offset())
                                       .padding_idx(options.padding_idx()),
                                   l);
}

std::string EmbeddingBagImpl::repr() const {
  std::ostringstream s;
  s << "EmbeddingBag(num_embeddings=" << options.num_embeddings()
    << ", embedding_dim=" << options.embedding_dim()
    << ", mode=" << embedding_bag_mode_name(options.mode());
  if (options.padding_idx()) s << ", padding_idx=" << *options.padding_idx();
  s << ")";
  return s.str();
}

EmbeddingBag EmbeddingBag::from_pretrained(const Tensor& embeddings,
                                           const EmbeddingBagFromPretrainedOptions& o) {
  if (embeddings.dim() != 2)
    throw Error("EmbeddingBag::from_pretrained: expected embeddings [V, D], got " +
                shape_str(embeddings.sizes()));
  EmbeddingBag bag(EmbeddingBagOptions(embeddings.size(0), embeddings.size(1))
                       ._weight(embeddings)
                       .max_norm(o.max_norm())
                       .norm_type(o.norm_type())
                       .scale_grad_by_freq(o.scale_grad_by_freq())
                       .mode(o.mode())
                       .sparse(o.sparse())
                       .include_last_offset(o.include_last_offset())
                       .padding_idx(o.padding_idx()));
  bag->weight.requires_grad_(!o.freeze());
  return bag;
}

BilinearImpl::BilinearImpl(const BilinearOptions& o) : Module("Bilinear"), options(o) {
  if (o.in1_features() <= 0 || o.in2_features() <= 0 || o.out_features() <= 0)
    throw Error("Bilinear(" + std::to_string(o.in1_features()) + ", " +
                std::to_string(o.in2_features()) + ", " + std::to_string(o.out_features()) +
                "): feature counts must be positive");
  const double bound = 1.0 / std::sqrt(static_cast<double>(o.in1_features()));
  weight =
      register_parameter("weight", empty({o.out_features(), o.in1_features(), o.in2_features()}));
  init::uniform_(weight, -bound, bound);
  if (o.bias()) {
    bias = register_parameter("bias", empty({o.out_features()}));
    init::uniform_(bias, -bound, bound);
  }
}

std::string BilinearImpl::repr() const {
  std::ostringstream s;
  s << "Bilinear(in1_features=" << options.in1_features()
    << ", in2_features=" << options.in2_features() << ", out_features=" << options.out_features()
    << ", bias=" << (bias.defined() ? "true" : "false") << ")";
  return s.str();
}

}  // namespace kiln::nn

namespace kiln {

int64_t detail::register_embedding_table(nn::Module& owner, const std::string& what, int64_t n,
                                         int64_t dim, std::optional<int64_t> padding_idx,
                                         const Tensor& given, bool unsupported, Tensor& weight) {
  if (n <= 0 || dim <= 0) throw Error(what + ": expected sizes > 0");
  if (unsupported)
    throw Error(what +
                ": max_norm, scale_grad_by_freq and sparse are not supported (Kiln's "
                "embedding has dense gradients and leaves the table's norms alone)");
  int64_t padding = -1;
  if (padding_idx) {
    const int64_t p = *padding_idx;
    if (p < -n || p >= n)
      throw Error(what + ": padding_idx " + std::to_string(p) + " is not a row of the table");
    padding = p < 0 ? p + n : p;
  }
  if (given.defined()) {
    if (given.sizes() != Shape{n, dim})
      throw Error(what + ": expected _weight of shape [" + std::to_string(n) + ", " +
                  std::to_string(dim) + "], got " + shape_str(given.sizes()));
    weight = owner.register_parameter("weight", given);
  } else {
    weight = owner.register_parameter("weight", randn({n, dim}));
    if (padding >= 0) {
      NoGradGuard no_grad;
      weight.select(0, padding).fill_(Scalar(0.0));
    }
  }
  return padding;
}

}  // namespace kiln
