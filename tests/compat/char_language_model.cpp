// A character-level language model written for libtorch's C++ frontend, in
// the manner of the char-rnn tutorials: the text's characters become indices
// (a vocabulary sorted by character), an Embedding feeds a two-layer LSTM
// (batch_first, dropout between the layers), and a decoder kept in a
// ModuleList (two Linear layers, tanh between) predicts the next character.
// Adam with AMSGrad trains it on windows of the text, with the gradient norm
// clipped (clip_grad_norm_) and the step rate halved by StepLR.
//
// Sampling is made deterministic, as a test needs: the next character is
// where a fixed threshold falls in the cumulative softmax of the logits over a
// temperature (no random draw), carrying the LSTM's hidden state from step to
// step; greedy decoding (argmax) is printed beside it. Prompts of different
// lengths are batched by pad_sequence. A GRU over the same embedding reports
// its output and hidden shapes.
//
// Every parameter starts from a formula, not a random draw, and the data has
// none either, so the numbers it prints are the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding.
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

using torch::indexing::None;
using torch::indexing::Slice;

namespace {

const char* kText =
    "the cat sat on the mat. the dog sat on the log. a cat and a dog met on the mat; "
    "the cat ran, the dog sat. on the log the cat sat and the dog ran to the mat.";
const int64_t kWindow = 24;
const int64_t kBatch = 8;
const int64_t kEmbed = 12;
const int64_t kHidden = 24;
const int64_t kSteps = 40;

struct Vocabulary {
  std::string chars;
  std::map<char, int64_t> index;
  explicit Vocabulary(const std::string& text) {
    chars = text;
    std::sort(chars.begin(), chars.end());
    chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
    for (size_t i = 0; i < chars.size(); ++i) index[chars[i]] = static_cast<int64_t>(i);
  }
  int64_t size() const { return static_cast<int64_t>(chars.size()); }
  torch::Tensor encode(const std::string& s) const {
    std::vector<int64_t> ids;
    for (char c : s) ids.push_back(index.at(c));
    return torch::tensor(ids, torch::kLong);
  }
};

struct CharModelImpl : torch::nn::Module {
  explicit CharModelImpl(int64_t vocab)
      : embed(torch::nn::EmbeddingOptions(vocab, kEmbed)),
        lstm(torch::nn::LSTMOptions(kEmbed, kHidden).num_layers(2).batch_first(true).dropout(0.1)),
        decoder(torch::nn::Linear(kHidden, kHidden), torch::nn::Linear(kHidden, vocab)) {
    register_module("embed", embed);
    register_module("lstm", lstm);
    register_module("decoder", decoder);
  }

  // ids [B, T] -> logits [B, T, vocab] and the LSTM's (h, c).
  std::tuple<torch::Tensor, std::tuple<torch::Tensor, torch::Tensor>> forward(
      const torch::Tensor& ids, torch::optional<std::tuple<torch::Tensor, torch::Tensor>> state = {}) {
    torch::Tensor x = embed(ids);
    auto [out, hc] = lstm->forward(x, state);
    for (size_t i = 0; i < decoder->size(); ++i) {
      out = decoder[i]->as<torch::nn::Linear>()->forward(out);
      if (i + 1 < decoder->size()) out = torch::tanh(out);
    }
    return {out, hc};
  }

  torch::nn::Embedding embed;
  torch::nn::LSTM lstm;
  torch::nn::ModuleList decoder;
};
TORCH_MODULE(CharModel);

void deterministic_init(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  double k = 0;
  for (auto& named : m.named_parameters()) {
    torch::Tensor& p = named.value();
    k += 1.0;
    torch::Tensor wave = torch::sin(torch::arange(p.numel(), torch::kFloat) * 1.618 + k).view(p.sizes());
    if (p.dim() == 1)
      p.copy_(0.05 * wave);
    else
      p.copy_(wave / std::sqrt(static_cast<double>(p.size(1))));
  }
}

CharModel model{nullptr};
std::unique_ptr<torch::optim::Adam> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor inputs, torch::Tensor targets) {
  optimizer->zero_grad();
  torch::Tensor logits = std::get<0>(model->forward(inputs));
  torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                            targets.reshape({-1}));
  loss.backward();
  torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5);
  optimizer->step();
  return loss;
}

// The index where u falls in the cumulative softmax of logits / temperature.
int64_t pick(const torch::Tensor& logits, double temperature, double u) {
  torch::Tensor probs = torch::softmax(logits / temperature, -1);
  torch::Tensor cdf = torch::cumsum(probs, -1);
  return std::min<int64_t>((cdf < u).sum().item<int64_t>(), logits.size(-1) - 1);
}

std::string generate(const Vocabulary& vocab, const std::string& prompt, int64_t length, double temperature) {
  torch::NoGradGuard no_grad;
  torch::Tensor ids = vocab.encode(prompt).unsqueeze(0);
  auto [logits, state] = model->forward(ids);
  std::string text = prompt;
  for (int64_t i = 0; i < length; ++i) {
    torch::Tensor last = logits.index({0, -1});
    int64_t next;
    if (temperature == 0) {
      next = last.argmax().item<int64_t>();
    } else {
      const double u = 0.5 + 0.45 * std::sin(2.3 * i + 0.4);
      next = pick(last, temperature, u);
    }
    text += vocab.chars[next];
    std::tie(logits, state) = model->forward(torch::full({1, 1}, next, torch::kLong), state);
  }
  return text;
}

}  // namespace

