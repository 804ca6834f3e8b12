// Recurrent cells and layers (frontend/nn_rnn.h): one recurrence for all of
// them, RecurrentBase::run, stepping a layer and direction at a time.
#include "frontend/nn_rnn.h"

#include <cmath>
#include <sstream>
#include <tuple>

#include "frontend/autograd.h"
#include "frontend/dispatch.h"

namespace kiln::nn {

using kiln::detail::here;

namespace detail {

namespace {

int64_t gates(RecurrentKind k) {
  return k == RecurrentKind::lstm ? 4 : k == RecurrentKind::gru ? 3 : 1;
}

// a + b, where an undefined b (no bias) adds nothing.
Tensor plus(const Tensor& a, const Tensor& b, Loc l) {
  return b.defined() ? a.add(b, 1, l) : a;
}

// One step from the input's projection gi (x W_ih^T + b_ih) and the state's gh
// (h W_hh^T + b_hh): the new h, and for an LSTM the new c.
std::pair<Tensor, Tensor> cell(RecurrentKind k, const Tensor& gi, const Tensor& gh, const Tensor& h,
                               const Tensor& c, Loc l) {
  switch (k) {
    case RecurrentKind::rnn_tanh:
      return {gi.add(gh, 1, l).tanh(l), Tensor()};
    case RecurrentKind::rnn_relu:
      return {gi.add(gh, 1, l).relu(l), Tensor()};
    case RecurrentKind::lstm: {
      const std::vector<Tensor> g = gi.add(gh, 1, l).chunk(4, -1, l);  // i, f, g, o
      const Tensor c2 = g[1].sigmoid(l).mul(c, l).add(g[0].sigmoid(l).mul(g[2].tanh(l), l), 1, l);
      return {g[3].sigmoid(l).mul(c2.tanh(l), l), c2};
    }
    case RecurrentKind::gru: {
      const std::vector<Tensor> a = gi.chunk(3, -1, l), b = gh.chunk(3, -1, l);  // r, z, n
      const Tensor r = a[0].add(b[0], 1, l).sigmoid(l);
      const Tensor z = a[1].add(b[1], 1, l).sigmoid(l);
      const Tensor n = a[2].add(r.mul(b[2], l), 1, l).tanh(l);
      return {n.add(z.mul(h.sub(n, 1, l), l), 1, l), Tensor()};  // (1 - z) n + z h
    }
  }
  return {};
}

}  // namespace

RecurrentBase::RecurrentBase(std::string name, RecurrentKind kind, int64_t input_size,
                             int64_t hidden_size, int64_t num_layers, bool bias, bool bidirectional)
    : Module(std::move(name)),
      kind_(kind),
      input_size_(input_size),
      hidden_size_(hidden_size),
      num_layers_(num_layers),
      directions_(bidirectional ? 2 : 1),
      bias_(bias) {
  if (input_size <= 0 || hidden_size <= 0 || num_layers <= 0)
    throw Error(name_ + ": expected input_size, hidden_size and num_layers > 0, got " +
                std::to_string(input_size) + ", " + std::to_string(hidden_size) + ", " +
                std::to_string(num_layers));
  const int64_t g = gates(kind) * hidden_size;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  auto uniform = [&](Shape shape) { return rand(std::move(shape)) * (2 * bound) - bound; };
  NoGradGuard no_grad;
  const bool cell = name_.ends_with("Cell");
  for (int64_t layer = 0; layer < num_layers; ++layer)
    for (int64_t d = 0; d < directions_; ++d) {
      const int64_t in = layer == 0 ? input_size : hidden_size * directions_;
      // A cell's names have no layer suffix (weight_ih), a layer's do (weight_ih_l0).
      const std::string suffix =
          cell ? "" : "_l" + std::to_string(layer) + (d == 1 ? "_reverse" : "");
      std::array<Tensor, 4> w;
      w[0] = register_parameter("weight_ih" + suffix, uniform({g, in}));
      w[1] = register_parameter("weight_hh" + suffix, uniform({g, hidden_size}));
      if (bias) {
        w[2] = register_parameter("bias_ih" + suffix, uniform({g}));
        w[3] = register_parameter("bias_hh" + suffix, uniform({g}));
      }
      weights_.push_back(w);
    }
}

std::pair<Tensor, Tensor> RecurrentBase::step(const Tensor& x, const Tensor& h, const Tensor& c,
                                              Loc l) const {
  const std::array<Tensor, 4>& w = weights_[0];
  return cell(kind_, plus(x.matmul(w[0].t(l), l), w[2], l), plus(h.matmul(w[1].t(l), l), w[3], l),
              h, c, l);
}

std::tuple<Tensor, Tensor, Tensor> RecurrentBase::run(const Tensor& x, const Tensor& h0,
                                                      const Tensor& c0, double dropout, Loc l) {
  const bool lstm = kind_ == RecurrentKind::lstm;
  const int64_t steps = x.size(0);
  std::vector<Tensor> h_n, c_n;
  Tensor input = x;
  for (int64_t layer = 0; layer < num_layers_; ++layer) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < directions_; ++d) {
      const int64_t k = layer * directions_ + d;
      const std::array<Tensor, 4>& w = weights_[static_cast<size_t>(k)];
      // The input projection of every step at once: [seq, batch, gates * hidden].
      const Tensor gi = plus(input.matmul(w[0].t(l), l), w[2], l);
      Tensor h = h0.select(0, k, l), c = lstm ? c0.select(0, k, l) : Tensor();
      std::vector<Tensor> out(static_cast<size_t>(steps));
      for (int64_t i = 0; i < steps; ++i) {
        const int64_t t = d == 0 ? i : steps - 1 - i;
        const Tensor gh = plus(h.matmul(w[1].t(l), l), w[3], l);
        std::tie(h, c) = cell(kind_, gi.select(0, t, l), gh, h, c, l);
        out[static_cast<size_t>(t)] = h;
      }
      outputs.push_back(stack(out, 0, l));
      h_n.push_back(h);
      if (lstm) c_n.push_back(c);
    }
    input = directions_ == 1 ? outputs[0] : cat(outputs, -1, l);
    if (dropout > 0 && layer + 1 < num_layers_)
      input = functional::dropout(input, dropout, training_for_forward(), l);
  }
  return {input, stack(h_n, 0, l), lstm ? stack(c_n, 0, l) : Tensor()};
}

