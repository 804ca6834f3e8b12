// A small sequence-to-sequence transformer written for libtorch's C++
// frontend, in the manner of PyTorch's "language translation with
// nn.Transformer" tutorial, on a toy task: reverse a sequence of 6 tokens.
// Source and target tokens are embedded (Embedding), scaled by learned
// per-feature scales (a ParameterList) and shifted by learned positions (a
// ParameterDict); a bag-of-words summary of the source (EmbeddingBag, mean)
// is added to every target position and mixed into the decoder's output by a
// Bilinear layer before the head. nn::Transformer (one encoder and one
// decoder layer, causal target mask from generate_square_subsequent_mask)
// trains with Adam; evaluation under NoGradGuard decodes
// greedily, calling the encoder and the decoder on their own through the
// Transformer's AnyModules, and checks embedding_bag's modes and bilinear.
//
// Every parameter starts from a formula, not a random draw, dropout is 0, the
// data has no random draws either and the model trains in double, so the numbers it prints are the
// same built against libtorch (tests/compat/against_libtorch.sh) and against Kiln, to float
// rounding. Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

namespace F = torch::nn::functional;

namespace {

const int64_t kVocab = 10;  // 0 pads, 1 begins a target, 2..9 are words
const int64_t kBos = 1;
const int64_t kLen = 6;
const int64_t kPairs = 32;
const int64_t kModel = 16;
const int64_t kHeads = 2;
const int64_t kSteps = 200;

// kPairs source sequences [kPairs, kLen] of words 2..9 from a formula.
torch::Tensor make_sources() {
  torch::Tensor i = torch::arange(kPairs, torch::kLong).view({kPairs, 1});
  torch::Tensor j = torch::arange(kLen, torch::kLong).view({1, kLen});
  return 2 + torch::remainder(i * 5 + j * 3 + torch::remainder(i * j, 7), 8);
}

struct Seq2SeqImpl : torch::nn::Module {
  Seq2SeqImpl()
      : src_embed(kVocab, kModel),
        tgt_embed(kVocab, kModel),
        bag(torch::nn::EmbeddingBagOptions(kVocab, kModel).mode(torch::kMean)),
        transformer(
            torch::nn::TransformerOptions(kModel, kHeads, 1, 1).dim_feedforward(32).dropout(0.0)),
        mix(kModel, kModel, kModel),
        head(kModel, kVocab) {
    register_module("src_embed", src_embed);
    register_module("tgt_embed", tgt_embed);
    register_module("bag", bag);
    register_module("transformer", transformer);
    register_module("mix", mix);
    register_module("head", head);
    torch::Tensor src_scale = torch::ones({kModel});
    src_scale.set_requires_grad(true);
    torch::Tensor tgt_scale = torch::ones({kModel});
    tgt_scale.set_requires_grad(true);
    scales->append(src_scale);
    scales->append(tgt_scale);
    register_module("scales", scales);
    positions->insert("src", torch::zeros({kLen, 1, kModel}, torch::requires_grad()));
    positions->insert("tgt", torch::zeros({kLen, 1, kModel}, torch::requires_grad()));
    register_module("positions", positions);
  }

  // The source [N, S] as [S, N, E], and its bag-of-words summary [N, E].
  torch::Tensor embed_source(const torch::Tensor& src) {
    return src_embed(src.t()) * scales[0] + positions["src"];
  }
  // A target prefix [N, T] as [T, N, E], told the source's summary.
  torch::Tensor embed_target(const torch::Tensor& tgt, const torch::Tensor& summary) {
    const int64_t t = tgt.size(1);
    return tgt_embed(tgt.t()) * scales[1] + positions["tgt"].narrow(0, 0, t) + summary.unsqueeze(0);
  }
  // Logits [T, N, V] from the decoder's output [T, N, E].
  torch::Tensor project(const torch::Tensor& h, const torch::Tensor& summary) {
    return head(h + mix(h, summary.unsqueeze(0).expand_as(h).contiguous()));
  }

  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
    torch::Tensor summary = bag(src);
    torch::Tensor mask =
        torch::nn::TransformerImpl::generate_square_subsequent_mask(tgt_in.size(1));
    torch::Tensor h =
        transformer(embed_source(src), embed_target(tgt_in, summary), torch::Tensor(), mask);
    return project(h, summary);
  }

