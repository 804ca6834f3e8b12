// The differential fuzzer's programs: a random tensor program is data (a list
// of instructions over numbered values), not code text, so the same program
// can be generated from a seed, run eagerly and traced, shrunk by deleting
// instructions, and printed as C++ (tools/fuzz/reproducer.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace kiln::fuzz {

/// Portable PRNG (splitmix64): the same seed gives the same programs on every
/// platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (n > 0).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  /// Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }
  /// Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }

 private:
  uint64_t s_;
};

/// Features the generator may use; each can be left out (--without).
enum Feature : uint32_t {
  kDetach = 1u << 0,
  kBackwardInside = 1u << 1,   // mode: backward() inside the traced body
  kBackwardOutside = 1u << 2,  // mode: backward() on the traced function's loss
  kNoGrad = 1u << 3,           // NoGradGuard blocks
  kInPlace = 1u << 4,          // add_, mul_, ... on intermediates
  kViews = 1u << 5,            // reshape, permute, slice, expand, ...
  kReductions = 1u << 6,
  kMatmul = 1u << 7,
  kCaptured = 1u << 8,    // tensors captured by the body (parameters)
  kFloat32 = 1u << 9,     // some programs in f32 (else all f64)
  kOptimizer = 1u << 10,  // an SGD or Adam step after a backward inside the body
  kCompare = 1u << 11,    // comparisons and where
  // In-place writes to storage the autograd tape saved: a backward that reads
  // the old value raises "modified by an in-place operation", eagerly and traced.
  kInPlaceRecorded = 1u << 12,
  kIndexing = 1u << 13,    // advanced indexing, x.index({...}) and index_put_
  kComposites = 1u << 14,  // libtorch's tensor functions of frontend/tensor_extra.h
  // Tensors with a dim of size 0 (inputs, empty slices, index tensors and
  // pieces), reductions over empty dims, and the calls PyTorch refuses on them.
  kZeroSize = 1u << 15,
  kAllFeatures = (1u << 16) - 1,
  kDefaultFeatures = kAllFeatures,
};

/// "detach,backward-inside" -> the bits; throws kiln::Error on an unknown name.
uint32_t parse_features(const std::string& list);
/// The names of every feature, comma separated.
std::string feature_names();

enum class Op : uint8_t {
#define KILN_FUZZ_OP(name, arity) name,
#include "tools/fuzz/ops.def"
#undef KILN_FUZZ_OP
};
const char* op_name(Op op);
/// Number of value operands of an op (-1: one or more).
int op_arity(Op op);

/// One instruction: an op over earlier values, producing value number
/// `inputs.size() + index`. Markers (nograd_begin/end) produce an unused value.
/// What PyTorch does with the call, as the generator worked it out, is checked
/// on the eager run (tools/fuzz/body.cpp): the result's shape, a value every
/// element must have (a sum over an empty dim is 0, a mean NaN), or an error.
struct Instr {
  Instr() = default;
  Instr(Op op, std::vector<int> operands, std::vector<int64_t> ints, double number)
      : op(op), operands(std::move(operands)), ints(std::move(ints)), number(number) {}

  Op op{};
  std::vector<int> operands;    // value numbers
  std::vector<int64_t> ints;    // dims, shapes, indices (op specific)
  double number = 0;            // a scalar operand (op specific)
  std::optional<Shape> shape;   // the result's shape by PyTorch's rules
  std::optional<double> value;  // every element's value (NaN: every element NaN)
  bool throws = false;          // PyTorch raises here: the program ends at this call
};

/// An input of the body: an argument (fresh each call) or a captured tensor
/// (one tensor across calls: a parameter of the traced plan).
struct Input {
  bool captured = false;
  bool requires_grad = false;
  Shape shape;
  uint64_t data_seed = 0;  // values uniform in [-2, 2], from this seed
};

/// How gradients enter the program.
enum class Mode : uint8_t {
  backward_outside,  // the body returns the loss; backward() runs on the result
  backward_inside,   // the body calls loss.backward() itself
  no_grad,           // no backward at all
};
enum class Optimizer : uint8_t { none, sgd, adam };

struct Program {
  DType dtype = DType::f64;
  std::vector<Input> inputs;
  std::vector<Instr> instrs;
  std::vector<int> outputs;  // values returned; the loss is the weighted sum of their sums
  Mode mode = Mode::backward_outside;
  Optimizer optimizer = Optimizer::none;  // backward_inside only: steps the captured tensors
  int calls = 2;                          // calls of the body per run (the second one is cached)

  int num_values() const { return static_cast<int>(inputs.size() + instrs.size()); }
};

/// The values of an input (row-major), from its data seed: multiples of 1/1024
/// in [-2, 2] (exact in f32), never 0.
std::vector<double> input_values(const Input& in);

/// A random valid program from `seed`, using only `features`.
Program generate(uint64_t seed, uint32_t features);

}  // namespace kiln::fuzz