Tensor RecurrentBase::initial(const Tensor& given, const Tensor& x, int64_t rows, int64_t batch,
                              const char* what, Loc l) const {
  const Shape want = rows > 0 ? Shape{rows, batch, hidden_size_} : Shape{batch, hidden_size_};
  if (!given.defined()) return zeros(want, TensorOptions(x.dtype()).device(x.device()), l);
  if (given.sizes() != want)
    throw Error(name_ + ": expected " + what + " of shape " + shape_str(want) + ", got " +
                    shape_str(given.sizes()),
                here(l));
  return given;
}

std::string RecurrentBase::describe(int64_t num_layers, bool batch_first, double dropout) const {
  std::ostringstream s;
  s << name_ << "(input_size=" << input_size_ << ", hidden_size=" << hidden_size_;
  if (!name_.ends_with("Cell")) s << ", num_layers=" << num_layers;
  s << ", bias=" << (bias_ ? "true" : "false");
  if (!name_.ends_with("Cell"))
    s << ", batch_first=" << (batch_first ? "true" : "false") << ", dropout=" << dropout
      << ", bidirectional=" << (directions_ == 2 ? "true" : "false");
  s << ")";
  return s.str();
}

}  // namespace detail

namespace {

using detail::RecurrentKind;

RecurrentKind rnn_kind(RNNNonlinearity n) {
  return n == RNNNonlinearity::ReLU ? RecurrentKind::rnn_relu : RecurrentKind::rnn_tanh;
}

// A layer's input as [seq, batch, feature]: batch_first swapped, an unbatched
// [seq, feature] given a batch of one. `batched` says which it was.
Tensor sequence_input(const std::string& who, const Tensor& input, int64_t input_size,
                      bool batch_first, bool& batched, Loc l) {
  if ((input.dim() != 2 && input.dim() != 3) || input.size(-1) != input_size)
    throw Error(who + ": expected an input [seq, batch, " + std::to_string(input_size) +
                    "] (batch_first: [batch, seq, ...]; unbatched: [seq, " +
                    std::to_string(input_size) + "]), got " + shape_str(input.sizes()),
                kiln::detail::here(l));
  batched = input.dim() == 3;
  if (!batched) return input.unsqueeze(1, l);
  return batch_first ? input.transpose(0, 1, l) : input;
}

// An output [seq, batch, feature] back in the input's layout.
Tensor sequence_output(const Tensor& out, bool batched, bool batch_first, Loc l) {
  if (!batched) return out.squeeze(1, l);
  return batch_first ? out.transpose(0, 1, l) : out;
}

// A state given for an unbatched input ([rows, hidden]) as [rows, 1, hidden].
Tensor batched_state(const Tensor& h, bool batched, Loc l) {
  return !h.defined() || batched || h.dim() != 2 ? h : h.unsqueeze(1, l);
}
Tensor unbatched_state(const Tensor& h, bool batched, Loc l) {
  return batched ? h : h.squeeze(1, l);
}

// A cell's input [batch, input] (or [input]) and state.
Tensor cell_input(const std::string& who, const Tensor& input, int64_t input_size, Loc l) {
  if ((input.dim() != 1 && input.dim() != 2) || input.size(-1) != input_size)
    throw Error(who + ": expected an input [batch, " + std::to_string(input_size) + "] or [" +
                    std::to_string(input_size) + "], got " + shape_str(input.sizes()),
                kiln::detail::here(l));
  return input.dim() == 1 ? input.unsqueeze(0, l) : input;
}

}  // namespace

