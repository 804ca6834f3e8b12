// A tiny character-level transformer (GPT-style: token and position
// embeddings, pre-norm blocks of causal multi-head self-attention and a GELU
// MLP, a final LayerNorm and a linear head) trained on this repository's own
// README with the whole training step (forward, cross-entropy, backward,
// gradient clipping, AdamW) compiled into one plan per call, dropout drawn
// inside it. It prints the text's unigram entropy (the loss of a model that
// knows only character frequencies), the loss curve, the losses on the
// training text and on the held-out last 10%, and then samples a line
// eagerly in eval mode, one character at a time. KILN_JIT=0 runs the same
// step eagerly (the same losses, slower).
//   build/examples/char_transformer [steps] [loss.svg] [text]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/binary_io.h"
#include "svg_plot.h"

using namespace kiln;

namespace {

// Small enough that a step takes about 20 ms on 2 cores.
constexpr int64_t kBlock = 32, kBatch = 32, kDim = 64, kHeads = 4, kLayers = 2;
constexpr double kDropout = 0.1, kLearningRate = 1e-2, kWeightDecay = 0.01, kMaxGradNorm = 1.0;

// The text as characters (UTF-8 sequences, so any text works), its vocabulary
// and every character's index in it.
struct Corpus {
  std::vector<std::string> vocab;
  std::vector<int64_t> ids;
};

Corpus read_corpus(const std::string& text) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    n = std::min(n, text.size() - i);
    chars.push_back(text.substr(i, n));
    i += n;
  }
  std::map<std::string, int64_t> index;
  for (const std::string& ch : chars) index.emplace(ch, 0);
  Corpus c;
  for (auto& [ch, id] : index) {
    id = static_cast<int64_t>(c.vocab.size());
    c.vocab.push_back(ch);
  }
  c.ids.reserve(chars.size());
  for (const std::string& ch : chars) c.ids.push_back(index[ch]);
  return c;
}

// sum -p log p over the characters' frequencies, in nats.
double unigram_entropy(const Corpus& c) {
  std::vector<double> count(c.vocab.size(), 0.0);
  for (int64_t id : c.ids) count[id] += 1;
  double h = 0;
  for (double n : count) {
    const double p = n / double(c.ids.size());
    if (p > 0) h -= p * std::log(p);
  }
  return h;
}

// Causal multi-head self-attention with dropout on the attention weights. The
// keys have no bias: it would add q.b to every score of a row, which softmax
// ignores, so its gradient would be rounding noise that Adam scales up to lr.
class AttentionImpl : public nn::Module {
 public:
  AttentionImpl(int64_t dim, int64_t heads, double p)
      : Module("Attention"),
        heads(heads),
        q(dim, dim),
        k(dim, dim, /*bias=*/false),
        v(dim, dim),
        out(dim, dim),
        drop(p) {
    register_module("q", q);
    register_module("k", k);
    register_module("v", v);
    register_module("out", out);
    register_module("drop", drop);
  }
  Tensor forward(const Tensor& x) {  // [B, T, D]
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / heads;
    auto split = [&](const Tensor& y) { return y.reshape({b, t, heads, hd}).transpose(1, 2); };
    const Tensor qh = split(q(x)), kh = split(k(x)), vh = split(v(x));  // [B, H, T, hd]
    Tensor scores = qh.matmul(kh.transpose(-2, -1)) / std::sqrt(double(hd));
    const Tensor future = ones({t, t}).tril().eq(0);  // j > i: a later character
    scores = scores.masked_fill(future, -INFINITY);
    const Tensor weights = drop(scores.softmax(-1));
    return out(weights.matmul(vh).transpose(1, 2).reshape({b, t, d}));
  }
  int64_t heads;
  nn::Linear q, k, v, out;
  nn::Dropout drop;
};
using Attention = nn::ModuleHolder<AttentionImpl>;

// x + attention(norm(x)), then x + mlp(norm(x)), dropout on each residual branch.
class BlockImpl : public nn::Module {
 public:
  BlockImpl(int64_t dim, int64_t heads, double p)
      : Module("Block"),
        ln1(Shape{dim}),
        ln2(Shape{dim}),
        attn(dim, heads, p),
        mlp(nn::Linear(dim, 4 * dim), nn::GELU(), nn::Linear(4 * dim, dim)),
        drop(p) {
    register_module("ln1", ln1);
    register_module("attn", attn);
    register_module("ln2", ln2);
    register_module("mlp", mlp);
    register_module("drop", drop);
  }
  Tensor forward(const Tensor& x) {
    const Tensor h = x + drop(attn(ln1(x)));
    return h + drop(mlp(ln2(h)));
  }
  nn::LayerNorm ln1, ln2;
  Attention attn;
  nn::Sequential mlp;
  nn::Dropout drop;
};
using Block = nn::ModuleHolder<BlockImpl>;

