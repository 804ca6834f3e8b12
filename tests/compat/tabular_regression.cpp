// A tabular regression written for libtorch's C++ frontend: synthetic houses
// (features drawn with torch::randn, a nonlinear price), standardised with
// statistics of the training split, a torch::nn::Sequential MLP with
// BatchNorm1d and Dropout, AdamW with a StepLR schedule, Huber loss, gradient
// clipping, a validation split chosen with randperm and index_select, early
// stopping on the validation loss, the best weights kept through
// torch::save/torch::load into a second model, and a TensorIndexing report.
// It builds unchanged against libtorch (tests/compat/against_libtorch.sh).
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <iostream>
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

const int64_t kHouses = 1200;
const int64_t kFeatures = 6;
const int64_t kBatch = 100;
const int64_t kEpochs = 12;

// Price as a function of the features: nonlinear, with noise.
torch::Tensor price_of(const torch::Tensor& x) {
  auto area = x.index({Slice(), 0});
  auto rooms = x.index({Slice(), 1});
  auto age = x.index({Slice(), 2});
  auto coast = (x.index({Slice(), 3}) > 0.5).to(torch::kFloat);
  auto y = 3.0 * area + 0.5 * rooms * rooms - torch::tanh(age) + 2.0 * coast +
           0.3 * torch::sin(x.index({Slice(), 4}) * 2.0) + 0.1 * torch::randn({x.size(0)});
  return y.unsqueeze(1);
}

torch::nn::Sequential make_model() {
  // No bias before the batch norm, which removes it: its gradient would be
  // rounding noise that Adam scales up to steps of the learning rate's size.
  return torch::nn::Sequential(
      torch::nn::Linear(torch::nn::LinearOptions(kFeatures, 32).bias(false)),
      torch::nn::BatchNorm1d(32), torch::nn::ReLU(), torch::nn::Dropout(0.1),
      torch::nn::Linear(32, 16), torch::nn::Tanh(), torch::nn::Linear(16, 1));
}

torch::nn::Sequential model{nullptr};
std::unique_ptr<torch::optim::AdamW> optimizer;

}  // namespace

// One optimisation step on a batch; returns the loss.
STEP(torch::Tensor, train_step, torch::Tensor xb, torch::Tensor yb) {
  optimizer->zero_grad();
  torch::Tensor loss = torch::nn::functional::huber_loss(
      model->forward(xb), yb, torch::nn::functional::HuberLossFuncOptions().delta(1.0));
  loss.backward();
  torch::nn::utils::clip_grad_norm_(model->parameters(), 5.0);
  optimizer->step();
  return loss.detach();
}

int main() {
  torch::manual_seed(7);
  torch::Tensor x = torch::randn({kHouses, kFeatures});
  torch::Tensor y = price_of(x);

  // A validation split of a fifth, chosen at random.
  torch::Tensor order = torch::randperm(kHouses, torch::TensorOptions().dtype(torch::kLong));
  const int64_t n_val = kHouses / 5;
  torch::Tensor val_idx = order.slice(0, 0, n_val), train_idx = order.slice(0, n_val);
  torch::Tensor x_train = x.index_select(0, train_idx), y_train = y.index_select(0, train_idx);
  torch::Tensor x_val = x.index_select(0, val_idx), y_val = y.index_select(0, val_idx);

  // Standardise with the training split's statistics.
  torch::Tensor mean = x_train.mean(0, /*keepdim=*/true);
  torch::Tensor stdev = x_train.std(0, /*unbiased=*/true, /*keepdim=*/true).clamp_min(1e-6);
  x_train = (x_train - mean) / stdev;
  x_val = (x_val - mean) / stdev;
  std::printf("train %lld, validation %lld, feature means after scaling %.4f\n",
              static_cast<long long>(x_train.size(0)), static_cast<long long>(x_val.size(0)),
              x_train.mean().item<float>());

  model = make_model();
  optimizer = std::make_unique<torch::optim::AdamW>(
      model->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(1e-2));
  torch::optim::StepLR scheduler(*optimizer, /*step_size=*/4, /*gamma=*/0.5);

  double best = INFINITY;
  int64_t best_epoch = -1, patience = 0;
  const std::string checkpoint = "tabular_regression_best.pt";
  for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    model->train();
    torch::Tensor perm = torch::randperm(x_train.size(0), torch::kLong);
    double sum = 0;
    int64_t batches = 0;
    for (int64_t b = 0; b + kBatch <= x_train.size(0); b += kBatch) {
      torch::Tensor idx = perm.slice(0, b, b + kBatch);
      sum += train_step(x_train.index_select(0, idx), y_train.index_select(0, idx)).item<double>();
      ++batches;
    }
    scheduler.step();

    model->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor pred = model->forward(x_val);
    const double val_loss = torch::mse_loss(pred, y_val).item<double>();
    const double mae = (pred - y_val).abs().mean().item<double>();
    std::printf("epoch %lld: train huber %.5f, validation mse %.5f, mae %.5f, lr %.6f\n",
                static_cast<long long>(epoch), sum / static_cast<double>(batches), val_loss, mae,
                optimizer->param_groups()[0].options().get_lr());
    if (val_loss < best - 1e-4) {
      best = val_loss;
      best_epoch = epoch;
      patience = 0;
      torch::save(model, checkpoint);
    } else if (++patience == 3) {
      std::printf("stopping early: no improvement for 3 epochs\n");
      break;
    }
  }

  // The best weights, loaded into a fresh model of the same shape.
  torch::nn::Sequential best_model = make_model();
  torch::load(best_model, checkpoint);
  std::remove(checkpoint.c_str());
  best_model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor pred = best_model->forward(x_val);
  std::printf("best epoch %lld, validation mse %.5f (reloaded: %.5f)\n",
              static_cast<long long>(best_epoch), best,
              torch::mse_loss(pred, y_val).item<double>());

  // A few rows: prediction against truth, and the worst miss.
  torch::Tensor both = torch::cat({pred.index({Slice(0, 4)}), y_val.index({Slice(0, 4)})}, 1);
  for (int64_t i = 0; i < both.size(0); ++i)
    std::printf("house %lld: predicted %.4f, price %.4f\n", static_cast<long long>(i),
                both[i][0].item<float>(), both[i][1].item<float>());
  torch::Tensor miss = (pred - y_val).abs().squeeze(1);
  auto worst = miss.max(0);
  std::printf("worst miss %.4f at validation row %lld; %lld of %lld within 0.5\n",
              std::get<0>(worst).item<float>(),
              static_cast<long long>(std::get<1>(worst).item<int64_t>()),
              static_cast<long long>((miss < 0.5).sum().item<int64_t>()),
              static_cast<long long>(miss.numel()));
  return 0;
}
