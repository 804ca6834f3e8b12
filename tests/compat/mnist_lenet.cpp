// A LeNet-style MNIST trainer written for libtorch's C++ frontend: a module
// with registered submodules, torch::data's MNIST dataset mapped through
// Normalize and Stack, loaders made by make_data_loader (one with two worker
// threads), SGD with momentum, nll_loss with a sum reduction for the test
// loss. It builds unchanged against libtorch (tests/compat/against_libtorch.sh).
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
//
// usage: compat_mnist_lenet [DATA_ROOT [MAX_BATCHES]] (default ./data: idx
// files made by tests/compat/make_mnist_idx.py; MAX_BATCHES per epoch, for the
// 60000-image files real libtorch needs)
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

const int64_t kTrainBatchSize = 64;
const int64_t kTestBatchSize = 1000;
const int64_t kNumberOfEpochs = 2;
const int64_t kLogInterval = 8;

struct Net : torch::nn::Module {
  Net()
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 320});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.5, /*train=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};

std::shared_ptr<Net> model;
std::unique_ptr<torch::optim::SGD> optimizer;
int64_t max_batches = -1;

// One optimisation step on a batch; returns the loss.
STEP(torch::Tensor, train_step, torch::Tensor data, torch::Tensor targets) {
  optimizer->zero_grad();
  auto output = model->forward(data);
  auto loss = torch::nll_loss(output, targets);
  loss.backward();
  optimizer->step();
  return loss;
}

template <typename DataLoader>
void train(int64_t epoch, DataLoader& data_loader, size_t dataset_size) {
  model->train();
  size_t batch_idx = 0, seen = 0;
  for (auto& batch : data_loader) {
    // The loader must run to its end (libtorch refuses a new pass while workers still work).
    if (max_batches >= 0 && static_cast<int64_t>(batch_idx) >= max_batches) continue;
    auto loss = train_step(batch.data, batch.target);
    AT_ASSERT(!std::isnan(loss.template item<float>()));
    seen += batch.data.size(0);
    if (batch_idx++ % kLogInterval == 0)
      std::printf("Train Epoch: %ld [%5zu/%5zu] Loss: %.4f\n", static_cast<long>(epoch), seen,
                  dataset_size, loss.template item<float>());
  }
}

template <typename DataLoader>
void test(DataLoader& data_loader, size_t dataset_size) {
  torch::NoGradGuard no_grad;
  model->eval();
  double test_loss = 0;
  int64_t correct = 0;
  for (const auto& batch : data_loader) {
    auto output = model->forward(batch.data);
    test_loss += torch::nll_loss(output, batch.target, /*weight=*/{}, torch::Reduction::Sum)
                     .template item<float>();
    auto pred = output.argmax(1);
    correct += pred.eq(batch.target).sum().template item<int64_t>();
  }
  test_loss /= dataset_size;
  std::printf("Test set: Average loss: %.4f | Accuracy: %.3f\n", test_loss,
              static_cast<double>(correct) / dataset_size);
}

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "./data";
  if (argc > 2) max_batches = std::stoll(argv[2]);
  torch::manual_seed(1);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  model = std::make_shared<Net>();
  model->to(torch::kCPU);

  auto train_dataset = torch::data::datasets::MNIST(root)
                           .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                           .map(torch::data::transforms::Stack<>());
  const size_t train_dataset_size = train_dataset.size().value();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_dataset),
      torch::data::DataLoaderOptions().batch_size(kTrainBatchSize).workers(2));

  auto test_dataset = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest)
                          .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                          .map(torch::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader = torch::data::make_data_loader(std::move(test_dataset), kTestBatchSize);

  optimizer = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                  torch::optim::SGDOptions(0.01).momentum(0.5));

  std::printf("training on %zu images, testing on %zu\n", train_dataset_size, test_dataset_size);
  for (int64_t epoch = 1; epoch <= kNumberOfEpochs; ++epoch) {
    train(epoch, *train_loader, train_dataset_size);
    test(*test_loader, test_dataset_size);
  }
  return 0;
}
