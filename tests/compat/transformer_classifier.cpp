// A small transformer-encoder sequence classifier written for libtorch's C++
// frontend: token sequences of varying length padded with 0, an Embedding with
// padding_idx and a learned positional table (register_parameter, initialised
// with torch::nn::init), a pre-norm block of LayerNorm, MultiheadAttention
// under a causal mask built with triu and masked_fill plus a key padding mask,
// and a GELU feed-forward, then a TransformerEncoderLayer (GELU, dropout), a
// masked mean over the sequence and a linear head. Trained with AdamW, label
// smoothing, clip_grad_norm_ and StepLR;
// evaluated under NoGradGuard with argmax accuracy, the attention weights
// MultiheadAttention returns, topk and sort. It builds unchanged against
// libtorch (tests/compat/against_libtorch.sh). Built against Kiln, the training
// step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
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

const int64_t kVocab = 10;  // token 0 pads; 1..9 are words
const int64_t kLen = 12;
const int64_t kModel = 32;
const int64_t kHeads = 4;
const int64_t kClasses = 3;
const int64_t kTrain = 512;
const int64_t kTest = 256;
const int64_t kBatch = 64;
// Eager and traced kernels round differently in the last bits, and AdamW
// amplifies that: the losses differ by 5e-7 after one step and by 5e-5 after
// twenty (the attention's key bias has a gradient of pure rounding noise;
// eps 1e-6 keeps Adam from scaling it up to steps of the learning rate's size).
// 24 steps stay inside compare_runs.py's 1e-4.
const int64_t kEpochs = 3;

// Sequences of 4..12 random words, padded with 0; the class is which of the
// words 1, 2 and 3 occurs most often (the first of them on a tie).
std::tuple<torch::Tensor, torch::Tensor> make_data(int64_t n) {
  torch::Tensor words = torch::randint(1, kVocab, {n, kLen});
  torch::Tensor lengths = torch::randint(4, kLen + 1, {n, 1});
  torch::Tensor pad = torch::arange(kLen).unsqueeze(0).ge(lengths);
  torch::Tensor tokens = words.masked_fill(pad, 0);
  torch::Tensor counts = tokens.unsqueeze(-1).eq(torch::arange(1, 4)).sum(1);  // [n, 3]
  return {tokens, counts.argmax(1)};
}

// A pre-norm attention block: x + attn(norm(x)), then x + mlp(norm(x)).
struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : norm1(torch::nn::LayerNormOptions({kModel})),
        attn(torch::nn::MultiheadAttentionOptions(kModel, kHeads).dropout(0.1)),
        norm2(torch::nn::LayerNormOptions({kModel})),
        fc1(kModel, 2 * kModel),
        fc2(2 * kModel, kModel),
        drop(0.1) {
    register_module("norm1", norm1);
    register_module("attn", attn);
    register_module("norm2", norm2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("drop", drop);
  }
  // x: [L, N, E] (libtorch's attention is sequence-first); mask: [L, L] float;
  // pad: [N, L] bool, true at padding.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& mask, const torch::Tensor& pad) {
    torch::Tensor h = norm1(x);
    x = x + std::get<0>(attn(h, h, h, pad, /*need_weights=*/false, mask));
    return x + drop(fc2(torch::gelu(fc1(norm2(x)))));
  }
  torch::nn::LayerNorm norm1;
  torch::nn::MultiheadAttention attn;
  torch::nn::LayerNorm norm2;
  torch::nn::Linear fc1, fc2;
  torch::nn::Dropout drop;
};
TORCH_MODULE(Block);

struct ClassifierImpl : torch::nn::Module {
  ClassifierImpl()
      : embed(torch::nn::EmbeddingOptions(kVocab, kModel).padding_idx(0)),
        encoder(torch::nn::TransformerEncoderLayerOptions(kModel, kHeads)
                    .dim_feedforward(64)
                    .dropout(0.1)
                    .activation(torch::kGELU)),
        norm(torch::nn::LayerNormOptions({kModel})),
        head(kModel, kClasses) {
    register_module("embed", embed);
    pos = register_parameter("pos", torch::empty({kLen, kModel}));
    torch::nn::init::normal_(pos, 0.0, 0.1);
    register_module("block", block);
    register_module("encoder", encoder);
    register_module("norm", norm);
    register_module("head", head);
    torch::nn::init::xavier_uniform_(head->weight);
    torch::nn::init::zeros_(head->bias);
  }
  // tokens: [N, L] int64 -> logits [N, classes].
  torch::Tensor forward(const torch::Tensor& tokens) {
    const int64_t len = tokens.size(1);
    torch::Tensor pad = tokens.eq(0);
    torch::Tensor causal = torch::ones({len, len}).triu(1).to(torch::kBool);
    torch::Tensor mask =
        torch::zeros({len, len}).masked_fill(causal, -std::numeric_limits<float>::infinity());
    torch::Tensor x = embed(tokens) * std::sqrt(static_cast<double>(kModel)) +
                      pos.index({Slice(None, len)}).unsqueeze(0);
    x = x.transpose(0, 1);  // [L, N, E]
    x = block(x, mask, pad);
    x = encoder(x, /*src_mask=*/torch::Tensor(), /*src_key_padding_mask=*/pad);
    x = norm(x).transpose(0, 1);  // [N, L, E]
    torch::Tensor keep = pad.logical_not().unsqueeze(-1).to(torch::kFloat);
    return head((x * keep).sum(1) / keep.sum(1));
  }
  torch::nn::Embedding embed;
  torch::Tensor pos;
  Block block;
  torch::nn::TransformerEncoderLayer encoder;
  torch::nn::LayerNorm norm;
  torch::nn::Linear head;
};
TORCH_MODULE(Classifier);

