// Tensors with a dim of size 0 and 0-D tensors where kiln-fuzz's zero-size
// programs found Kiln leaving PyTorch 1.13's rules (tools/fuzz): each case
// eagerly and traced.
#include <cmath>

#include "test_util.h"

namespace kiln {
namespace {

TEST_CASE("searchsorted and bucketize of a 0-D value give a 0-D position, as PyTorch") {
  const Tensor seq = tensor({-1.0, 0.5, 2.0});
  auto f = [&](Tensor v) {
    return std::vector<Tensor>{searchsorted(seq, v), bucketize(v, seq, false, true),
                               searchsorted(seq, Scalar(1.0))};
  };
  const Tensor v = full({}, 0.5, kFloat64);
  for (const std::vector<Tensor>& r : {f(v), jit(f)(v)}) {
    for (const Tensor& x : r) CHECK(x.sizes() == Shape{});
    CHECK(r[0].item<int64_t>() == 1);  // torch.searchsorted(seq, tensor(0.5)) = tensor(1)
    CHECK(r[1].item<int64_t>() == 2);  // right: after the equal one
    CHECK(r[2].item<int64_t>() == 2);
  }
  // Into an empty sequence every value goes at 0.
  CHECK(bucketize(v, zeros({0}, kFloat64)).sizes() == Shape{});
  CHECK(bucketize(v, zeros({0}, kFloat64)).item<int64_t>() == 0);
}

}  // namespace
}  // namespace kiln
