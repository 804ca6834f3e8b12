// Recurrent layers as libtorch's: the cells RNNCell, LSTMCell and GRUCell (one
// step) and the layers RNN, LSTM and GRU (a sequence, several layers, either
// direction), with their options structs.
//
// Each step is a composite of table ops (matmuls, sigmoid, tanh), so a layer
// runs eagerly, traces (the time loop unrolls into the trace), differentiates
// and fuses like hand-written tensor code, on every backend. The input
// projection of a whole sequence is one matmul; each step adds the recurrent
// one. Gates and parameters follow PyTorch: an LSTM's rows are the input,
// forget, cell and output gates (i, f, g, o), a GRU's the reset, update and new
// gates (r, z, n); parameters are weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k},
// bias_hh_l{k} (with a "_reverse" suffix for the second direction), each
// initialised uniform in +-1/sqrt(hidden_size).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "frontend/nn.h"
#include "frontend/nn_parity.h"

namespace kiln::nn {

/// An RNN's nonlinearity: tanh (the default) or relu.
enum class RNNNonlinearity { Tanh, ReLU };

struct RNNCellOptions {
  RNNCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  KILN_ARG(int64_t, input_size);
  KILN_ARG(int64_t, hidden_size);
  KILN_ARG(bool, bias) = true;
  KILN_ARG(RNNNonlinearity, nonlinearity) = RNNNonlinearity::Tanh;
};
struct LSTMCellOptions {
  LSTMCellOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  KILN_ARG(int64_t, input_size);
  KILN_ARG(int64_t, hidden_size);
  KILN_ARG(bool, bias) = true;
};
using GRUCellOptions = LSTMCellOptions;

struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  KILN_ARG(int64_t, input_size);
  KILN_ARG(int64_t, hidden_size);
  KILN_ARG(int64_t, num_layers) = 1;
  KILN_ARG(RNNNonlinearity, nonlinearity) = RNNNonlinearity::Tanh;
  KILN_ARG(bool, bias) = true;
  /// Inputs and outputs [batch, seq, feature] (else [seq, batch, feature]).
  KILN_ARG(bool, batch_first) = false;
  /// Dropout on the outputs of every layer but the last, in training.
  KILN_ARG(double, dropout) = 0.0;
  KILN_ARG(bool, bidirectional) = false;
};
struct LSTMOptions {
  LSTMOptions(int64_t input_size, int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  KILN_ARG(int64_t, input_size);
  KILN_ARG(int64_t, hidden_size);
  KILN_ARG(int64_t, num_layers) = 1;
  KILN_ARG(bool, bias) = true;
  KILN_ARG(bool, batch_first) = false;
  KILN_ARG(double, dropout) = 0.0;
  KILN_ARG(bool, bidirectional) = false;
};
using GRUOptions = LSTMOptions;

namespace detail {
enum class RecurrentKind { rnn_tanh, rnn_relu, lstm, gru };

/// The parameters and the recurrence the cells and layers share.
class RecurrentBase : public Module {
 public:
  /// Every weight and bias, in registration order (libtorch's all_weights()).
  std::vector<Tensor> all_weights() const { return parameters(); }
  /// A no-op: Kiln's weights are separate tensors already (libtorch packs them for cuDNN).
  void flatten_parameters() {}

 protected:
  RecurrentBase(std::string name, RecurrentKind kind, int64_t input_size, int64_t hidden_size,
                int64_t num_layers, bool bias, bool bidirectional);
  /// Runs every layer over x [seq, batch, input] from h0 (and c0) [layers *
  /// directions, batch, hidden]: the last layer's outputs [seq, batch, directions
  /// * hidden] and the final h (and c) of every layer and direction.
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& x, const Tensor& h0, const Tensor& c0,
                                         double dropout, Loc l);
  /// One step of layer 0, direction 0 (the cells): the new h (and c).
  std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& h, const Tensor& c, Loc l) const;
  /// A cell with one state (RNNCell, GRUCell): input [B, in] or [in], hx like it or undefined.
  Tensor cell_forward(const Tensor& input, const Tensor& hx, Loc l) const;
  /// Zeros [rows, batch, hidden] like x, or h0 checked against that shape.
  Tensor initial(const Tensor& given, const Tensor& x, int64_t rows, int64_t batch,
                 const char* what, Loc l) const;
  std::string describe(int64_t num_layers, bool batch_first, double dropout) const;

