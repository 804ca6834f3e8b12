// A next-token model written for libtorch's C++ frontend, and the sampling
// around it. The embedding table comes in pretrained (nn::Embedding::
// from_pretrained, left trainable), a BatchNorm1d with momentum nullopt keeps
// a cumulative average of its batches (num_batches_tracked), hardswish and
// hardsigmoid gate the hidden layer, and Adam trains it on a rule (token t is
// followed by 5 t + 3 mod 12). Decoding is greedy (argmax), then by sampling:
// multinomial with and without replacement, over top-k masked weights.
//
// Every parameter starts from a formula and the training data has no random
// draw, so what it prints is the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding. Its
// random draws print only what they determine: a top-1 mask's sample is the
// argmax; draws without replacement of every non-zero category, sorted, are
// those categories; 40000 draws' frequencies, to one decimal, are the weights'.
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

namespace {

const int64_t kVocab = 12;
const int64_t kDim = 8;
const int64_t kHidden = 16;
const int64_t kSteps = 40;

torch::Tensor next_token(const torch::Tensor& t) { return torch::fmod(5 * t + 3, kVocab); }

// A linear layer's weights from a formula (no random draw).
void init_linear(torch::nn::Linear& l, double phase) {
  torch::NoGradGuard no_grad;
  torch::Tensor w = l->weight;
  torch::Tensor i = torch::arange(w.numel(), torch::kFloat).view(w.sizes());
  w.copy_(torch::sin(i * 0.37 + phase) / std::sqrt(double(w.size(1))));
  l->bias.copy_(0.02 * torch::cos(torch::arange(l->bias.numel(), torch::kFloat) + phase));
}

struct TokenNetImpl : torch::nn::Module {
  explicit TokenNetImpl(const torch::Tensor& table)
      : embed(torch::nn::Embedding::from_pretrained(
            table, torch::nn::EmbeddingFromPretrainedOptions().freeze(false))),
        hidden(torch::nn::LinearOptions(kDim, kHidden).bias(false)),
        gate(kDim, kHidden),
        norm(torch::nn::BatchNorm1dOptions(kHidden).momentum(c10::nullopt)),
        head(kHidden, kVocab) {
    register_module("embed", embed);
    register_module("hidden", hidden);
    register_module("gate", gate);
    register_module("norm", norm);
    register_module("head", head);
    {
      // No bias before the BatchNorm: its gradient would be rounding noise,
      // which Adam scales up into steps that differ from one library to another.
      torch::NoGradGuard no_grad;
      torch::Tensor i = torch::arange(hidden->weight.numel(), torch::kFloat).view(hidden->weight.sizes());
      hidden->weight.copy_(torch::sin(i * 0.37 + 0.1) / std::sqrt(double(kDim)));
    }
    init_linear(gate, 0.7);
    init_linear(head, 0.3);
  }
  // tokens [B] -> logits [B, kVocab].
  torch::Tensor forward(const torch::Tensor& tokens) {
    torch::Tensor e = embed(tokens);
    torch::Tensor h = torch::hardswish(norm(hidden(e))) * torch::hardsigmoid(gate(e));
    return head(h);
  }
  torch::nn::Embedding embed;
  torch::nn::Linear hidden, gate;
  torch::nn::BatchNorm1d norm;
  torch::nn::Linear head;
};
TORCH_MODULE(TokenNet);

TokenNet net{nullptr};
std::unique_ptr<torch::optim::Adam> opt;

STEP(torch::Tensor, train_step, torch::Tensor x, torch::Tensor y) {
  opt->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
  loss.backward();
  opt->step();
  return loss;
}

void print_row(const char* what, const torch::Tensor& t) {
  std::printf("%s", what);
  torch::Tensor c = t.to(torch::kDouble).contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) std::printf(" %.4f", c.view({-1})[i].item<double>());
  std::printf("\n");
}

void print_tokens(const char* what, const torch::Tensor& t) {
  std::printf("%s", what);
  torch::Tensor c = t.contiguous().view({-1});
  for (int64_t i = 0; i < c.numel(); ++i) std::printf(" %ld", (long)c[i].item<int64_t>());
  std::printf("\n");
}

}  // namespace

