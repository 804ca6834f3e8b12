// Program-level helpers: input data from a seed, feature names.
#include <algorithm>
#include <cmath>

#include "ir/error.h"
#include "tools/fuzz/program.h"

namespace kiln::fuzz {

std::vector<double> input_values(const Input& in) {
  Rng r(in.data_seed);
  std::vector<double> v(static_cast<size_t>(numel(in.shape)));
  for (auto& x : v) {
    x = std::round((r.unit() * 4 - 2) * 1024) / 1024;  // exact in f32, no tiny values
    if (x == 0) x = 0.5;
  }
  return v;
}

namespace {
struct FeatureName {
  const char* name;
  Feature bit;
};
constexpr FeatureName kFeatureNames[] = {
    {"detach", kDetach},
    {"backward-inside", kBackwardInside},
    {"backward-outside", kBackwardOutside},
    {"nograd", kNoGrad},
    {"inplace", kInPlace},
    {"views", kViews},
    {"reductions", kReductions},
    {"matmul", kMatmul},
    {"captured", kCaptured},
    {"f32", kFloat32},
    {"optimizer", kOptimizer},
    {"compare", kCompare},
    {"inplace-recorded", kInPlaceRecorded},
    {"indexing", kIndexing},
    {"composites", kComposites},
    {"zero-size", kZeroSize},
};
}  // namespace

uint32_t parse_features(const std::string& list) {
  uint32_t bits = 0;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string word = list.substr(start, end - start);
    if (!word.empty()) {
      auto it = std::find_if(std::begin(kFeatureNames), std::end(kFeatureNames),
                             [&](const FeatureName& f) { return word == f.name; });
      KILN_CHECK(it != std::end(kFeatureNames), "unknown feature '", word, "' (expected one of ",
                 feature_names(), ")");
      bits |= it->bit;
    }
    start = end + 1;
  }
  return bits;
}

std::string feature_names() {
  std::string s;
  for (const auto& f : kFeatureNames) {
    if (!s.empty()) s += ',';
    s += f.name;
  }
  return s;
}

}  // namespace kiln::fuzz
