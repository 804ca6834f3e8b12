// A tiny transformer language model (GPT-style: token and position
// embeddings, pre-norm blocks of causal multi-head self-attention and a GELU
// MLP, a final LayerNorm and an output layer) trained on this repository's own
// README with the whole training step (forward, cross-entropy, backward,
// gradient clipping, AdamW) compiled into one plan per call, dropout drawn
// inside it. Its tokens are the text's characters (`--vocab bytes`, the
// default; a Linear head) or its words (`--vocab words`: lowercase words and
// punctuation, the 10,000 most frequent and <unk>; the embedding grows to the
// vocabulary, and the output layer is an adaptive softmax,
// nn::AdaptiveLogSoftmaxWithLoss, with the clusters word_cutoffs chooses). It
// prints the text's unigram entropy (the loss of a model that knows only token
// frequencies), the loss curve, the time per step, the losses on the training
// text and on the held-out last 10%, and then samples a line
// eagerly in eval mode, one token at a time. KILN_JIT=0 runs the same step
// eagerly (the same losses, slower).
//   build/examples/char_transformer [--vocab bytes|words] [steps] [loss.svg] [text]
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/binary_io.h"
#include "svg_plot.h"

using namespace kiln;

namespace {

// Small enough that a step takes about 20 ms on 2 cores.
constexpr int64_t kBlock = 32, kBatch = 32, kDim = 64, kHeads = 4, kLayers = 2;
constexpr double kDropout = 0.1, kLearningRate = 1e-2, kWeightDecay = 0.01, kMaxGradNorm = 1.0;
// --vocab words: the most frequent words kept (the rest are <unk>).
constexpr size_t kMaxWords = 10000;
// --vocab words: the words in the adaptive softmax's head (word_cutoffs).
constexpr int64_t kHeadWords = 256;

// The text as tokens, its vocabulary and every token's index in it; `joiner`
// goes between tokens when a sample is printed.
struct Corpus {
  std::vector<std::string> vocab;
  std::vector<int64_t> ids;
  std::string joiner;
  int64_t distinct = 0;  // distinct tokens in the text (words: some may be <unk>)
  int64_t unknown = 0;   // tokens of the text that became <unk>
};

enum class Vocab { bytes, words };

// Characters (UTF-8 sequences, so any text works), in order of their bytes.
Corpus read_chars(const std::string& text) {
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
  c.distinct = static_cast<int64_t>(c.vocab.size());
  return c;
}

// Words: lowercase runs of ASCII letters, digits and '_'; every other
// character (punctuation, a UTF-8 sequence) is a token of its own, and so is a
// line break; spaces and tabs only separate. The vocabulary is <unk> (id 0),
// then the `max_words` most frequent tokens, ties in byte order: the same text
// gives the same ids everywhere.
Corpus read_words(const std::string& text, size_t max_words) {
  auto is_word = [](unsigned char c) { return std::isalnum(c) || c == '_'; };
  std::vector<std::string> tokens;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = 1;
    if (c < 0x80 && is_word(c)) {
      while (i + n < text.size() && static_cast<unsigned char>(text[i + n]) < 0x80 &&
             is_word(static_cast<unsigned char>(text[i + n])))
        ++n;
    } else if (c >= 0x80) {
      n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      n = std::min(n, text.size() - i);
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    std::string token = text.substr(i, n);
    for (char& ch : token)
      if (static_cast<unsigned char>(ch) < 0x80) ch = static_cast<char>(std::tolower(ch));
    tokens.push_back(std::move(token));
    i += n;
  }
  std::map<std::string, int64_t> count;
  for (const std::string& t : tokens) ++count[t];
  std::vector<std::pair<int64_t, std::string_view>> order;
  for (const auto& [t, n] : count) order.emplace_back(-n, t);
  std::sort(order.begin(), order.end());
  order.resize(std::min(order.size(), max_words));
  Corpus c;
  c.joiner = " ";
  c.distinct = static_cast<int64_t>(count.size());
  c.vocab.push_back("<unk>");
  std::map<std::string_view, int64_t> index;
  for (const auto& [n, t] : order) {
    index.emplace(t, static_cast<int64_t>(c.vocab.size()));
    c.vocab.emplace_back(t);
  }
  c.ids.reserve(tokens.size());
  for (const std::string& t : tokens) {
    const auto it = index.find(t);
    c.ids.push_back(it == index.end() ? 0 : it->second);
    c.unknown += it == index.end();
  }
  return c;
}

// The adaptive softmax's cutoffs for a vocabulary in order of frequency (ids
// after <unk> go from the most frequent word down): the head holds the 256 most
// frequent, then clusters of 4x as many each (256-1023, 1024-4095, ...). Words
// follow Zipf's law: in this README the 256 most frequent are 78% of all
// tokens, so most positions need only the head (256 + one column per cluster),
// and the rarer a cluster's words, the smaller its projection (d_model / 4,
// / 16, ...). Every position still computes every cluster (a traced plan has
// static shapes), but the output layer's matrix products shrink about 5x
// against a Linear over the whole vocabulary, which at d_model 64 is most of a
// step's arithmetic.
std::vector<int64_t> word_cutoffs(int64_t vocab) {
  std::vector<int64_t> cutoffs;
  for (int64_t c = kHeadWords; c < vocab; c *= 4) cutoffs.push_back(c);
  if (cutoffs.empty()) cutoffs.push_back(std::max<int64_t>(1, vocab / 2));  // a tiny text
  return cutoffs;
}

// sum -p log p over the tokens' frequencies, in nats.
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

// The model: token and position embeddings, the blocks, a final LayerNorm, then
// the output layer over the vocabulary: a Linear head (`--vocab bytes`), or an
// adaptive softmax (`--vocab words`, see word_cutoffs) when `cutoffs` is given.
class CharTransformerImpl : public nn::Module {
 public:
  CharTransformerImpl(int64_t vocab, const std::vector<int64_t>& cutoffs, int64_t block,
                      int64_t dim, int64_t heads, int64_t layers, double p)
      : Module("CharTransformer"),
        vocab(vocab),
        dim(dim),
        tok(vocab, dim),
        pos(block, dim),
        ln_f(Shape{dim}),
        head(cutoffs.empty() ? nn::Linear(dim, vocab) : nn::Linear(nullptr)),
        drop(p) {
    register_module("tok", tok);
    register_module("pos", pos);
    register_module("drop", drop);
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(register_module("block" + std::to_string(i), Block(dim, heads, p)));
    register_module("ln_f", ln_f);
    if (head)
      register_module("head", head);
    else
      adaptive = register_module(
          "adaptive",
          nn::AdaptiveLogSoftmaxWithLoss(
              nn::AdaptiveLogSoftmaxWithLossOptions(dim, vocab, cutoffs).div_value(4.)));
  }
  // [B, T] token indices -> [B * T, D]: the features the output layer reads.
  Tensor features(const Tensor& idx) {
    Tensor x = drop(tok(idx) + pos(arange(idx.size(1))));
    for (const Block& b : blocks) x = b(x);
    return ln_f(x).reshape({-1, dim});
  }
  // The negative log-likelihood of the next tokens `targets` [B, T]: their
  // mean (Reduction::Mean) or sum.
  Tensor nll(const Tensor& idx, const Tensor& targets, nn::Reduction r) {
    const Tensor h = features(idx), y = targets.reshape({-1});
    if (head) return nn::functional::cross_entropy(head(h), y, r);
    const nn::ASMoutput out = adaptive(h, y);
    return r == nn::Reduction::Sum ? out.output.neg().sum() : out.loss;
  }
  // log-probabilities of the next token after each position: [B, T, vocab].
  Tensor log_probs(const Tensor& idx) {
    const Tensor h = features(idx);
    const Tensor lp = head ? head(h).log_softmax(1) : adaptive->log_prob(h);
    return lp.reshape({idx.size(0), idx.size(1), vocab});
  }
  int64_t vocab, dim;
  nn::Embedding tok, pos;
  nn::LayerNorm ln_f;
  nn::Linear head{nullptr};
  nn::AdaptiveLogSoftmaxWithLoss adaptive{nullptr};
  nn::Dropout drop;
  std::vector<Block> blocks;
};
using CharTransformer = nn::ModuleHolder<CharTransformerImpl>;

// Windows of kBlock + 1 tokens: inputs and the next tokens as targets.
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
    total += model->nll(b.x, b.y, nn::Reduction::Sum).item<double>();
    count += b.y.numel();
  }
  model->train();
  return total / double(std::max<int64_t>(count, 1));
}