Classifier model{nullptr};
std::unique_ptr<torch::optim::AdamW> optimizer;

}  // namespace

// One optimisation step; returns the loss.
STEP(torch::Tensor, train_step, torch::Tensor tokens, torch::Tensor labels) {
  optimizer->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(
      model(tokens), labels,
      torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(0.05));
  loss.backward();
  torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
  optimizer->step();
  return loss.detach();
}

int main() {
  torch::manual_seed(11);
  auto [train_x, train_y] = make_data(kTrain);
  auto [test_x, test_y] = make_data(kTest);
  std::printf("classes in training set: %lld %lld %lld\n",
              static_cast<long long>(train_y.eq(0).sum().item<int64_t>()),
              static_cast<long long>(train_y.eq(1).sum().item<int64_t>()),
              static_cast<long long>(train_y.eq(2).sum().item<int64_t>()));

  model = Classifier();
  int64_t numel = 0, attention = 0;
  for (const auto& p : model->named_parameters()) {
    numel += p.value().numel();
    if (p.key().find("attn") != std::string::npos) attention += p.value().numel();
  }
  std::printf("parameters: %lld tensors, %lld numbers, %lld in attention\n",
              static_cast<long long>(model->parameters().size()), static_cast<long long>(numel),
              static_cast<long long>(attention));
  std::printf("padding row of the embedding: %.4f\n",
              model->embed->weight[0].abs().sum().item<float>());

  optimizer = std::make_unique<torch::optim::AdamW>(
      model->parameters(), torch::optim::AdamWOptions(3e-3).weight_decay(0.01).eps(1e-6));
  torch::optim::StepLR scheduler(*optimizer, /*step_size=*/2, /*gamma=*/0.5);

  for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    model->train();
    torch::Tensor order = torch::randperm(kTrain);
    double total = 0;
    int64_t batches = 0;
    for (int64_t b = 0; b < kTrain; b += kBatch) {
      torch::Tensor idx = order.slice(0, b, b + kBatch);
      total +=
          train_step(train_x.index_select(0, idx), train_y.index_select(0, idx)).item<double>();
      ++batches;
    }
    scheduler.step();
    torch::NoGradGuard no_grad;
    model->eval();
    torch::Tensor logits = model(test_x);
    const double accuracy = logits.argmax(1).eq(test_y).to(torch::kFloat).mean().item<double>();
    std::printf("epoch %lld: loss %.4f, test accuracy %.4f, lr %.5f\n",
                static_cast<long long>(epoch), total / static_cast<double>(batches), accuracy,
                optimizer->param_groups()[0].options().get_lr());
  }

  torch::NoGradGuard no_grad;
  model->eval();
  std::printf("padding row after training: %.4f\n",
              model->embed->weight[0].abs().sum().item<float>());
  // The attention of the first block on the first test sequences, averaged over heads.
  torch::Tensor tokens = test_x.index({Slice(None, 8)});
  torch::Tensor pad = tokens.eq(0);
  torch::Tensor x =
      (model->embed(tokens) * std::sqrt(static_cast<double>(kModel)) + model->pos.unsqueeze(0))
          .transpose(0, 1);
  torch::Tensor h = model->block->norm1(x);
  auto [out, weights] = model->block->attn(h, h, h, pad);
  std::printf("attention output %lld x %lld x %lld, weights %lld x %lld x %lld\n",
              static_cast<long long>(out.size(0)), static_cast<long long>(out.size(1)),
              static_cast<long long>(out.size(2)), static_cast<long long>(weights.size(0)),
              static_cast<long long>(weights.size(1)), static_cast<long long>(weights.size(2)));
  std::printf("attention rows sum to %.4f; weight on padding %.6f\n",
              weights.sum(-1).mean().item<float>(),
              weights.masked_fill(pad.logical_not().unsqueeze(1), 0.0).sum().item<float>());
  // The keys each query of sequence 0 attends to most, and its sorted weights.
  torch::Tensor w0 = weights[0];
  auto [top_w, top_i] = w0.topk(2, /*dim=*/-1);
  auto [sorted, order] = w0.index({0}).sort(/*dim=*/0, /*descending=*/true);
  std::printf("query 0 looks most at key %lld (%.6f), next at key %lld (%.6f); sorted first %.6f\n",
              static_cast<long long>(top_i.index({0, 0}).item<int64_t>()),
              top_w.index({0, 0}).item<float>(),
              static_cast<long long>(top_i.index({0, 1}).item<int64_t>()),
              top_w.index({0, 1}).item<float>(), sorted[0].item<float>());
  torch::Tensor probs = torch::softmax(model(test_x), /*dim=*/1);
  auto [confidence, predicted] = probs.max(1);
  std::printf("mean confidence %.4f; confident (> 0.9) and right: %lld of %lld\n",
              confidence.mean().item<float>(),
              static_cast<long long>(
                  (confidence > 0.9).logical_and(predicted.eq(test_y)).sum().item<int64_t>()),
              static_cast<long long>(test_y.size(0)));
  return 0;
}