int main() {
  const std::string text(kText);
  Vocabulary vocab(text);
  std::printf("text %zu characters, vocabulary %ld: \"%s\"\n", text.size(), static_cast<long>(vocab.size()),
              vocab.chars.c_str());
  torch::Tensor data = vocab.encode(text);

  // Windows of kWindow + 1 characters, shifted by one for the targets.
  std::vector<torch::Tensor> windows;
  for (int64_t start = 0; start + kWindow + 1 <= data.size(0); start += 5)
    windows.push_back(data.index({Slice(start, start + kWindow + 1)}));
  torch::Tensor all = torch::stack(windows);
  std::cout << "windows " << all.sizes() << std::endl;

  model = CharModel(vocab.size());
  deterministic_init(*model);
  for (const auto& p : model->named_parameters())
    if (p.key().rfind("lstm.", 0) == 0 && p.key().find("l1") != std::string::npos)
      std::cout << p.key() << " " << p.value().sizes() << std::endl;
  optimizer = std::make_unique<torch::optim::Adam>(
      model->parameters(), torch::optim::AdamOptions(0.03).betas(std::make_tuple(0.9, 0.98)).amsgrad(true));
  torch::optim::StepLR schedule(*optimizer, 15, 0.5);

  // Dropout draws random masks: the loss printed is measured in eval mode.
  auto eval_loss = [&]() {
    torch::NoGradGuard no_grad;
    model->eval();
    torch::Tensor logits = std::get<0>(model->forward(all.index({Slice(), Slice(None, -1)})));
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, vocab.size()}),
                                                              all.index({Slice(), Slice(1, None)}).reshape({-1}));
    model->train();
    return loss.item<float>();
  };

  std::printf("loss before training %.5f (uniform %.5f)\n", eval_loss(), std::log(double(vocab.size())));
  for (int64_t step = 0; step < kSteps; ++step) {
    model->eval();  // no dropout in the steps either, so that they are determined
    const int64_t first = (step * kBatch) % (all.size(0) - kBatch);
    torch::Tensor batch = all.narrow(0, first, kBatch);
    torch::Tensor loss = train_step(batch.index({Slice(), Slice(None, -1)}), batch.index({Slice(), Slice(1, None)}));
    schedule.step();
    if (step % 5 == 4) {
      // The gradient norm of the last step, clipped to 0.5.
      double norm = 0;
      for (const auto& p : model->parameters())
        if (p.grad().defined()) norm += p.grad().pow(2).sum().item<double>();
      std::printf("step %2ld loss %.5f eval %.5f lr %.4f clipped grad norm %.4f\n", static_cast<long>(step),
                  loss.item<float>(), eval_loss(),
                  optimizer->param_groups()[0].options().get_lr(), std::sqrt(norm));
    }
  }

  model->eval();
  std::printf("greedy: \"%s\"\n", generate(vocab, "the ", 40, 0).c_str());
  std::printf("t=0.7:  \"%s\"\n", generate(vocab, "the ", 40, 0.7).c_str());
  std::printf("t=1.5:  \"%s\"\n", generate(vocab, "a do", 40, 1.5).c_str());

  // How sure it is about the next character after "the c".
  torch::NoGradGuard no_grad;
  torch::Tensor logits = std::get<0>(model->forward(vocab.encode("the c").unsqueeze(0)));
  auto [top, where] = torch::softmax(logits.index({0, -1}), -1).topk(3);
  for (int64_t i = 0; i < 3; ++i)
    std::printf("after \"the c\": '%c' %.4f\n", vocab.chars[where[i].item<int64_t>()], top[i].item<float>());

  // Prompts of different lengths, padded with spaces into one batch.
  std::vector<torch::Tensor> prompts{vocab.encode("the c"), vocab.encode("a"), vocab.encode("on t")};
  torch::Tensor batch = torch::nn::utils::rnn::pad_sequence(prompts, /*batch_first=*/true,
                                                            static_cast<double>(vocab.index.at(' ')));
  std::cout << "padded prompts:\n" << batch << std::endl;
  torch::Tensor last = std::get<0>(model->forward(batch)).index({Slice(), -1}).argmax(-1);
  std::printf("next after the padded prompts: '%c' '%c' '%c'\n", vocab.chars[last[0].item<int64_t>()],
              vocab.chars[last[1].item<int64_t>()], vocab.chars[last[2].item<int64_t>()]);

  torch::nn::GRU gru(torch::nn::GRUOptions(kEmbed, 6).num_layers(1).bidirectional(true));
  torch::Tensor seq = model->embed(all.index({Slice(0, 3)})).transpose(0, 1);  // [T, B, E]
  auto [gru_out, gru_h] = gru->forward(seq);
  std::cout << "gru output " << gru_out.sizes() << " hidden " << gru_h.sizes() << std::endl;
  return 0;
}
