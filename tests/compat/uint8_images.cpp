// Images arrive as uint8, written for libtorch's C++ frontend: the idx files are
// read whole into one kUInt8 tensor (from_blob over the bytes), summarised in
// integer arithmetic (a uint8 sum is int64, uint8 with int8 promotes to int16),
// saved and loaded with torch::save/torch::load, and served by a Dataset whose
// examples stay uint8 until a Lambda transform converts them (to(kFloat32),
// div_, flip for augmentation) before Normalize and Stack. The network is an
// nn::Sequential of Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Dropout and
// Linear, initialised through apply() with kaiming_normal_, with a ModuleDict
// of two heads (the digit and its parity); SGD with Nesterov momentum and weight
// decay. It builds unchanged against libtorch (tests/compat/against_libtorch.sh).
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
//
// usage: compat_uint8_images [DATA_ROOT [MAX_IMAGES]] (default ./data: idx
// files made by tests/compat/make_mnist_idx.py)
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

// The bytes of an idx file after its header (`header` bytes), as a kUInt8
// tensor of `shape`.
torch::Tensor read_idx(const std::string& path, int64_t header, std::vector<int64_t> shape) {
  std::ifstream in(path, std::ios::binary);
  TORCH_CHECK(in, "cannot open ", path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  TORCH_CHECK(static_cast<int64_t>(bytes.size()) >= header + count, path, " is too short");
  return torch::from_blob(bytes.data() + header, shape, torch::kUInt8).clone();
}

class Uint8Digits : public torch::data::datasets::Dataset<Uint8Digits> {
 public:
  Uint8Digits(torch::Tensor images, torch::Tensor labels)
      : images_(std::move(images)), labels_(std::move(labels)) {}
  torch::data::Example<> get(size_t index) override { return {images_[index], labels_[index]}; }
  torch::optional<size_t> size() const override { return images_.size(0); }

 private:
  torch::Tensor images_, labels_;
};

struct TwoHeadsImpl : torch::nn::Module {
  TwoHeadsImpl() {
    features = register_module(
        "features",
        torch::nn::Sequential(
            torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)),
            torch::nn::BatchNorm2d(8), torch::nn::ReLU(),
            torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)),
            torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1).bias(false)),
            torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(16).momentum(0.2)),
            torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true)),
            torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)), torch::nn::Flatten(),
            torch::nn::Dropout(torch::nn::DropoutOptions(0.2)), torch::nn::Linear(16 * 7 * 7, 32),
            torch::nn::ReLU()));
    std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> list = {
        {"digit", std::make_shared<torch::nn::LinearImpl>(32, 10)},
        {"parity", torch::nn::Linear(32, 2).ptr()}};
    heads = register_module("heads", torch::nn::ModuleDict(list));
  }
  std::pair<torch::Tensor, torch::Tensor> forward(torch::Tensor x) {
    auto h = features->forward(x);
    auto digit = heads["digit"]->as<torch::nn::Linear>()->forward(h);
    auto parity = heads["parity"]->as<torch::nn::LinearImpl>()->forward(h);
    return {digit, parity};
  }
  torch::nn::Sequential features{nullptr};
  torch::nn::ModuleDict heads{nullptr};
};
TORCH_MODULE(TwoHeads);