  torch::nn::Embedding src_embed, tgt_embed;
  torch::nn::EmbeddingBag bag;
  torch::nn::Transformer transformer;
  torch::nn::Bilinear mix;
  torch::nn::Linear head;
  torch::nn::ParameterList scales;
  torch::nn::ParameterDict positions;
};
TORCH_MODULE(Seq2Seq);

// Every parameter from a formula: matrices sin waves scaled by 1 / sqrt(fan
// in), the norms' weights and the scales near 1, biases and positions small.
// The waves are computed in double, as the parameters are: float's sin is
// rounded differently by libtorch's SLEEF and by Kiln (one float ulp apart in
// 44 of 768 values, both within 0.61 ulp of the true sine), and a float ulp in
// one starting value of libtorch's own run grows about 1.2x a step until its
// loss parts from the unperturbed one's by step 80.
void deterministic_init(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  double k = 0;
  for (auto& named : m.named_parameters()) {
    torch::Tensor p = named.value();
    const int64_t n = p.numel();
    torch::Tensor wave = torch::sin(torch::arange(n, torch::kFloat64) * 0.613 + (k += 1.0));
    const std::string& name = named.key();
    const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    if (name.compare(0, 10, "positions.") == 0) {
      p.copy_((0.1 * wave).view_as(p));
    } else if (p.dim() == 1 && !is_bias) {
      p.copy_((1.0 + 0.1 * wave).view_as(p));
    } else if (p.dim() == 1) {
      p.copy_((0.05 * wave).view_as(p));
    } else {
      const double fan_in = static_cast<double>(n / p.size(0));
      p.copy_((wave / std::sqrt(fan_in)).view_as(p));
    }
  }
}

Seq2Seq model{nullptr};
std::unique_ptr<torch::optim::Adam> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor src, torch::Tensor tgt_in, torch::Tensor tgt_out) {
  optimizer->zero_grad();
  torch::Tensor logits = model->forward(src, tgt_in);  // [T, N, V]
  torch::Tensor loss = F::cross_entropy(logits.reshape({-1, kVocab}), tgt_out.t().reshape({-1}));
  loss.backward();
  optimizer->step();
  return loss;
}

}  // namespace