int main() {
  torch::manual_seed(1);
  const torch::Device device("cpu");
  torch::Tensor idx = torch::arange(kVocab * kDim, torch::kFloat).view({kVocab, kDim});
  torch::Tensor table = torch::cos(idx * 0.29) * 0.5;
  net = TokenNet(table);
  net->to(device);
  opt = std::make_unique<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(0.03));

  // Every token twice a batch, in two orders.
  torch::Tensor x = torch::cat({torch::arange(kVocab), torch::flip(torch::arange(kVocab), {0})});
  torch::Tensor y = next_token(x);
  for (int64_t s = 0; s < kSteps; ++s) {
    torch::Tensor loss = train_step(x, y);
    if (s % 10 == 0 || s == kSteps - 1) std::printf("step %ld loss %.5f\n", (long)s, loss.item<float>());
  }
  std::printf("batches tracked %ld\n", (long)net->norm->num_batches_tracked.item<int64_t>());
  print_row("running mean", net->norm->running_mean.slice(0, 0, 4));
  print_row("running var", net->norm->running_var.slice(0, 0, 4));

  net->eval();
  torch::NoGradGuard no_grad;
  // Greedy decoding from token 0.
  std::vector<int64_t> greedy{0};
  for (int i = 0; i < 8; ++i)
    greedy.push_back(net->forward(torch::tensor({greedy.back()})).argmax(1).item<int64_t>());
  print_tokens("greedy", torch::tensor(greedy));

  // Sampling with a top-1 mask gives the argmax row by row.
  torch::Tensor logits = net->forward(torch::arange(kVocab));
  auto top = logits.topk(1, 1);
  torch::Tensor masked = torch::full_like(logits, -INFINITY).scatter(1, std::get<1>(top), std::get<0>(top));
  torch::Tensor sampled = torch::softmax(masked, 1).multinomial(1).squeeze(1);
  std::printf("top-1 samples equal argmax: %s\n", sampled.equal(logits.argmax(1)) ? "yes" : "no");
  std::printf("rule learnt: %s\n", logits.argmax(1).equal(next_token(torch::arange(kVocab))) ? "yes" : "no");

  // Top-3 sampling without replacement draws each of the three once.
  auto top3 = logits.topk(3, 1);
  torch::Tensor weights = torch::zeros_like(logits).scatter(1, std::get<1>(top3), torch::softmax(std::get<0>(top3), 1));
  torch::Tensor three = torch::multinomial(weights, 3, false);
  std::printf("top-3 draws are the top 3: %s\n",
              std::get<0>(three.sort(1)).equal(std::get<0>(std::get<1>(top3).sort(1))) ? "yes" : "no");
  torch::Tensor some = torch::tensor({0.0, 1.5, 0.5, 0.0, 2.0}).multinomial(3);
  print_tokens("non-zero categories", std::get<0>(some.sort()));

  // Frequencies of 40000 draws with replacement.
  torch::Tensor draws = torch::multinomial(torch::tensor({1.0, 2.0, 3.0, 4.0}), 40000, true);
  torch::Tensor freq = torch::bincount(draws, {}, 4).to(torch::kDouble) / 40000.0;
  std::printf("frequencies");
  for (int64_t i = 0; i < 4; ++i) std::printf(" %.1f", freq[i].item<double>());
  std::printf("\n");

  // libtorch's spellings of sizes, strides, devices and creation.
  std::vector<int64_t> sizes = logits.sizes().vec();
  std::printf("sizes %ld %ld strides %ld %ld\n", (long)sizes[0], (long)sizes[1],
              (long)logits.stride(0), (long)logits.stride(-1));
  std::vector<int64_t> strides = logits.t().strides().vec();
  std::printf("transposed strides %ld %ld\n", (long)strides[0], (long)strides[1]);
  std::printf("device %s\n", logits.device() == torch::Device("cpu") ? "cpu" : "other");
  print_row("eye", torch::eye(2, 3));
  print_row("logspace", torch::logspace(0, 2, 3));
  print_row("logspace base 2", torch::logspace(0, 3, 4, 2.0));
  print_row("hardswish", torch::hardswish(torch::tensor({-4.0, -3.0, -1.0, 0.5, 3.0, 4.0})));
  print_row("hardsigmoid", torch::hardsigmoid(torch::tensor({-4.0, -1.5, 0.0, 1.5, 4.0})));
  torch::Tensor r = torch::empty({1000}, torch::kLong).random_(2, 7);
  std::printf("random_ in [2, 7): %s\n",
              (r.min().item<int64_t>() >= 2 && r.max().item<int64_t>() < 7) ? "yes" : "no");
  return 0;
}
