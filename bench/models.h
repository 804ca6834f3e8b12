// The two small models whose training step bench_train times and
// bench_peak_rss measures, each with a fixed batch, run eagerly or as one
// compiled plan. bench/torch_compare.py builds the same two in PyTorch.
//
//   digits CNN   examples/digits_cnn.cpp's model on [64, 1, 8, 8] images
//                (batch 64 by default):
//                Conv(1->16, 3x3, pad 1)-ReLU-MaxPool(2), Conv(16->32, 3x3,
//                pad 1)-ReLU-MaxPool(2), Flatten, Dropout(0.1), Linear(128, 10);
//                cross-entropy, Adam (lr 5e-3).
//   transformer  one pre-norm GPT block: token and position embeddings (vocab
//                80, context 32, d_model 64), causal 4-head self-attention
//                (masked_fill with -inf), a GELU MLP (64-256-64), a final
//                LayerNorm and a linear head; cross-entropy over every
//                position, AdamW (lr 1e-3, weight decay 0.01); batch 16 by default.
#pragma once

#include <memory>
#include <string>

#include <kiln/kiln.h>

namespace kiln::bench {

/// One model, its optimizer and one batch. eager() runs the training step
/// (zero_grad, forward, loss, backward, optimizer step) op by op; traced()
/// runs the same step through jit (the first call traces and compiles it).
/// Both return the loss and update the same parameters.
class ModelStep {
 public:
  virtual ~ModelStep() = default;
  virtual Tensor eager() = 0;
  virtual Tensor traced() = 0;
  /// "digits_cnn" or "transformer".
  virtual std::string name() const = 0;
  /// The forward and backward matmul/conv FLOPs of one step (GEMMs only).
  virtual double gemm_flops() const = 0;
};

/// The digits CNN step (seeded with manual_seed(0)).
std::unique_ptr<ModelStep> make_digits_cnn_step(int64_t batch = 64);
/// The transformer block step (seeded with manual_seed(0)).
std::unique_ptr<ModelStep> make_transformer_step(int64_t batch = 16);
/// The step of "digits_cnn" or "transformer" at `batch_scale` times its
/// default batch; an Error naming both for any other name.
std::unique_ptr<ModelStep> make_model_step(const std::string& name, int64_t batch_scale = 1);

}  // namespace kiln::bench