TwoHeads model{nullptr};
std::unique_ptr<torch::optim::SGD> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor data, torch::Tensor targets) {
  optimizer->zero_grad();
  auto out = model->forward(data);
  auto parity = targets.remainder(2);
  auto loss = torch::nn::functional::cross_entropy(out.first, targets) +
              0.5 * torch::nn::functional::cross_entropy(out.second, parity);
  loss.backward();
  optimizer->step();
  return loss;
}

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "./data";
  const int64_t max_images = argc > 2 ? std::stoll(argv[2]) : 600;
  torch::manual_seed(3);

  auto images = read_idx(root + "/train-images-idx3-ubyte", 16, {max_images, 1, 28, 28});
  auto labels = read_idx(root + "/train-labels-idx1-ubyte", 8, {max_images}).to(torch::kLong);
  std::cout << "images " << images.sizes() << " " << images.dtype() << ", labels " << labels.dtype()
            << "\n";

  // Integer summaries, as PyTorch computes them.
  auto total = images.sum();
  std::cout << "sum " << total.item<int64_t>() << " (" << total.dtype() << ")\n";
  std::cout << "max " << static_cast<int>(images.max().item<uint8_t>()) << " min "
            << static_cast<int>(images.min().item<uint8_t>()) << "\n";
  std::cout << "bright pixels " << (images > 127).sum().item<int64_t>() << "\n";
  std::cout << "mean " << images.to(torch::kFloat32).mean().item<float>() / 255 << "\n";
  auto inverted = 255 - images;  // stays uint8
  std::cout << "inverted " << inverted.dtype() << " first row sum "
            << inverted[0][0][14].sum().item<int64_t>() << "\n";
  auto shifted = images.to(torch::kInt8);  // 128..255 wrap to negatives
  auto mixed = images[0] + shifted[0];     // uint8 + int8 -> int16
  std::cout << "mixed " << mixed.dtype() << " " << mixed.max().item<int64_t>() << " "
            << mixed.min().item<int64_t>() << "\n";
  // PyTorch's promotions: a uint8 sum is int64, uint8 - a number stays uint8,
  // uint8 with int8 is int16.
  TORCH_CHECK(total.dtype() == torch::kLong && inverted.dtype() == torch::kUInt8 &&
                  mixed.dtype() == torch::kInt16,
              "unexpected dtypes ", total.dtype(), " ", inverted.dtype(), " ", mixed.dtype());
  auto per_class = torch::zeros({10}, torch::kLong);
  for (int64_t c = 0; c < 10; ++c) per_class[c] = labels.eq(c).sum();
  std::cout << "per class " << per_class.sum().item<int64_t>() << " "
            << per_class.argmax().item<int64_t>() << "\n";

  torch::save(images, "uint8_images.pt");
  torch::Tensor loaded;
  torch::load(loaded, "uint8_images.pt");
  std::cout << "loaded " << loaded.dtype() << " equal " << torch::equal(loaded, images) << "\n";

  auto to_float =
      torch::data::transforms::Lambda<torch::data::Example<>>([](torch::data::Example<> e) {
        auto x = e.data.to(torch::kFloat32).div_(255);
        if (e.target.item<int64_t>() % 3 == 0) x = x.flip({2});  // mirror some digits
        return torch::data::Example<>{x, e.target};
      });
  auto train_set = Uint8Digits(images, labels)
                       .map(to_float)
                       .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                       .map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_set), torch::data::DataLoaderOptions(50));

  model = TwoHeads();
  model->apply([](torch::nn::Module& m) {
    if (auto* conv = m.as<torch::nn::Conv2d>()) {
      torch::nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
      if (conv->bias.defined()) torch::nn::init::zeros_(conv->bias);
    }
  });
  optimizer = std::make_unique<torch::optim::SGD>(
      model->parameters(),
      torch::optim::SGDOptions(0.01).momentum(0.9).nesterov(true).weight_decay(1e-4));

  for (int epoch = 1; epoch <= 2; ++epoch) {
    model->train();
    int64_t index = 0;
    for (auto& batch : *loader) {
      auto loss = train_step(batch.data, batch.target);
      if (index++ % 4 == 0)
        std::printf("epoch %d batch %2ld loss %.4f\n", epoch, static_cast<long>(index - 1),
                    loss.item<float>());
    }
  }

  torch::NoGradGuard no_grad;
  model->eval();
  auto test = read_idx(root + "/t10k-images-idx3-ubyte", 16, {200, 1, 28, 28});
  auto test_labels = read_idx(root + "/t10k-labels-idx1-ubyte", 8, {200}).to(torch::kLong);
  auto x = (test.to(torch::kFloat32) / 255 - 0.1307) / 0.3081;
  auto out = model->forward(x);
  auto digit_ok = out.first.argmax(1).eq(test_labels).sum().item<int64_t>();
  auto parity_ok = out.second.argmax(1).eq(test_labels.remainder(2)).sum().item<int64_t>();
  std::printf("test digits %ld/200 parity %ld/200\n", static_cast<long>(digit_ok),
              static_cast<long>(parity_ok));
  return 0;
}
