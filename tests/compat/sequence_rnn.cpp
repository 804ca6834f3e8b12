// Digits read as sequences, written for libtorch's C++ frontend: each 28 x 28
// image is a sequence of 28 rows. A temporal Conv1d front end, a two-layer
// batch-first LSTM started from a given (h0, c0), and a bidirectional GRU over
// the LSTM's outputs feed a linear classifier; the last step's output is taken
// with x.index({Slice(), -1}). Trained with Adam, clip_grad_norm_ and
// clip_grad_value_, a StepLR schedule and functional cross_entropy; tested
// under NoGradGuard and c10::InferenceMode. It builds unchanged against
// libtorch (tests/compat/against_libtorch.sh). Built against Kiln, the
// training step is traced (KILN_TRACE) unless KILN_JIT=0.
//
// usage: compat_sequence_rnn [DATA_ROOT [MAX_BATCHES]] (default ./data: idx
// files made by tests/compat/make_mnist_idx.py)
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

using torch::indexing::Slice;

const int64_t kBatchSize = 50;
const int64_t kHidden = 24;

class SequenceNetImpl : public torch::nn::Module {
 public:
  SequenceNetImpl(int64_t input_size, int64_t hidden_size, int64_t num_layers, int64_t num_classes)
      : conv(torch::nn::Conv1dOptions(input_size, input_size, 3).padding(1).bias(false)),
        lstm(torch::nn::LSTMOptions(input_size, hidden_size)
                 .num_layers(num_layers)
                 .batch_first(true)),
        gru(torch::nn::GRUOptions(hidden_size, hidden_size).batch_first(true).bidirectional(true)),
        fc(2 * hidden_size, num_classes),
        num_layers_(num_layers),
        hidden_size_(hidden_size) {
    register_module("conv", conv);
    register_module("lstm", lstm);
    register_module("gru", gru);
    register_module("fc", fc);
  }

  torch::Tensor forward(torch::Tensor x) {
    // [batch, 1, 28, 28] -> [batch, 28 steps, 28 features]
    x = x.view({-1, 28, 28});
    // Conv1d over time: channels are the features.
    x = torch::relu(conv->forward(x.transpose(1, 2))).transpose(1, 2);
    auto h0 = torch::zeros({num_layers_, x.size(0), hidden_size_});
    auto c0 = torch::zeros({num_layers_, x.size(0), hidden_size_});
    auto lstm_out = lstm->forward(x, std::make_tuple(h0, c0));
    torch::Tensor out = std::get<0>(lstm_out);
    torch::Tensor h_n = std::get<0>(std::get<1>(lstm_out));
    AT_ASSERT(h_n.size(0) == num_layers_);
    auto gru_out = gru->forward(out);
    out = std::get<0>(gru_out);
    out = out.index({Slice(), -1});
    return fc->forward(out);
  }

 private:
  torch::nn::Conv1d conv;
  torch::nn::LSTM lstm;
  torch::nn::GRU gru;
  torch::nn::Linear fc;
  int64_t num_layers_, hidden_size_;
};
TORCH_MODULE(SequenceNet);

SequenceNet model{nullptr};
std::unique_ptr<torch::optim::Adam> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor data, torch::Tensor targets) {
  auto output = model->forward(data);
  auto loss = torch::nn::functional::cross_entropy(output, targets);
  optimizer->zero_grad();
  loss.backward();
  torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
  torch::nn::utils::clip_grad_value_(model->parameters(), 0.5);
  optimizer->step();
  return loss;
}

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "./data";
  const int64_t max_batches = argc > 2 ? std::stoll(argv[2]) : -1;
  torch::manual_seed(0);
  model = SequenceNet(28, kHidden, 2, 10);
  std::cout << "parameters: " << model->parameters().size() << "\n";
  for (const auto& p : model->named_parameters())
    if (p.key().find("lstm") == 0 || p.key().find("gru") == 0)
      std::cout << p.key() << " " << p.value().sizes() << "\n";

  auto train_set = torch::data::datasets::MNIST(root)
                       .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                       .map(torch::data::transforms::Stack<>());
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set), torch::data::DataLoaderOptions().batch_size(kBatchSize));
  auto test_set = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest)
                      .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                      .map(torch::data::transforms::Stack<>());
  auto test_loader = torch::data::make_data_loader(std::move(test_set), 100);

  optimizer =
      std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(5e-3));
  torch::optim::StepLR scheduler(*optimizer, /*step_size=*/1, /*gamma=*/0.5);

  for (int epoch = 1; epoch <= 2; ++epoch) {
    model->train();
    int64_t batch_index = 0;
    double total = 0;
    for (auto& batch : *train_loader) {
      if (max_batches >= 0 && batch_index >= max_batches) continue;
      auto loss = train_step(batch.data, batch.target);
      total += loss.item<double>();
      if (batch_index++ % 10 == 0)
        std::printf("epoch %d batch %3ld loss %.4f\n", epoch, static_cast<long>(batch_index - 1),
                    loss.item<float>());
    }
    scheduler.step();
    // libtorch's StepLR: its first step() keeps the rate, its second halves it.
    const double lr = optimizer->param_groups()[0].options().get_lr();
    TORCH_CHECK(std::abs(lr - (epoch == 1 ? 5e-3 : 2.5e-3)) < 1e-12, "StepLR gave lr ", lr);
    std::printf("epoch %d mean loss %.4f lr %.5f\n", epoch, total / batch_index, lr);

    torch::NoGradGuard no_grad;
    model->eval();
    int64_t correct = 0, count = 0;
    for (const auto& batch : *test_loader) {
      c10::InferenceMode guard;
      auto logits = model->forward(batch.data);
      correct += logits.argmax(1).eq(batch.target).sum().item<int64_t>();
      count += batch.target.size(0);
    }
    std::printf("epoch %d test accuracy %.4f\n", epoch, static_cast<double>(correct) / count);
  }
  return 0;
}