class CharTransformerImpl : public nn::Module {
 public:
  CharTransformerImpl(int64_t vocab, int64_t block, int64_t dim, int64_t heads, int64_t layers,
                      double p)
      : Module("CharTransformer"),
        tok(vocab, dim),
        pos(block, dim),
        ln_f(Shape{dim}),
        head(dim, vocab),
        drop(p) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("drop", drop);
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(register_module("block" + std::to_string(i), Block(dim, heads, p)));
    register_module("ln_f", ln_f);
    register_module("head", head);
  }
  Tensor forward(const Tensor& idx) {  // [B, T] character indices -> [B, T, vocab] logits
    Tensor x = drop(tok(idx) + pos(arange(idx.size(1))));
    for (const Block& b : blocks) x = b(x);
    return head(ln_f(x));
  }
  nn::Embedding tok, pos;
  nn::LayerNorm ln_f;
  nn::Linear head;
  nn::Dropout drop;
  std::vector<Block> blocks;
};
using CharTransformer = nn::ModuleHolder<CharTransformerImpl>;

// Windows of kBlock + 1 characters: inputs and the next characters as targets.
struct Batch {
  Tensor x, y;
};

Batch windows(const std::vector<int64_t>& ids, const std::vector<int64_t>& starts) {
  const int64_t n = static_cast<int64_t>(starts.size());
  std::vector<double> x, y;
  x.reserve(n * kBlock);
  y.reserve(n * kBlock);
  for (int64_t s : starts)
    for (int64_t j = 0; j < kBlock; ++j) {
      x.push_back(double(ids[s + j]));
      y.push_back(double(ids[s + j + 1]));
    }
  return {from_vector(x, {n, kBlock}, kInt64), from_vector(y, {n, kBlock}, kInt64)};
}

// Mean cross-entropy in eval mode over windows that tile ids[begin, end).
double eval_loss(CharTransformer& model, const std::vector<int64_t>& ids, int64_t begin,
                 int64_t end) {
  NoGradGuard no_grad;
  model->eval();
  std::vector<int64_t> starts;
  for (int64_t s = begin; s + kBlock + 1 <= end; s += kBlock) starts.push_back(s);
  double total = 0;
  int64_t count = 0;
  for (size_t i = 0; i < starts.size(); i += kBatch) {
    const std::vector<int64_t> part(starts.begin() + i,
                                    starts.begin() + std::min(starts.size(), i + size_t(kBatch)));
    const Batch b = windows(ids, part);
    const Tensor logits = model(b.x);
    total += nn::functional::cross_entropy(logits.reshape({-1, logits.size(2)}), b.y.reshape({-1}),
                                           nn::Reduction::Sum)
                 .item<double>();
    count += b.y.numel();
  }
  model->train();
  return total / double(std::max<int64_t>(count, 1));
}

// Samples `n` characters after `context`, each from softmax(logits / temperature)
// of the last position: the first index whose cumulative probability exceeds a
// uniform draw.
std::string sample(CharTransformer& model, const Corpus& c, std::vector<int64_t> context, int n,
                   double temperature) {
  NoGradGuard no_grad;
  model->eval();
  std::string out;
  const int64_t vocab = static_cast<int64_t>(c.vocab.size());
  for (int i = 0; i < n; ++i) {
    const int64_t t = std::min<int64_t>(static_cast<int64_t>(context.size()), kBlock);
    std::vector<double> window(context.end() - t, context.end());
    const Tensor logits =
        model(from_vector(window, {1, t}, kInt64)).select(1, t - 1).reshape({vocab});
    const Tensor cdf = (logits / temperature).softmax(0).cumsum(0);
    const int64_t next = std::min(cdf.lt(rand({1})).sum().item<int64_t>(), vocab - 1);
    context.push_back(next);
    out += c.vocab[next];
  }
  model->train();
  return out;
}

