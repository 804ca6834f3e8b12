// A sequence classifier written for libtorch's C++ frontend around
// torch::nn::TransformerEncoder: token sequences of varying length (padded,
// with a key padding mask), an Embedding and a learned position table, a
// two-layer TransformerEncoder (copies of one TransformerEncoderLayer) with a
// final LayerNorm given as an AnyModule, masked mean pooling, and AdamW with
// two parameter groups (no weight decay for biases and norms, chosen by the
// dotted names of named_parameters), StepLR and clip_grad_norm_. The task: is
// the most frequent token of a sequence even? Token counts come from
// scatter_add, and a confusion matrix from index_put_ over flattened indices.
// It builds unchanged against libtorch (tests/compat/against_libtorch.sh).
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

using torch::indexing::Slice;

namespace {

const int64_t kVocab = 8;  // token 0 pads
const int64_t kLen = 10;
const int64_t kModel = 16;
const int64_t kBatch = 32;

struct TaggerImpl : torch::nn::Module {
  TaggerImpl() {
    embed = register_module(
        "embed", torch::nn::Embedding(torch::nn::EmbeddingOptions(kVocab, kModel).padding_idx(0)));
    position = register_parameter("position", torch::zeros({kLen, 1, kModel}));
    torch::nn::init::normal_(position, 0.0, 0.1);
    torch::nn::TransformerEncoderLayer layer(
        torch::nn::TransformerEncoderLayerOptions(kModel, 2).dim_feedforward(32).dropout(0.0));
    encoder = register_module(
        "encoder", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(layer, 2).norm(
                       torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions({kModel}))))));
    out = register_module("out", torch::nn::Linear(kModel, 2));
  }
  // tokens [N, L] -> logits [N, 2]
  torch::Tensor forward(torch::Tensor tokens) {
    torch::Tensor pad = tokens.eq(0);                                  // [N, L], true: ignored
    torch::Tensor h = embed->forward(tokens).transpose(0, 1) + position;  // [L, N, E]
    h = encoder->forward(h, torch::Tensor(), pad);
    torch::Tensor keep = pad.logical_not().transpose(0, 1).unsqueeze(2).to(torch::kFloat);
    torch::Tensor pooled = (h * keep).sum(0) / keep.sum(0);
    return out->forward(pooled);
  }
  torch::nn::Embedding embed{nullptr};
  torch::Tensor position;
  torch::nn::TransformerEncoder encoder{nullptr};
  torch::nn::Linear out{nullptr};
};
TORCH_MODULE(Tagger);

// Sequences of lengths 4..kLen over tokens 1..kVocab-1, padded with 0; the
// label: whether the most frequent token (the smallest on ties) is even.
std::pair<torch::Tensor, torch::Tensor> make_data(int64_t n) {
  torch::Tensor tokens = torch::randint(1, kVocab, {n, kLen}, torch::kLong);
  torch::Tensor lengths = torch::randint(4, kLen + 1, {n, 1}, torch::kLong);
  torch::Tensor positions = torch::arange(kLen, torch::kLong).unsqueeze(0);
  tokens = tokens.masked_fill(positions.ge(lengths), 0);
  torch::Tensor counts = torch::zeros({n, kVocab}, torch::kLong)
                             .scatter_add(1, tokens, torch::ones({n, kLen}, torch::kLong));
  counts.index_put_({Slice(), 0}, -1);  // padding never wins
  torch::Tensor labels = counts.argmax(1).remainder(2).eq(0).to(torch::kLong);
  return {tokens, labels};
}

Tagger model{nullptr};
std::unique_ptr<torch::optim::AdamW> optimizer;

}  // namespace

// One optimisation step on a batch; returns the loss.
STEP(torch::Tensor, train_step, torch::Tensor tokens, torch::Tensor labels) {
  optimizer->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(tokens), labels);
  loss.backward();
  torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
  optimizer->step();
  return loss.detach();
}

int main() {
  torch::manual_seed(5);
  auto [tokens, labels] = make_data(256);
  auto [tokens_val, labels_val] = make_data(128);
  std::printf("even share %.4f\n", labels.to(torch::kFloat).mean().item<double>());

  model = Tagger();
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : model->named_parameters()) {
    const std::string& name = p.key();
    const bool plain = name.find("bias") != std::string::npos ||
                       name.find("norm") != std::string::npos || name == "position";
    (plain ? no_decay : decay).push_back(p.value());
  }
  std::printf("parameters %zu: decay %zu, no decay %zu; first %s, last %s\n",
              model->named_parameters().size(), decay.size(), no_decay.size(),
              model->named_parameters()[0].key().c_str(),
              model->named_parameters()[model->named_parameters().size() - 1].key().c_str());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay);
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(3e-3).weight_decay(0.0)));
  optimizer = std::make_unique<torch::optim::AdamW>(
      groups, torch::optim::AdamWOptions(3e-3).weight_decay(0.05));
  torch::optim::StepLR scheduler(*optimizer, 3, 0.5);

  for (int epoch = 0; epoch < 6; ++epoch) {
    model->train();
    double total = 0;
    for (int64_t b = 0; b < tokens.size(0); b += kBatch)
      total += train_step(tokens.slice(0, b, b + kBatch), labels.slice(0, b, b + kBatch))
                   .item<double>();
    scheduler.step();
    model->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor predicted = model->forward(tokens_val).argmax(1);
    std::printf("epoch %d loss %.5f val %.4f lr %.5f %.5f\n", epoch,
                total / (tokens.size(0) / kBatch),
                predicted.eq(labels_val).to(torch::kFloat).mean().item<double>(),
                optimizer->param_groups()[0].options().get_lr(),
                optimizer->param_groups()[1].options().get_lr());
  }

  // The confusion matrix: one count per (label, prediction) pair.
  torch::NoGradGuard no_grad;
  torch::Tensor predicted = model->forward(tokens_val).argmax(1);
  torch::Tensor confusion = torch::zeros({4}, torch::kLong);
  confusion = confusion.scatter_add(0, labels_val * 2 + predicted,
                                    torch::ones({labels_val.size(0)}, torch::kLong));
  confusion = confusion.reshape({2, 2});
  std::printf("confusion %ld %ld / %ld %ld\n", static_cast<long>(confusion[0][0].item<int64_t>()),
              static_cast<long>(confusion[0][1].item<int64_t>()),
              static_cast<long>(confusion[1][0].item<int64_t>()),
              static_cast<long>(confusion[1][1].item<int64_t>()));
  // The layers started as copies of one layer and trained apart.
  auto& first = model->encoder->layers->at<torch::nn::TransformerEncoderLayerImpl>(0);
  auto& second = model->encoder->layers->at<torch::nn::TransformerEncoderLayerImpl>(1);
  std::printf("layers differ %d; layer 0 linear1 sum %.5f\n",
              static_cast<int>(!torch::equal(first.linear1->weight, second.linear1->weight)),
              first.linear1->weight.sum().item<double>());
  return 0;
}