// ---- cells ----

RNNCellImpl::RNNCellImpl(const RNNCellOptions& o)
    : RecurrentBase("RNNCell", rnn_kind(o.nonlinearity_), o.input_size_, o.hidden_size_, 1, o.bias_,
                    false),
      options(o) {}

Tensor detail::RecurrentBase::cell_forward(const Tensor& input, const Tensor& hx, Loc l) const {
  const Tensor x = cell_input(name_, input, input_size_, l);
  const Tensor h =
      initial(hx.defined() && hx.dim() == 1 ? hx.unsqueeze(0, l) : hx, x, 0, x.size(0), "hx", l);
  const Tensor r = step(x, h, Tensor(), l).first;
  return input.dim() == 1 ? r.squeeze(0, l) : r;
}

Tensor RNNCellImpl::forward(const Tensor& input, const Tensor& hx, Loc l) {
  return cell_forward(input, hx, l);
}

std::string RNNCellImpl::repr() const {
  return describe(1, false, 0);
}

LSTMCellImpl::LSTMCellImpl(const LSTMCellOptions& o)
    : RecurrentBase("LSTMCell", RecurrentKind::lstm, o.input_size_, o.hidden_size_, 1, o.bias_,
                    false),
      options(o) {}

std::tuple<Tensor, Tensor> LSTMCellImpl::forward(const Tensor& input,
                                                 std::optional<std::tuple<Tensor, Tensor>> hx,
                                                 Loc l) {
  const Tensor x = cell_input(name_, input, input_size_, l);
  auto state = [&](const Tensor& t) { return t.defined() && t.dim() == 1 ? t.unsqueeze(0, l) : t; };
  const Tensor h = initial(hx ? state(std::get<0>(*hx)) : Tensor(), x, 0, x.size(0), "h0", l);
  const Tensor c = initial(hx ? state(std::get<1>(*hx)) : Tensor(), x, 0, x.size(0), "c0", l);
  auto [h2, c2] = step(x, h, c, l);
  if (input.dim() == 1) return {h2.squeeze(0, l), c2.squeeze(0, l)};
  return {h2, c2};
}