int main() {
  torch::Tensor src = make_sources();
  torch::Tensor tgt = src.flip({1});
  torch::Tensor tgt_in =
      torch::cat({torch::full({kPairs, 1}, kBos, torch::kLong), tgt.narrow(1, 0, kLen - 1)}, 1);
  std::printf(
      "pairs: %ld of length %ld, vocabulary %ld; first %ld %ld %ld %ld %ld %ld\n",
      static_cast<long>(kPairs), static_cast<long>(kLen), static_cast<long>(kVocab),
      static_cast<long>(src[0][0].item<int64_t>()), static_cast<long>(src[0][1].item<int64_t>()),
      static_cast<long>(src[0][2].item<int64_t>()), static_cast<long>(src[0][3].item<int64_t>()),
      static_cast<long>(src[0][4].item<int64_t>()), static_cast<long>(src[0][5].item<int64_t>()));

  model = Seq2Seq();
  // In double, from double starting values: training amplifies differences
  // (about 1.09x a step from these starting values), and double's rounding
  // keeps libtorch's run and Kiln's within 1e-7 of each other for all 200 steps.
  model->to(torch::kFloat64);
  deterministic_init(*model);
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  std::printf("parameters: %ld in %zu tensors\n", static_cast<long>(count),
              model->parameters().size());
  // libtorch's C++ decoder layer registers its children in its own order.
  std::string order;
  for (const auto& named : model->transformer->decoder.ptr()->named_parameters())
    if (named.key().compare(0, 9, "layers.0.") == 0 &&
        named.key().find("weight") != std::string::npos)
      order += " " + named.key().substr(9);
  std::printf("decoder layer weights:%s\n", order.c_str());
  std::printf("scales: %zu, positions:", model->scales->size());
  for (const auto& key : model->positions->keys()) std::printf(" %s", key.c_str());
  std::printf("\n");

  // eps 1e-6: the attention's key bias has a gradient of pure rounding noise
  // (a shift of every score alike), which Adam would scale up to full steps.
  optimizer = std::make_unique<torch::optim::Adam>(model->parameters(),
                                                   torch::optim::AdamOptions(0.02).eps(1e-6));
  model->train();
  for (int64_t step = 0; step < kSteps; ++step) {
    torch::Tensor loss = train_step(src, tgt_in, tgt);
    if (step % 20 == 0 || step == kSteps - 1)
      std::printf("step %2ld loss %.5f\n", static_cast<long>(step), loss.item<float>());
  }

  torch::NoGradGuard no_grad;
  model->eval();
  torch::Tensor logits = model->forward(src, tgt_in);
  torch::Tensor probs = torch::softmax(logits, -1);
  torch::Tensor top = std::get<0>(probs.topk(2, -1));
  std::printf("teacher forced: loss %.5f, accuracy %.4f, smallest top-1 margin %.4f\n",
              F::cross_entropy(logits.reshape({-1, kVocab}), tgt.t().reshape({-1})).item<float>(),
              logits.argmax(-1).eq(tgt.t()).to(torch::kFloat).mean().item<float>(),
              (top.select(-1, 0) - top.select(-1, 1)).min().item<float>());

  // Greedy decoding: the encoder once, then the decoder on the growing prefix.
  torch::Tensor summary = model->bag(src);
  torch::Tensor memory =
      model->transformer->encoder.forward<torch::Tensor>(model->embed_source(src));
  torch::Tensor out = torch::full({kPairs, 1}, kBos, torch::kLong);
  for (int64_t t = 0; t < kLen; ++t) {
    torch::Tensor mask = torch::nn::TransformerImpl::generate_square_subsequent_mask(t + 1);
    torch::Tensor h = model->transformer->decoder.forward<torch::Tensor>(
        model->embed_target(out, summary), memory, mask);
    torch::Tensor next = model->project(h, summary).select(0, t).argmax(-1);
    out = torch::cat({out, next.unsqueeze(1)}, 1);
  }
  torch::Tensor decoded = out.narrow(1, 1, kLen);
  std::printf("greedy: %ld of %ld sequences reversed exactly, token accuracy %.4f\n",
              static_cast<long>(decoded.eq(tgt).all(1).sum().item<int64_t>()),
              static_cast<long>(kPairs), decoded.eq(tgt).to(torch::kFloat).mean().item<float>());

  // embedding_bag's modes over bags of the first source, and bilinear.
  torch::Tensor words = src[0];
  torch::Tensor offsets = torch::tensor({0, 2, 2, 5}, torch::kLong);
  torch::Tensor table = model->bag->weight;
  torch::Tensor sum = F::embedding_bag(
      words, table, F::EmbeddingBagFuncOptions().offsets(offsets).mode(torch::kSum));
  torch::Tensor max = F::embedding_bag(words, table,
                                       F::EmbeddingBagFuncOptions()
                                           .offsets(offsets)
                                           .mode(torch::kMax)
                                           .padding_idx(words[1].item<int64_t>()));
  torch::Tensor mean = F::embedding_bag(src.narrow(0, 0, 4), table);
  std::printf("embedding_bag: sum %.5f, max %.5f, empty bag %.1f, mean of 4 bags %.5f\n",
              sum.sum().item<float>(), max.sum().item<float>(), max[1].abs().sum().item<float>(),
              mean.sum().item<float>());
  torch::Tensor b = F::bilinear(summary.narrow(0, 0, 3), summary.narrow(0, 3, 3),
                                model->mix->weight, model->mix->bias);
  std::printf("bilinear: [%ld, %ld] sum %.5f, matches the module: %s\n",
              static_cast<long>(b.size(0)), static_cast<long>(b.size(1)), b.sum().item<float>(),
              torch::allclose(b, model->mix(summary.narrow(0, 0, 3), summary.narrow(0, 3, 3)))
                  ? "yes"
                  : "no");
  std::printf("learned scales: source mean %.5f, target mean %.5f\n",
              model->scales[0].mean().item<float>(), model->scales[1].mean().item<float>());
  return 0;
}
