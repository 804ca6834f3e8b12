// A custom dataset, written for libtorch's C++ frontend: a
// torch::data::datasets::Dataset subclass that reads its own files (the idx
// files in ./data, parsed here by hand), returns Examples made with
// torch::from_blob over its pixels as kUInt8 (converted to float), and is mapped
// through a Lambda transform and Stack; a
// network declared as a subclass of nn::SequentialImpl with TORCH_MODULE, its
// layers nn::Functional over torch::max_pool2d and torch::reshape passed by
// name with their arguments. (libtorch cannot take torch::log_softmax by name:
// it is overloaded there; Kiln can.) It builds unchanged
// against libtorch (tests/compat/against_libtorch.sh). Built against Kiln,
// the training step is traced (KILN_TRACE) unless KILN_JIT=0.
//
// usage: compat_custom_dataset [DATA_ROOT]
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

struct Options {
  size_t train_batch_size = 50;
  size_t test_batch_size = 100;
  size_t iterations = 3;
  size_t log_interval = 10;
  size_t train_limit = 600;  // images of the training file to use
};
static Options options;

uint32_t read_big_endian(std::ifstream& in) {
  unsigned char b[4];
  in.read(reinterpret_cast<char*>(b), 4);
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

// The images and labels of an idx pair, each image rows x cols bytes.
struct Digits {
  std::vector<std::vector<uint8_t>> images;
  std::vector<int64_t> labels;
  int64_t rows = 0, cols = 0;
};

Digits read_digits(const std::string& images_path, const std::string& labels_path, size_t limit) {
  std::ifstream images(images_path, std::ios::binary), labels(labels_path, std::ios::binary);
  TORCH_CHECK(images && labels, "cannot open ", images_path, " or ", labels_path);
  TORCH_CHECK(read_big_endian(images) == 2051, "not an idx image file: ", images_path);
  TORCH_CHECK(read_big_endian(labels) == 2049, "not an idx label file: ", labels_path);
  const size_t count = std::min<size_t>(read_big_endian(images), limit);
  read_big_endian(labels);
  Digits d;
  d.rows = read_big_endian(images);
  d.cols = read_big_endian(images);
  std::vector<uint8_t> pixels(d.rows * d.cols);
  for (size_t i = 0; i < count; ++i) {
    images.read(reinterpret_cast<char*>(pixels.data()), pixels.size());
    d.images.emplace_back(pixels.begin(), pixels.end());
    d.labels.push_back(labels.get());
  }
  return d;
}

class CustomDataset : public torch::data::datasets::Dataset<CustomDataset> {
  using Example = torch::data::Example<>;
  Digits digits;

 public:
  explicit CustomDataset(Digits d) : digits(std::move(d)) {}

  Example get(size_t index) {
    auto image =
        torch::from_blob(digits.images[index].data(), {1, digits.rows, digits.cols}, torch::kUInt8);
    auto label = torch::from_blob(&digits.labels[index], {1}, torch::kLong);
    return {image.clone(), label.clone()};
  }

  torch::optional<size_t> size() const { return digits.images.size(); }
};

struct NetworkImpl : torch::nn::SequentialImpl {
  NetworkImpl() {
    using namespace torch::nn;
    auto stride = torch::ExpandingArray<2>({2, 2});
    torch::ExpandingArray<2> shape({-1, 16 * 7 * 7});
    push_back(Conv2d(Conv2dOptions(1, 8, 3).padding(1)));
    push_back(Functional(torch::relu));
    push_back(Functional(torch::max_pool2d, 2, stride, 0, 1, false));
    push_back(Conv2d(Conv2dOptions(8, 16, 3).padding(1)));
    push_back(Functional(torch::relu));
    push_back(Functional(torch::max_pool2d, 2, stride, 0, 1, false));
    push_back(Functional(torch::reshape, shape));
    push_back(Dropout(0.25));
    push_back(Linear(16 * 7 * 7, 32));
    push_back(Functional(torch::relu));
    push_back(Linear(32, 10));
    push_back(LogSoftmax(LogSoftmaxOptions(1)));
  }
};
TORCH_MODULE(Network);

Network network(nullptr);
std::unique_ptr<torch::optim::SGD> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor data, torch::Tensor targets) {
  auto output = network->forward(data);
  auto loss = torch::nll_loss(output, targets);
  optimizer->zero_grad();
  loss.backward();
  optimizer->step();
  return loss;
}

template <typename DataLoader>
void train(DataLoader& loader, size_t epoch, size_t data_size) {
  size_t index = 0;
  network->train();
  float Loss = 0;
  for (auto& batch : loader) {
    auto data = batch.data;
    auto targets = batch.target.view({-1});
    auto loss = train_step(data, targets);
    AT_ASSERT(!std::isnan(loss.template item<float>()));
    Loss += loss.template item<float>();
    if (index++ % options.log_interval == 0)
      std::printf("Train Epoch: %zu %zu/%zu\tLoss: %.5f\n", epoch,
                  std::min(data_size, index * options.train_batch_size), data_size, Loss / index);
  }
}

template <typename DataLoader>
void test(DataLoader& loader, size_t data_size) {
  network->eval();
  torch::NoGradGuard no_grad;
  float Loss = 0, Acc = 0;
  for (const auto& batch : loader) {
    auto targets = batch.target.view({-1});
    auto output = network->forward(batch.data);
    Loss += torch::nll_loss(output, targets, {}, torch::Reduction::Sum).template item<float>();
    Acc += output.argmax(1).eq(targets).sum().template item<float>();
  }
  std::printf("Test Loss: %.5f\tAcc: %.4f\n", Loss / data_size, Acc / data_size);
}

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "./data";
  torch::manual_seed(1);
  auto scale =
      torch::data::transforms::Lambda<torch::data::Example<>>([](torch::data::Example<> e) {
        e.data = e.data / 255.0;
        return e;
      });
  auto train_set =
      CustomDataset(read_digits(root + "/train-images-idx3-ubyte",
                                root + "/train-labels-idx1-ubyte", options.train_limit))
          .map(scale)
          .map(torch::data::transforms::Stack<>());
  auto train_size = train_set.size().value();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_set), options.train_batch_size);
  auto test_set = CustomDataset(read_digits(root + "/t10k-images-idx3-ubyte",
                                            root + "/t10k-labels-idx1-ubyte", 300))
                      .map(scale)
                      .map(torch::data::transforms::Stack<>());
  auto test_size = test_set.size().value();
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(test_set), options.test_batch_size);

  network = Network();
  optimizer = std::make_unique<torch::optim::SGD>(network->parameters(),
                                                  torch::optim::SGDOptions(0.05).momentum(0.9));
  for (size_t i = 0; i < options.iterations; ++i) {
    train(*train_loader, i + 1, train_size);
    test(*test_loader, test_size);
  }
  return 0;
}
