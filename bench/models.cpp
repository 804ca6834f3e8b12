// The benchmark models (see models.h).
#include "bench/models.h"

#include <cmath>

namespace kiln::bench {

namespace {

// The step both ways around one body, so eager and traced run the same code.
template <class Model, class Opt>
class Step : public ModelStep {
 public:
  Step(std::string name, Model model, std::unique_ptr<Opt> opt, Tensor x, Tensor y, double flops)
      : name_(std::move(name)),
        model_(std::move(model)),
        opt_(std::move(opt)),
        x_(std::move(x)),
        y_(std::move(y)),
        flops_(flops),
        traced_(name_ + "_step", [this](Tensor in, Tensor target) { return body(in, target); }) {}
  Tensor eager() override { return body(x_, y_); }
  Tensor traced() override { return traced_(x_, y_); }
  std::string name() const override { return name_; }
  double gemm_flops() const override { return flops_; }

 private:
  Tensor body(const Tensor& in, const Tensor& target) {
    opt_->zero_grad();
    Tensor logits = model_(in);
    Tensor loss =
        nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
    loss.backward();
    opt_->step();
    return loss;
  }
  std::string name_;
  Model model_;
  std::unique_ptr<Opt> opt_;
  Tensor x_, y_;
  double flops_;
  Traced<Tensor(Tensor, Tensor)> traced_;
};

// Causal multi-head self-attention, pre-norm residual, GELU MLP: one GPT block
// between the embeddings and the head.
class TinyTransformerImpl : public nn::Module {
 public:
  TinyTransformerImpl(int64_t vocab, int64_t block, int64_t dim, int64_t heads)
      : Module("TinyTransformer"),
        heads(heads),
        tok(vocab, dim),
        pos(block, dim),
        ln1(Shape{dim}),
        ln2(Shape{dim}),
        ln_f(Shape{dim}),
        q(dim, dim),
        k(dim, dim),
        v(dim, dim),
        proj(dim, dim),
        fc1(dim, 4 * dim),
        fc2(4 * dim, dim),
        head(dim, vocab) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("ln1", ln1);
    register_module("q", q);
    register_module("k", k);
    register_module("v", v);
    register_module("proj", proj);
    register_module("ln2", ln2);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("ln_f", ln_f);
    register_module("head", head);
  }
  Tensor forward(const Tensor& idx) {  // [B, T] -> [B, T, vocab]
    const int64_t b = idx.size(0), t = idx.size(1);
    Tensor x = tok(idx) + pos(arange(t));
    const int64_t d = x.size(2), hd = d / heads;
    const Tensor h = ln1(x);
    auto split = [&](const Tensor& y) { return y.reshape({b, t, heads, hd}).transpose(1, 2); };
    const Tensor qh = split(q(h)), kh = split(k(h)), vh = split(v(h));  // [B, H, T, hd]
    const Tensor future = ones({t, t}).tril().eq(0);
    const Tensor scores =
        (qh.matmul(kh.transpose(-2, -1)) / std::sqrt(double(hd))).masked_fill(future, -INFINITY);
    x = x + proj(scores.softmax(-1).matmul(vh).transpose(1, 2).reshape({b, t, d}));
    x = x + fc2(nn::functional::gelu(fc1(ln2(x))));
    return head(ln_f(x));
  }
  int64_t heads;
  nn::Embedding tok, pos;
  nn::LayerNorm ln1, ln2, ln_f;
  nn::Linear q, k, v, proj, fc1, fc2, head;
};
using TinyTransformer = nn::ModuleHolder<TinyTransformerImpl>;

// 2 m n k for a product [m, k] x [k, n].
double mm(double m, double n, double k) {
  return 2 * m * n * k;
}

}  // namespace

std::unique_ptr<ModelStep> make_digits_cnn_step(int64_t batch) {
  manual_seed(0);
  nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU(),
                       nn::MaxPool2d(nn::MaxPool2dOptions(2)),
                       nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)), nn::ReLU(),
                       nn::MaxPool2d(nn::MaxPool2dOptions(2)), nn::Flatten(), nn::Dropout(0.1),
                       nn::Linear(128, 10));
  auto opt = std::make_unique<optim::Adam>(model->parameters(), 5e-3);
  Tensor x = rand({batch, 1, 8, 8}), y = randint(10, {batch});
  // Forward GEMMs; backward: conv1's weight gradient only (the images need
  // none), two products each for conv2 and the linear layer.
  const double conv1 = mm(16, batch * 64, 9), conv2 = mm(32, batch * 16, 16 * 9),
               linear = mm(batch, 10, 128);
  return std::make_unique<Step<nn::Sequential, optim::Adam>>(
      "digits_cnn", std::move(model), std::move(opt), x, y, 2 * conv1 + 3 * conv2 + 3 * linear);
}

std::unique_ptr<ModelStep> make_transformer_step(int64_t batch) {
  constexpr int64_t kBlock = 32, kDim = 64, kHeads = 4, kVocab = 80;
  manual_seed(0);
  TinyTransformer model(kVocab, kBlock, kDim, kHeads);
  auto opt = std::make_unique<optim::AdamW>(model->parameters(),
                                            optim::AdamWOptions(1e-3).weight_decay(0.01));
  Tensor x = randint(kVocab, {batch, kBlock}), y = randint(kVocab, {batch, kBlock});
  const double tokens = batch * kBlock;
  const double linears =
      4 * mm(tokens, kDim, kDim) + 2 * mm(tokens, 4 * kDim, kDim) + mm(tokens, kVocab, kDim);
  const double attention = 2 * batch * kHeads * mm(kBlock, kBlock, kDim / kHeads);
  return std::make_unique<Step<TinyTransformer, optim::AdamW>>(
      "transformer", std::move(model), std::move(opt), x, y, 3 * (linears + attention));
}

std::unique_ptr<ModelStep> make_model_step(const std::string& name, int64_t batch_scale) {
  if (name == "digits_cnn") return make_digits_cnn_step(64 * batch_scale);
  if (name == "transformer") return make_transformer_step(16 * batch_scale);
  throw Error("expected a model name, digits_cnn or transformer; got '" + name + "'");
}

}  // namespace kiln::bench