  RecurrentKind kind_;
  int64_t input_size_, hidden_size_, num_layers_, directions_;
  bool bias_;
  // [layer * directions + direction]: w_ih, w_hh, b_ih, b_hh (undefined without bias)
  std::vector<std::array<Tensor, 4>> weights_;
};
}  // namespace detail

/// h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu).
class RNNCellImpl : public detail::RecurrentBase {
 public:
  explicit RNNCellImpl(const RNNCellOptions& options);
  RNNCellImpl(int64_t input_size, int64_t hidden_size)
      : RNNCellImpl(RNNCellOptions(input_size, hidden_size)) {}
  /// input [batch, input_size] (or [input_size]); hx [batch, hidden] (zeros when undefined).
  Tensor forward(const Tensor& input, const Tensor& hx = {}, KILN_LOC);
  std::string repr() const override;
  RNNCellOptions options;
};
/// One LSTM step: returns (h', c').
class LSTMCellImpl : public detail::RecurrentBase {
 public:
  explicit LSTMCellImpl(const LSTMCellOptions& options);
  LSTMCellImpl(int64_t input_size, int64_t hidden_size)
      : LSTMCellImpl(LSTMCellOptions(input_size, hidden_size)) {}
  std::tuple<Tensor, Tensor> forward(const Tensor& input,
                                     std::optional<std::tuple<Tensor, Tensor>> hx = std::nullopt,
                                     KILN_LOC);
  std::string repr() const override;
  LSTMCellOptions options;
};
/// One GRU step: returns h'.
class GRUCellImpl : public detail::RecurrentBase {
 public:
  explicit GRUCellImpl(const GRUCellOptions& options);
  GRUCellImpl(int64_t input_size, int64_t hidden_size)
      : GRUCellImpl(GRUCellOptions(input_size, hidden_size)) {}
  Tensor forward(const Tensor& input, const Tensor& hx = {}, KILN_LOC);
  std::string repr() const override;
  GRUCellOptions options;
};

/// A multi-layer Elman RNN. forward(input [seq, batch, input_size] (batch first:
/// [batch, seq, ...]; or unbatched [seq, input_size]), h0 [layers * directions,
/// batch, hidden] or undefined for zeros) returns (output [seq, batch,
/// directions * hidden], h_n [layers * directions, batch, hidden]).
class RNNImpl : public detail::RecurrentBase {
 public:
  explicit RNNImpl(const RNNOptions& options);
  RNNImpl(int64_t input_size, int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {}, KILN_LOC);
  std::string repr() const override;
  RNNOptions options;
};
/// A multi-layer LSTM: forward(input, optional (h0, c0)) returns (output, (h_n, c_n)).
class LSTMImpl : public detail::RecurrentBase {
 public:
  explicit LSTMImpl(const LSTMOptions& options);
  LSTMImpl(int64_t input_size, int64_t hidden_size)
      : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(
      const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx = std::nullopt, KILN_LOC);
  std::string repr() const override;
  LSTMOptions options;
};
/// A multi-layer GRU: forward(input, h0) returns (output, h_n).
class GRUImpl : public detail::RecurrentBase {
 public:
  explicit GRUImpl(const GRUOptions& options);
  GRUImpl(int64_t input_size, int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {}, KILN_LOC);
  std::string repr() const override;
  GRUOptions options;
};

using RNNCell = ModuleHolder<RNNCellImpl>;
using LSTMCell = ModuleHolder<LSTMCellImpl>;
using GRUCell = ModuleHolder<GRUCellImpl>;
using RNN = ModuleHolder<RNNImpl>;
using LSTM = ModuleHolder<LSTMImpl>;
using GRU = ModuleHolder<GRUImpl>;

}  // namespace kiln::nn
