// A small sequence task written for libtorch's C++ frontend: does a series of
// readings set its record (its running maximum) in the second half? Each
// step's features come from running statistics (cummax with its indices,
// cummin, logcumsumexp) and fixed tables written as nested torch::tensor
// literals; an MLP scores every step, the scores' running maximum (cummax,
// whose gradient reaches the step that set it) and their mean feed a logistic
// output. The shapes are changed in place (unsqueeze_, squeeze_, t_,
// transpose_) as libtorch code often does. SGD trains it.
//
// Evaluation under NoGradGuard counts records (count_nonzero over one dim),
// sums with NaN gaps (nansum over one dim), tiles a pattern (tile) and fits
// the step features by least squares with torch::linalg (solve, inv, det).
//
// Every parameter starts from a formula and the data has no random draws, so
// the numbers it prints are the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding.
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <tuple>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

namespace {

const int64_t kSeries = 48;
const int64_t kSteps = 12;
const int64_t kEpochs = 60;

// n series of kSteps readings [n, kSteps]: a drifting wave, each its own.
torch::Tensor make_series(int64_t n, double phase) {
  torch::Tensor i = torch::arange(n, torch::kFloat).view({n, 1});
  torch::Tensor t = torch::arange(kSteps, torch::kFloat).view({1, kSteps});
  torch::Tensor drift = 0.08 * torch::sin(1.3 * i + phase) * t;
  return torch::sin(0.9 * t + 2.1 * i + phase) + drift + 0.2 * torch::cos(2.7 * t * (i + 1));
}

// 1 where the series' maximum is first reached in its second half.
torch::Tensor labels_of(const torch::Tensor& x) {
  torch::Tensor idx = std::get<1>(torch::cummax(x, 1));  // [n, kSteps]
  torch::Tensor last = idx.select(1, kSteps - 1);
  return (last >= kSteps / 2).to(torch::kFloat);
}

// Per-step features [n, kSteps, 4]: the reading, its distance below the
// running maximum and above the running minimum, and a soft running maximum.
torch::Tensor features(const torch::Tensor& x) {
  torch::Tensor high = std::get<0>(x.cummax(1));
  torch::Tensor low = std::get<0>(torch::cummin(x, 1));
  torch::Tensor soft = torch::logcumsumexp(x * 4, 1) / 4;
  torch::Tensor f = torch::stack({x, high - x, x - low, soft}, 0);  // [4, n, kSteps]
  f.transpose_(0, 2);                                               // [kSteps, n, 4]
  f.transpose_(0, 1);                                               // [n, kSteps, 4]
  // A fixed mixing of the four features, written as a nested literal.
  torch::Tensor mix = torch::tensor(
      {{1.0, 0.0, 0.0, 0.5}, {0.0, 1.0, 0.0, -0.5}, {0.0, 0.0, 1.0, 0.25}, {0.5, -0.5, 0.25, 1.0}});
  return torch::matmul(f, mix);
}

void init_linear(torch::nn::Linear& l, double phase) {
  torch::NoGradGuard no_grad;
  torch::Tensor w = l->weight;
  torch::Tensor i = torch::arange(w.numel(), torch::kFloat).view(w.sizes());
  w.copy_(torch::sin(i * 0.9 + phase) / std::sqrt(double(w.size(1))));
  l->bias.copy_(0.02 * torch::cos(torch::arange(l->bias.numel(), torch::kFloat) + phase));
}

struct RecordNetImpl : torch::nn::Module {
  RecordNetImpl() : step1(4, 16), step2(16, 1), out(2, 1) {
    register_module("step1", step1);
    register_module("step2", step2);
    register_module("out", out);
    init_linear(step1, 0.3);
    init_linear(step2, 0.6);
    init_linear(out, 0.9);
  }
  // feats [n, kSteps, 4] -> logits [n].
  torch::Tensor forward(const torch::Tensor& feats) {
    torch::Tensor s = step2(torch::tanh(step1(feats)));  // [n, kSteps, 1]
    s.squeeze_(2);                                       // [n, kSteps]
    // Later steps count more: a weight per step, its running best, and the mean.
    torch::Tensor w = torch::linspace(0.5, 1.5, kSteps);
    w.unsqueeze_(0);  // [1, kSteps]
    torch::Tensor best = std::get<0>(torch::cummax(s * w, 1)).select(1, kSteps - 1);
    torch::Tensor pooled = torch::stack({best, s.mean(1)}, 1);  // [n, 2]
    torch::Tensor logit = out(pooled);                          // [n, 1]
    logit.t_();                                                 // [1, n]
    return logit.squeeze(0);
  }
  torch::nn::Linear step1, step2, out;
};
TORCH_MODULE(RecordNet);

RecordNet net{nullptr};
std::unique_ptr<torch::optim::SGD> opt;

STEP(torch::Tensor, train_step, torch::Tensor feats, torch::Tensor labels) {
  opt->zero_grad();
  torch::Tensor loss = torch::binary_cross_entropy_with_logits(net->forward(feats), labels);
  loss.backward();
  opt->step();
  return loss.detach();
}

void describe(const torch::Tensor& x, const torch::Tensor& feats) {
  auto [high, at] = torch::cummax(x, 1);
  torch::Tensor steps = torch::arange(kSteps).unsqueeze(0);
  // (count_nonzero(t, 1) is ambiguous in libtorch: IntArrayRef or optional<int64_t>.)
  torch::Tensor records = torch::count_nonzero(at == steps, torch::IntArrayRef{1});
  std::printf("records %ld %ld %ld total %ld\n", (long)records[0].item<int64_t>(),
              (long)records[1].item<int64_t>(), (long)records[2].item<int64_t>(),
              (long)records.sum().item<int64_t>());
  // Readings below zero as gaps (NaN): the sums of the rest per series.
  torch::Tensor gaps = torch::where(x < 0, torch::full({}, NAN), x);
  torch::Tensor sums = torch::nansum(gaps, 1);
  std::printf("nansum %.5f %.5f mean %.5f\n", sums[0].item<float>(), sums[1].item<float>(),
              torch::nanmean(gaps, 1).mean().item<float>());
  torch::Tensor pattern = torch::tile(torch::tensor({{1, -1}, {-1, 1}}), {2});
  std::printf("tile %ld x %ld sum %ld\n", (long)pattern.size(0), (long)pattern.size(1),
              (long)(pattern * torch::tensor({{1, 2, 3, 4}, {5, 6, 7, 9}})).sum().item<int64_t>());
  std::printf("amax %.5f\n", x.amax(1).mean().item<float>());
  // Least squares: each series' mean reading from its last step's features.
  torch::Tensor a = feats.select(1, kSteps - 1);  // [n, 4]
  torch::Tensor y = x.mean(1, true);              // [n, 1]
  torch::Tensor gram = torch::matmul(a.t(), a) + 0.1 * torch::eye(4);
  torch::Tensor coef = torch::linalg::solve(gram, torch::matmul(a.t(), y), true);
  std::printf("solve %.5f %.5f %.5f %.5f\n", coef[0][0].item<float>(), coef[1][0].item<float>(),
              coef[2][0].item<float>(), coef[3][0].item<float>());
  std::printf("det %.3f inv trace %.5f\n", torch::linalg::det(gram).item<float>(),
              torch::trace(torch::linalg::inv(gram)).item<float>());
}

}  // namespace

int main() {
  torch::Tensor train_x = make_series(kSeries, 0.0), test_x = make_series(kSeries / 2, 0.35);
  torch::Tensor train_y = labels_of(train_x), test_y = labels_of(test_x);
  torch::Tensor train_f = features(train_x), test_f = features(test_x);
  std::printf("labels %.0f of %ld\n", train_y.sum().item<float>(), (long)kSeries);
  net = RecordNet();
  opt = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1));
  for (int64_t e = 0; e < kEpochs; ++e) {
    torch::Tensor loss = train_step(train_f, train_y);
    if (e % 10 == 0 || e == kEpochs - 1)
      std::printf("epoch %ld loss %.5f\n", (long)e, loss.item<float>());
  }
  torch::NoGradGuard no_grad;
  torch::Tensor pred = (net->forward(test_f) > 0).to(torch::kFloat);
  std::printf("test accuracy %.4f\n", pred.eq(test_y).to(torch::kFloat).mean().item<float>());
  describe(test_x, test_f);
  return 0;
}
