// A 1-D convolutional sequence classifier written for libtorch's C++
// frontend: sequences of 32 steps hold one of four shapes (a rising ramp, a
// falling ramp, a bump, a dip) at some place, over a slow wave. Conv1d,
// BatchNorm1d and CELU, then MaxPool1d; a Conv1d with twice the channels
// gated by GLU, then AvgPool1d; AdaptiveAvgPool1d and AdaptiveMaxPool1d side
// by side; a Softmin over the pooled positions weighs them for an attention
// summary; LogSigmoid gives an auxiliary "is it a ramp" loss beside
// cross_entropy. RMSprop (centered, momentum, weight decay) trains it. The
// first Conv1d has no bias: BatchNorm would cancel it, leaving centered
// RMSprop to step it on rounding noise. Evaluation under NoGradGuard prints
// accuracy and the activations that shrink or clip (ReLU6, Softsign,
// Tanhshrink, Softshrink, Hardshrink, Threshold), as modules and functions.
//
// Every parameter starts from a formula and the data has no random draws, so
// the numbers it prints are the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding.
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

namespace F = torch::nn::functional;

namespace {

const int64_t kLength = 32;
const int64_t kSequences = 64;
const int64_t kBatch = 16;
const int64_t kEpochs = 6;

// n sequences [n, 1, 32] and their kinds [n]: kind i % 4 at a place and scale
// set by i, over a wave.
std::pair<torch::Tensor, torch::Tensor> make_sequences(int64_t n) {
  torch::Tensor i = torch::arange(n, torch::kFloat).view({n, 1, 1});
  torch::Tensor t = torch::arange(kLength, torch::kFloat).view({1, 1, kLength});
  torch::Tensor kind = torch::fmod(torch::arange(n), 4);
  torch::Tensor start = 4 + torch::fmod(i * 7, 16);
  torch::Tensor u = ((t - start) / 8).clamp(0, 1) * t.ge(start).logical_and(t.lt(start + 8));
  torch::Tensor bump = torch::exp(-(t - start - 4).pow(2) / 4);
  torch::Tensor k = kind.view({n, 1, 1});
  torch::Tensor shape = torch::where(
      k.eq(0), u, torch::where(k.eq(1), (1 - u) * u.gt(0), torch::where(k.eq(2), bump, -bump)));
  torch::Tensor wave = 0.3 * torch::sin(t * 0.2 + i * 0.9);
  return {shape * (1 + 0.05 * torch::fmod(i, 5)) + wave, kind};
}

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl()
      : conv1(torch::nn::Conv1dOptions(1, 8, 5).padding(2).bias(false)),
        norm1(8),
        celu(torch::nn::CELUOptions().alpha(0.8)),
        pool1(torch::nn::MaxPool1dOptions(2)),
        conv2(torch::nn::Conv1dOptions(8, 16, 3).padding(1)),
        glu(torch::nn::GLUOptions(1)),
        pool2(torch::nn::AvgPool1dOptions(3).stride(2).padding(1)),
        adaptive_avg(4),
        adaptive_max(torch::nn::AdaptiveMaxPool1dOptions(4)),
        softmin(torch::nn::SoftminOptions(2)),
        head(8 * 8 + 8, 4),
        ramp(8 * 8, 1) {
    register_module("conv1", conv1);
    register_module("norm1", norm1);
    register_module("conv2", conv2);
    register_module("head", head);
    register_module("ramp", ramp);
  }

  // The class logits [N, 4] and the ramp logit [N].
  std::pair<torch::Tensor, torch::Tensor> forward(torch::Tensor x) {
    torch::Tensor h = pool1(celu(norm1(conv1(x))));  // [N, 8, 16]
    h = pool2(glu(conv2(h)));                        // [N, 8, 8]
    torch::Tensor pooled = torch::cat({adaptive_avg(h), adaptive_max(h)}, 2);  // [N, 8, 8]
    torch::Tensor weights = softmin(pooled);         // small values weigh most
    torch::Tensor summary = (weights * pooled).sum(2);  // [N, 8]
    torch::Tensor flat = pooled.flatten(1);
    return {head(torch::cat({flat, summary}, 1)), ramp(flat).squeeze(1)};
  }

  torch::nn::Conv1d conv1;
  torch::nn::BatchNorm1d norm1;
  torch::nn::CELU celu;
  torch::nn::MaxPool1d pool1;
  torch::nn::Conv1d conv2;
  torch::nn::GLU glu;
  torch::nn::AvgPool1d pool2;
  torch::nn::AdaptiveAvgPool1d adaptive_avg;
  torch::nn::AdaptiveMaxPool1d adaptive_max;
  torch::nn::Softmin softmin;
  torch::nn::Linear head, ramp;
};
TORCH_MODULE(Classifier);