// Samples `n` tokens after `context`, each from softmax(log p / temperature)
// of the last position (the same as softmax(logits / temperature)): the first
// index whose cumulative probability exceeds a uniform draw.
std::string sample(CharTransformer& model, const Corpus& c, std::vector<int64_t> context, int n,
                   double temperature) {
  NoGradGuard no_grad;
  model->eval();
  std::string out;
  const int64_t vocab = static_cast<int64_t>(c.vocab.size());
  for (int i = 0; i < n; ++i) {
    const int64_t t = std::min<int64_t>(static_cast<int64_t>(context.size()), kBlock);
    std::vector<double> window(context.end() - t, context.end());
    const Tensor log_p =
        model->log_probs(from_vector(window, {1, t}, kInt64)).select(1, t - 1).reshape({vocab});
    const Tensor cdf = (log_p / temperature).softmax(0).cumsum(0);
    const int64_t next = std::min(cdf.lt(rand({1})).sum().item<int64_t>(), vocab - 1);
    context.push_back(next);
    if (!out.empty() && out.back() != '\n' && c.vocab[next] != "\n") out += c.joiner;
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
  // --vocab bytes|words (or --vocab=...) anywhere; the rest are positional.
  Vocab mode = Vocab::bytes;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], value;
    if (a == "--vocab" && i + 1 < argc)
      value = argv[++i];
    else if (a.rfind("--vocab=", 0) == 0)
      value = a.substr(8);
    else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "char_transformer: unknown option '%s' (expected --vocab bytes|words)\n",
                   a.c_str());
      return 2;
    } else {
      args.push_back(a);
      continue;
    }
    if (value != "bytes" && value != "words") {
      std::fprintf(stderr, "char_transformer: expected --vocab bytes or words, got '%s'\n",
                   value.c_str());
      return 2;
    }
    mode = value == "words" ? Vocab::words : Vocab::bytes;
  }
  const bool words = mode == Vocab::words;
  const int steps = args.size() > 0 ? std::max(1, std::atoi(args[0].c_str())) : 500;
  const std::string svg = args.size() > 1 ? args[1] : "char_transformer.svg";
  const std::string path = args.size() > 2 ? args[2] : KILN_TEXT_PATH;
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  const Corpus corpus = words ? read_words(text.str(), kMaxWords) : read_chars(text.str());
  const char* unit = words ? "tokens" : "characters";
  const int64_t n = static_cast<int64_t>(corpus.ids.size()), split = n * 9 / 10;
  const int64_t vocab = static_cast<int64_t>(corpus.vocab.size());
  if (!file || n - split < kBlock + 1) {
    std::fprintf(stderr, "char_transformer: expected a readable text of at least %lld %s at %s\n",
                 static_cast<long long>(10 * (kBlock + 1)), unit, path.c_str());
    return 1;
  }
  const double entropy = unigram_entropy(corpus);
  std::printf("char_transformer: %s, %lld %s (%lld train, %lld validation)\n", path.c_str(),
              static_cast<long long>(n), unit, static_cast<long long>(split),
              static_cast<long long>(n - split));
  if (words)
    std::printf(
        "vocabulary %lld words (<unk> and the %lld most frequent of %lld distinct; %lld tokens "
        "<unk>), unigram entropy %.4f nats\n",
        static_cast<long long>(vocab), static_cast<long long>(vocab - 1),
        static_cast<long long>(corpus.distinct), static_cast<long long>(corpus.unknown), entropy);
  else
    std::printf("vocabulary %lld characters, unigram entropy %.4f nats\n",
                static_cast<long long>(vocab), entropy);

  manual_seed(0);
  const std::vector<int64_t> cutoffs = words ? word_cutoffs(vocab) : std::vector<int64_t>{};
  CharTransformer model(vocab, cutoffs, kBlock, kDim, kHeads, kLayers, kDropout);
  int64_t count = 0;
  for (const Tensor& p : model->parameters()) count += p.numel();
  std::printf(
      "model: %lld blocks, d_model %lld, %lld heads, context %lld, %lld parameters; batch %lld, "
      "%d steps, AdamW lr %g, weight decay %g, gradients clipped at norm %g\n",
      static_cast<long long>(kLayers), static_cast<long long>(kDim), static_cast<long long>(kHeads),
      static_cast<long long>(kBlock), static_cast<long long>(count), static_cast<long long>(kBatch),
      steps, kLearningRate, kWeightDecay, kMaxGradNorm);
  if (words) {
    std::string list;
    for (size_t i = 0; i < cutoffs.size(); ++i)
      list += (i ? ", " : "") + std::to_string(cutoffs[i]);
    std::printf(
        "output layer: adaptive softmax, cutoffs {%s}: a head of %lld words and %zu clusters, "
        "projections",
        list.c_str(), static_cast<long long>(cutoffs[0]), cutoffs.size());
    for (const auto& [projection, out] : model->adaptive->tail_weights())
      std::printf(" %lld", static_cast<long long>(projection.size(0)));
    std::printf("\n");
  } else {
    std::printf("output layer: Linear(%lld, %lld)\n", static_cast<long long>(kDim),
                static_cast<long long>(vocab));
  }
  optim::AdamW opt(model->parameters(),
                   optim::AdamWOptions(kLearningRate).weight_decay(kWeightDecay));
  auto step = jit(
      [&](Tensor x, Tensor y) {
        opt.zero_grad();
        Tensor loss = model->nll(x, y, nn::Reduction::Mean);
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
  std::vector<double> step_ms;
  for (int i = 1; i <= steps; ++i) {
    std::vector<int64_t> starts(kBatch);
    for (int64_t& s : starts) s = start(gen);
    const Batch b = windows(corpus.ids, starts);
    const auto t0 = std::chrono::steady_clock::now();
    interval += step(b.x, b.y).item<double>();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    (i == 1 ? first_ms : rest_ms) += ms;
    step_ms.push_back(ms);
    if (i % every == 0 || i == steps) {
      const int len = i % every == 0 ? every : i % every;
      curve_step.push_back(i);
      curve_loss.push_back(interval / len);
      std::printf("step %d loss %.4f\n", i, interval / len);
      interval = 0;
    }
  }
  // The median of the steps after the third: the first two trace and compile
  // (the second again, once AdamW's state exists).
  std::vector<double> settled(step_ms.begin() + std::min<size_t>(3, step_ms.size() - 1),
                              step_ms.end());
  std::nth_element(settled.begin(), settled.begin() + settled.size() / 2, settled.end());
  std::printf("%s %.0f ms, then %.2f ms per step (median %.2f ms after the third)\n",
              jit_enabled() ? "traced step: the first (trace and compile)"
                            : "eager step (KILN_JIT=0): the first",
              first_ms, rest_ms / std::max(1, steps - 1), settled[settled.size() / 2]);
  const double train = eval_loss(model, corpus.ids, 0, split),
               valid = eval_loss(model, corpus.ids, split, n);
  std::printf("final train loss %.4f (the last %d steps, dropout on)\n", curve_loss.back(),
              steps % every == 0 ? every : steps % every);
  std::printf("eval mode: train loss %.4f, validation loss %.4f (%.2f of the unigram entropy)\n",
              train, valid, valid / entropy);

  manual_seed(7);
  const std::vector<int64_t> prompt(corpus.ids.begin(), corpus.ids.begin() + 1);
  std::printf("sample (eval mode, temperature 0.8), 200 %s after \"%s\":\n%s%s%s\n", unit,
              corpus.vocab[prompt[0]].c_str(), corpus.vocab[prompt[0]].c_str(),
              corpus.joiner.c_str(), sample(model, corpus, prompt, 200, 0.8).c_str());
  write_svg(svg, curve_step, curve_loss, entropy);
  std::printf("loss curve: %s\n", svg.c_str());
  return 0;
}
