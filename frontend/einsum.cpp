// einsum: sums of products over index letters, as torch.einsum. Each pair of
// operands contracts with one (batched) matmul: letters only one operand has
// and the output lacks are summed first; the rest are grouped as batch (both
// operands and the output), contracted (both, not the output), left and right
// (one operand and the output); the operands are permuted and reshaped to
// [batch, left, contracted] x [batch, contracted, right]. More operands are
// contracted left to right, keeping the letters later ones or the output need.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "frontend/dispatch.h"
#include "frontend/tensor.h"

namespace kiln {

using detail::here;

namespace {

struct Term {
  Tensor t;
  std::string letters;
};

// `t` with the letters that `keep` lacks summed out.
Term sum_except(const Term& in, const std::string& keep, Loc l) {
  std::vector<int64_t> dims;
  std::string rest;
  for (size_t i = 0; i < in.letters.size(); ++i) {
    if (keep.find(in.letters[i]) == std::string::npos)
      dims.push_back(static_cast<int64_t>(i));
    else
      rest += in.letters[i];
  }
  if (dims.empty()) return in;
  return {in.t.sum(dims, false, l), rest};
}

// `in` permuted to the letter order `order` (a permutation of its letters).
Tensor permuted(const Term& in, const std::string& order, Loc l) {
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(static_cast<int64_t>(in.letters.find(c)));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  return identity ? in.t : in.t.permute(perm, l);
}

int64_t size_of(const Term& in, char c) {
  return in.t.size(static_cast<int64_t>(in.letters.find(c)));
}

// The contraction of two terms, keeping the letters in `keep`.
Term contract(const Term& a0, const Term& b0, const std::string& keep, Loc l) {
  auto in = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  std::string keep_a = keep + b0.letters, keep_b = keep + a0.letters;
  Term a = sum_except(a0, keep_a, l), b = sum_except(b0, keep_b, l);
  std::string batch, left, right, inner;
  for (char c : a.letters) {
    if (in(b.letters, c))
      (in(keep, c) ? batch : inner) += c;
    else
      left += c;
  }
  for (char c : b.letters)
    if (!in(a.letters, c)) right += c;
  auto prod = [](const Term& t, const std::string& ls) {
    int64_t p = 1;
    for (char c : ls) p *= size_of(t, c);
    return p;
  };
  const int64_t nb = prod(a, batch), nl = prod(a, left), nk = prod(a, inner), nr = prod(b, right);
  Tensor am = permuted(a, batch + left + inner, l).reshape({nb, nl, nk}, l);
  Tensor bm = permuted(b, batch + inner + right, l).reshape({nb, nk, nr}, l);
  Shape out_shape;
  for (char c : batch + left) out_shape.push_back(size_of(a, c));
  for (char c : right) out_shape.push_back(size_of(b, c));
  return {am.matmul(bm, l).reshape(out_shape, l), batch + left + right};
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, Loc l) {
  const SourceLoc where = here(l);
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  auto fail = [&](const std::string& why) {
    return Error("einsum(\"" + equation + "\"): " + why, where);
  };
  if (eq.find("...") != std::string::npos)
    throw fail("ellipsis (...) is not supported (expected one letter per dim)");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',')
      terms.emplace_back();
    else
      terms.back() += c;
  }
  if (terms.size() != operands.size())
    throw fail(std::to_string(terms.size()) + " operand terms for " +
               std::to_string(operands.size()) + " tensors (expected one term per tensor)");
  std::map<char, int64_t> sizes, count;
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string& t = terms[i];
    if (static_cast<int64_t>(t.size()) != operands[i].dim())
      throw fail("term '" + t + "' has " + std::to_string(t.size()) +
                 " letters for a tensor of shape " + shape_str(operands[i].sizes()));
    for (size_t j = 0; j < t.size(); ++j) {
      const char c = t[j];
      if (!std::isalpha(static_cast<unsigned char>(c)))
        throw fail(std::string("unexpected '") + c + "'");
      if (t.find(c) != j)
        throw fail(std::string("letter '") + c + "' twice in term '" + t +
                   "' (diagonals are not supported)");
      const int64_t s = operands[i].size(static_cast<int64_t>(j));
      auto [it, fresh] = sizes.emplace(c, s);
      if (!fresh && it->second != s)
        throw fail(std::string("letter '") + c + "' has sizes " + std::to_string(it->second) +
                   " and " + std::to_string(s));
      ++count[c];
    }
  }
  std::string out;
  if (arrow == std::string::npos) {
    for (auto& [c, n] : count)
      if (n == 1) out += c;
  } else {
    out = eq.substr(arrow + 2);
    for (size_t j = 0; j < out.size(); ++j) {
      if (!count.count(out[j]))
        throw fail(std::string("output letter '") + out[j] + "' is in no operand");
      if (out.find(out[j]) != j) throw fail(std::string("output letter '") + out[j] + "' twice");
    }
  }
  Term acc{operands.at(0), terms[0]};
  for (size_t i = 1; i < operands.size(); ++i) {
    std::string keep = out;
    for (size_t j = i + 1; j < terms.size(); ++j) keep += terms[j];
    acc = contract(acc, Term{operands[i], terms[i]}, keep, l);
  }
  acc = sum_except(acc, out, l);
  return permuted(acc, out, l);
}

}  // namespace kiln