std::string LSTMCellImpl::repr() const {
  return describe(1, false, 0);
}

GRUCellImpl::GRUCellImpl(const GRUCellOptions& o)
    : RecurrentBase("GRUCell", RecurrentKind::gru, o.input_size_, o.hidden_size_, 1, o.bias_,
                    false),
      options(o) {}

Tensor GRUCellImpl::forward(const Tensor& input, const Tensor& hx, Loc l) {
  return cell_forward(input, hx, l);
}

std::string GRUCellImpl::repr() const {
  return describe(1, false, 0);
}

// ---- layers ----

RNNImpl::RNNImpl(const RNNOptions& o)
    : RecurrentBase("RNN", rnn_kind(o.nonlinearity_), o.input_size_, o.hidden_size_, o.num_layers_,
                    o.bias_, o.bidirectional_),
      options(o) {}

std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, const Tensor& hx, Loc l) {
  bool batched = true;
  const Tensor x = sequence_input(name_, input, input_size_, options.batch_first_, batched, l);
  const int64_t rows = num_layers_ * directions_;
  const Tensor h0 = initial(batched_state(hx, batched, l), x, rows, x.size(1), "h0", l);
  auto [out, h_n, c_n] = run(x, h0, Tensor(), options.dropout_, l);
  return {sequence_output(out, batched, options.batch_first_, l), unbatched_state(h_n, batched, l)};
}

std::string RNNImpl::repr() const {
  return describe(options.num_layers_, options.batch_first_, options.dropout_);
}

LSTMImpl::LSTMImpl(const LSTMOptions& o)
    : RecurrentBase("LSTM", RecurrentKind::lstm, o.input_size_, o.hidden_size_, o.num_layers_,
                    o.bias_, o.bidirectional_),
      options(o) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTMImpl::forward(
    const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx, Loc l) {
  bool batched = true;
  const Tensor x = sequence_input(name_, input, input_size_, options.batch_first_, batched, l);
  const int64_t rows = num_layers_ * directions_;
  const Tensor h0 = initial(hx ? batched_state(std::get<0>(*hx), batched, l) : Tensor(), x, rows,
                            x.size(1), "h0", l);
  const Tensor c0 = initial(hx ? batched_state(std::get<1>(*hx), batched, l) : Tensor(), x, rows,
                            x.size(1), "c0", l);
  auto [out, h_n, c_n] = run(x, h0, c0, options.dropout_, l);
  return {sequence_output(out, batched, options.batch_first_, l),
          {unbatched_state(h_n, batched, l), unbatched_state(c_n, batched, l)}};
}

std::string LSTMImpl::repr() const {
  return describe(options.num_layers_, options.batch_first_, options.dropout_);
}

GRUImpl::GRUImpl(const GRUOptions& o)
    : RecurrentBase("GRU", RecurrentKind::gru, o.input_size_, o.hidden_size_, o.num_layers_,
                    o.bias_, o.bidirectional_),
      options(o) {}

std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, const Tensor& hx, Loc l) {
  bool batched = true;
  const Tensor x = sequence_input(name_, input, input_size_, options.batch_first_, batched, l);
  const int64_t rows = num_layers_ * directions_;
  const Tensor h0 = initial(batched_state(hx, batched, l), x, rows, x.size(1), "h0", l);
  auto [out, h_n, c_n] = run(x, h0, Tensor(), options.dropout_, l);
  return {sequence_output(out, batched, options.batch_first_, l), unbatched_state(h_n, batched, l)};
}

std::string GRUImpl::repr() const {
  return describe(options.num_layers_, options.batch_first_, options.dropout_);
}

}  // namespace kiln::nn