void write_svg(const std::string& path, const std::vector<double>& steps,
               const std::vector<double>& loss, double entropy) {
  examples::PlotChart c;
  c.left = 50, c.top = 40, c.width = 660, c.height = 220;
  c.x_hi = steps.empty() ? 1 : steps.back();
  c.y_hi =
      std::max(entropy, loss.empty() ? 0.0 : *std::max_element(loss.begin(), loss.end())) * 1.1;
  c.title = "char_transformer: training loss (nats) by step";
  c.series.push_back({steps, loss});
  c.series.push_back({{0, c.x_hi}, {entropy, entropy}, "#999", "6,4"});
  char label[64];
  std::snprintf(label, sizeof label, "unigram entropy %.3f (dashed)", entropy);
  std::string body = examples::svg_chart(c);
  body +=
      examples::svg_text(c.left + 6, c.top + c.height * (1 - entropy / c.y_hi) - 6, label, "#666");
  body += examples::svg_text(c.left, c.top + c.height + 16, "0");
  body += examples::svg_text(c.left + c.width - 30, c.top + c.height + 16,
                             std::to_string(static_cast<int>(c.x_hi)));
  std::snprintf(label, sizeof label, "%.2f", c.y_hi);
  body += examples::svg_text(c.left - 40, c.top + 12, label);
  body += examples::svg_text(c.left - 40, c.top + c.height, "0");
  io::write_file_durable(path, examples::svg_document(760, 300, body));
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 500;
  const std::string svg = argc > 2 ? argv[2] : "char_transformer.svg";
  const std::string path = argc > 3 ? argv[3] : KILN_TEXT_PATH;
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  const Corpus corpus = read_corpus(text.str());
  const int64_t n = static_cast<int64_t>(corpus.ids.size()), split = n * 9 / 10;
  const int64_t vocab = static_cast<int64_t>(corpus.vocab.size());
  if (!file || n - split < kBlock + 1) {
    std::fprintf(stderr,
                 "char_transformer: expected a readable text of at least %lld characters at %s\n",
                 static_cast<long long>(10 * (kBlock + 1)), path.c_str());
    return 1;
  }
  const double entropy = unigram_entropy(corpus);
  std::printf("char_transformer: %s, %lld characters (%lld train, %lld validation)\n", path.c_str(),
              static_cast<long long>(n), static_cast<long long>(split),
              static_cast<long long>(n - split));
  std::printf("vocabulary %lld characters, unigram entropy %.4f nats\n",
              static_cast<long long>(vocab), entropy);

  manual_seed(0);
  CharTransformer model(vocab, kBlock, kDim, kHeads, kLayers, kDropout);
  int64_t count = 0;
  for (const Tensor& p : model->parameters()) count += p.numel();
  std::printf(
      "model: %lld blocks, d_model %lld, %lld heads, context %lld, %lld parameters; batch %lld, "
      "%d steps, AdamW lr %g, weight decay %g, gradients clipped at norm %g\n",
      static_cast<long long>(kLayers), static_cast<long long>(kDim), static_cast<long long>(kHeads),
      static_cast<long long>(kBlock), static_cast<long long>(count), static_cast<long long>(kBatch),
      steps, kLearningRate, kWeightDecay, kMaxGradNorm);
  optim::AdamW opt(model->parameters(),
                   optim::AdamWOptions(kLearningRate).weight_decay(kWeightDecay));
  auto step = jit(
      [&](Tensor x, Tensor y) {
        opt.zero_grad();
        const Tensor logits = model(x);
        Tensor loss = nn::functional::cross_entropy(logits.reshape({-1, vocab}), y.reshape({-1}));
        loss.backward();
        nn::utils::clip_grad_norm_(model->parameters(), kMaxGradNorm);
        opt.step();
        return loss;
      },
      "char_transformer_step");

  // Windows start anywhere in the training text, drawn from a seeded generator.
  std::mt19937 gen(1);
  std::uniform_int_distribution<int64_t> start(0, split - kBlock - 1);
  const int every = std::max(1, steps / 10);
  std::vector<double> curve_step, curve_loss;
  double first_ms = 0, rest_ms = 0, interval = 0;
  for (int i = 1; i <= steps; ++i) {
    std::vector<int64_t> starts(kBatch);
    for (int64_t& s : starts) s = start(gen);
    const Batch b = windows(corpus.ids, starts);
    const auto t0 = std::chrono::steady_clock::now();
    interval += step(b.x, b.y).item<double>();
    (i == 1 ? first_ms : rest_ms) +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i % every == 0 || i == steps) {
      const int len = i % every == 0 ? every : i % every;
      curve_step.push_back(i);
      curve_loss.push_back(interval / len);
      std::printf("step %d loss %.4f\n", i, interval / len);
      interval = 0;
    }
  }
  std::printf("traced step: the first (trace and compile) %.0f ms, then %.2f ms per step\n",
              first_ms, rest_ms / std::max(1, steps - 1));
  const double train = eval_loss(model, corpus.ids, 0, split),
               valid = eval_loss(model, corpus.ids, split, n);
  std::printf("final train loss %.4f (the last %d steps, dropout on)\n", curve_loss.back(),
              steps % every == 0 ? every : steps % every);
  std::printf("eval mode: train loss %.4f, validation loss %.4f (%.2f of the unigram entropy)\n",
              train, valid, valid / entropy);

  manual_seed(7);
  const std::vector<int64_t> prompt(corpus.ids.begin(), corpus.ids.begin() + 1);
  std::printf("sample (eval mode, temperature 0.8), 200 characters after \"%s\":\n%s%s\n",
              corpus.vocab[prompt[0]].c_str(), corpus.vocab[prompt[0]].c_str(),
              sample(model, corpus, prompt, 200, 0.8).c_str());
  write_svg(svg, curve_step, curve_loss, entropy);
  std::printf("loss curve: %s\n", svg.c_str());
  return 0;
}