// Every parameter from a formula: weights sin waves scaled by 1 / sqrt(fan
// in), the norm's weight near 1, biases small.
void deterministic_init(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  double k = 0;
  for (auto& named : m.named_parameters()) {
    torch::Tensor p = named.value();
    const int64_t n = p.numel();
    torch::Tensor wave = torch::sin(torch::arange(n, torch::kFloat) * 0.611 + (k += 1.0));
    const std::string& name = named.key();
    const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    if (p.dim() == 1 && !is_bias)
      p.copy_((1.0 + 0.1 * wave).view_as(p));
    else if (p.dim() == 1)
      p.copy_((0.05 * wave).view_as(p));
    else
      p.copy_((wave / std::sqrt(static_cast<double>(n / p.size(0)))).view_as(p));
  }
}

Classifier model{nullptr};
std::unique_ptr<torch::optim::RMSprop> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor x, torch::Tensor kind) {
  optimizer->zero_grad();
  auto out = model->forward(x);
  torch::Tensor is_ramp = kind.lt(2).to(torch::kFloat);
  // -log sigmoid(z) for ramps, -log sigmoid(-z) for the others.
  torch::Tensor aux = -(is_ramp * F::logsigmoid(out.second) +
                        (1 - is_ramp) * torch::nn::LogSigmoid()(-out.second))
                           .mean();
  torch::Tensor loss = F::cross_entropy(out.first, kind) + 0.5 * aux;
  loss.backward();
  optimizer->step();
  return loss;
}

}  // namespace

int main() {
  auto [x, kind] = make_sequences(kSequences);
  std::printf("sequences: %ld of length %ld, kinds per class %ld\n", static_cast<long>(kSequences),
              static_cast<long>(kLength), static_cast<long>(kind.eq(0).sum().item<int64_t>()));
  model = Classifier();
  deterministic_init(*model);
  optimizer = std::make_unique<torch::optim::RMSprop>(
      model->parameters(),
      torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true).weight_decay(1e-4));

  for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    model->train();
    double total = 0;
    for (int64_t start = 0; start < kSequences; start += kBatch)
      total += train_step(x.narrow(0, start, kBatch), kind.narrow(0, start, kBatch)).item<float>();
    std::printf("epoch %ld loss %.5f\n", static_cast<long>(epoch),
                total / static_cast<double>(kSequences / kBatch));
  }

  torch::NoGradGuard no_grad;
  model->eval();
  auto out = model->forward(x);
  const double accuracy = out.first.argmax(1).eq(kind).to(torch::kFloat).mean().item<float>();
  const double ramp_accuracy =
      out.second.gt(0).eq(kind.lt(2)).to(torch::kFloat).mean().item<float>();
  std::printf("accuracy %.4f, ramp accuracy %.4f\n", accuracy, ramp_accuracy);
  torch::Tensor f = model->conv1(x) * 3;  // features with a wide range
  std::printf("relu6 %.5f softsign %.5f tanhshrink %.5f\n",
              torch::nn::ReLU6()(f).mean().item<float>(),
              torch::nn::Softsign()(f).mean().item<float>(),
              F::tanhshrink(f).abs().mean().item<float>());
  // The functions with a jump see a fixed ramp that no rounding moves across a jump.
  torch::Tensor ramp = torch::linspace(-3.0, 3.0, 601) + 0.0013;
  std::printf("softshrink %.5f hardshrink %.5f threshold %.5f\n",
              F::softshrink(f, F::SoftshrinkFuncOptions(0.7)).abs().mean().item<float>(),
              torch::nn::Hardshrink(torch::nn::HardshrinkOptions().lambda(0.7))(ramp)
                  .abs()
                  .sum()
                  .item<float>(),
              torch::nn::Threshold(0.1, -1.0)(ramp).sum().item<float>());
  std::printf("celu %.5f glu %.5f softmin rows sum to %.5f\n",
              F::celu(f, F::CELUFuncOptions().alpha(0.5)).mean().item<float>(),
              F::glu(f, F::GLUFuncOptions(1)).mean().item<float>(),
              F::softmin(f, F::SoftminFuncOptions(2)).sum(2).mean().item<float>());
  std::printf("pools: max %.5f avg %.5f adaptive avg %.5f adaptive max %.5f\n",
              F::max_pool1d(f, F::MaxPool1dFuncOptions(3).stride(2).padding(1)).mean().item<float>(),
              F::avg_pool1d(f, F::AvgPool1dFuncOptions(4).count_include_pad(false))
                  .mean()
                  .item<float>(),
              F::adaptive_avg_pool1d(f, F::AdaptiveAvgPool1dFuncOptions(5)).mean().item<float>(),
              F::adaptive_max_pool1d(f, F::AdaptiveMaxPool1dFuncOptions(5)).mean().item<float>());
  return 0;
}
