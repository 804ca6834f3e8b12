// A small ResNet written for libtorch's C++ frontend, in the manner of
// torchvision's resnet18 and the usual "train, checkpoint, resume" tutorial:
// a stem (3x3 convolution without bias, BatchNorm2d, ReLU, MaxPool2d), two basic blocks
// (the second halves the resolution and widens, with a 1x1 downsample
// shortcut), AdaptiveAvgPool2d to 1x1, flatten and a linear classifier. SGD
// with momentum, Nesterov and weight decay trains it with a short linear
// warm-up and then a cosine schedule written by hand on the parameter groups,
// as users do. Halfway it saves the model and the optimizer (torch::save),
// loads them into a fresh model and optimizer (torch::load), and trains both
// on: they must stay the same to the bit, running statistics included.
//
// The images are made with tensor ops and a std::vector read by from_blob;
// evaluation in eval() mode under NoGradGuard prints the accuracy, the
// BatchNorm running statistics, a few probabilities through std::cout, and
// per-class counts through an accessor. The weights as one vector
// (parameters_to_vector) are perturbed and put back (vector_to_parameters).
//
// Every parameter starts from a formula, not a random draw, and the data has
// none either, so the numbers it prints are the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding.
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

const int64_t kImages = 32;
const int64_t kBatch = 16;
const int64_t kClasses = 4;
const int64_t kSteps = 16;
const int64_t kWarmup = 3;
const double kBaseLr = 0.05;

// n images [n, 3, 12, 12]: class c = i % 4 is a stripe direction (horizontal,
// vertical, two diagonals) whose phase and colour mix depend on i.
std::pair<torch::Tensor, torch::Tensor> make_images(int64_t n) {
  std::vector<float> pixels(n * 3 * 12 * 12);
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % kClasses;
    labels[i] = c;
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t y = 0; y < 12; ++y)
        for (int64_t x = 0; x < 12; ++x) {
          const double t = c == 0 ? y : c == 1 ? x : c == 2 ? x + y : x - y;
          const double v = std::sin(1.3 * t + 0.7 * i) * (0.6 + 0.2 * ch) + 0.1 * std::cos(0.5 * i + ch);
          pixels[((i * 3 + ch) * 12 + y) * 12 + x] = static_cast<float>(v);
        }
  }
  torch::Tensor images = torch::from_blob(pixels.data(), {n, 3, 12, 12}, torch::kFloat).clone();
  torch::Tensor targets = torch::from_blob(labels.data(), {n}, torch::TensorOptions().dtype(torch::kLong)).clone();
  return {images, targets};
}

torch::nn::Conv2dOptions conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false);
}

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(conv3x3(in, out, stride)), bn1(out), conv2(conv3x3(out, out)), bn2(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample",
          torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                torch::nn::BatchNorm2d(out)));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor identity = x;
    torch::Tensor out = torch::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    if (!downsample.is_empty()) identity = downsample->forward(x);
    out += identity;
    return torch::relu(out);
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::BatchNorm2d bn1, bn2;
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

struct TinyResNetImpl : torch::nn::Module {
  TinyResNetImpl()
      : stem(torch::nn::Conv2d(conv3x3(3, 8)), torch::nn::BatchNorm2d(8), torch::nn::ReLU(true),
             torch::nn::MaxPool2d(2)),
        layer1(8, 8, 1),
        layer2(8, 16, 2),
        pool(torch::nn::AdaptiveAvgPool2dOptions({1, 1})),
        fc(16, kClasses) {
    register_module("stem", stem);
    register_module("layer1", layer1);
    register_module("layer2", layer2);
    register_module("pool", pool);
    register_module("fc", fc);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = stem->forward(x);
    x = layer2(layer1(x));
    x = torch::flatten(pool(x), 1);
    return fc(x);
  }

  torch::nn::Sequential stem;
  BasicBlock layer1, layer2;
  torch::nn::AdaptiveAvgPool2d pool;
  torch::nn::Linear fc;
};
TORCH_MODULE(TinyResNet);

// Convolution and linear weights from sin waves scaled by 1 / sqrt(fan in);
// BatchNorm weights near 1; biases small.
void deterministic_init(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  double k = 0;
  for (auto& named : m.named_parameters()) {
    torch::Tensor& p = named.value();
    k += 1.0;
    torch::Tensor wave = torch::sin(torch::arange(p.numel(), torch::kFloat) * 0.917 + k).view(p.sizes());
    if (named.key().find("bias") != std::string::npos) {
      p.copy_(0.02 * wave);
    } else if (p.dim() == 1) {
      p.copy_(1.0 + 0.1 * wave);
    } else {
      p.copy_(wave * (1.5 / std::sqrt(static_cast<double>(p.numel() / p.size(0)))));
    }
  }
}

double lr_at(int64_t step) {
  if (step < kWarmup) return kBaseLr * (step + 1) / kWarmup;
  const double progress = static_cast<double>(step - kWarmup) / (kSteps - kWarmup);
  return 0.001 + 0.5 * (kBaseLr - 0.001) * (1.0 + std::cos(M_PI * progress));
}

void set_lr(torch::optim::SGD& opt, double lr) {
  for (auto& group : opt.param_groups())
    static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
}

TinyResNet model{nullptr};
std::unique_ptr<torch::optim::SGD> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor x, torch::Tensor y) {
  optimizer->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
  loss.backward();
  optimizer->step();
  return loss;
}

double max_difference(TinyResNet& a, TinyResNet& b) {
  double worst = 0;
  auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa)
    worst = std::max(worst, (item.value() - pb[item.key()]).abs().max().item<double>());
  auto ba = a->named_buffers(), bb = b->named_buffers();
  for (const auto& item : ba)
    worst = std::max(worst, (item.value().to(torch::kFloat) - bb[item.key()].to(torch::kFloat)).abs().max().item<double>());
  return worst;
}

torch::optim::SGDOptions sgd_options() {
  return torch::optim::SGDOptions(kBaseLr).momentum(0.9).nesterov(true).weight_decay(5e-4);
}

}  // namespace

int main() {
  torch::manual_seed(0);
  auto [images, labels] = make_images(kImages);
  auto [test_images, test_labels] = make_images(2 * kImages);
  test_images = test_images.index({Slice(kImages, torch::indexing::None)});
  test_labels = test_labels.index({Slice(kImages, torch::indexing::None)});
  std::cout << "images " << images.sizes() << " labels " << labels.sizes() << std::endl;

  model = TinyResNet();
  deterministic_init(*model);
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  std::printf("parameters: %ld in %zu tensors\n", static_cast<long>(count), model->parameters().size());
  optimizer = std::make_unique<torch::optim::SGD>(model->parameters(), sgd_options());

  const std::string model_path = "resnet_checkpoint_model.pt";
  const std::string optim_path = "resnet_checkpoint_optimizer.pt";
  TinyResNet resumed{nullptr};
  std::unique_ptr<torch::optim::SGD> resumed_optimizer;

  model->train();
  for (int64_t step = 0; step < kSteps; ++step) {
    const int64_t start = (step % 2) * kBatch;
    torch::Tensor x = images.narrow(0, start, kBatch), y = labels.narrow(0, start, kBatch);
    set_lr(*optimizer, lr_at(step));
    torch::Tensor loss = train_step(x, y);
    std::printf("step %2ld lr %.5f loss %.5f\n", static_cast<long>(step), lr_at(step), loss.item<float>());

    if (step == kSteps / 2) {
      torch::save(model, model_path);
      torch::save(*optimizer, optim_path);
      resumed = TinyResNet();
      resumed_optimizer = std::make_unique<torch::optim::SGD>(resumed->parameters(), sgd_options());
      torch::load(resumed, model_path);
      torch::load(*resumed_optimizer, optim_path);
      resumed->train();
      // libtorch's load restores the optimizer's state (the momentum buffers),
      // not its options: the rate is still the one it was made with.
      std::printf("checkpoint at step %ld: difference after loading %g, lr %.5f\n",
                  static_cast<long>(step), max_difference(model, resumed),
                  static_cast<torch::optim::SGDOptions&>(resumed_optimizer->param_groups()[0].options()).lr());
    } else if (step > kSteps / 2) {
      // The resumed copy takes the same step eagerly, outside the traced function.
      set_lr(*resumed_optimizer, lr_at(step));
      resumed_optimizer->zero_grad();
      torch::Tensor resumed_loss = torch::nn::functional::cross_entropy(resumed->forward(x), y);
      resumed_loss.backward();
      resumed_optimizer->step();
      std::printf("  resumed loss %.5f, largest difference %.2g\n", resumed_loss.item<float>(),
                  max_difference(model, resumed));
    }
  }

  torch::NoGradGuard no_grad;
  model->eval();
  torch::Tensor logits = model->forward(test_images);
  torch::Tensor pred = logits.argmax(1);
  std::printf("test accuracy %.4f\n", pred.eq(test_labels).to(torch::kFloat).mean().item<float>());
  torch::Tensor per_class = torch::zeros({kClasses}, torch::kLong);
  auto pred_a = pred.accessor<int64_t, 1>();
  auto label_a = test_labels.accessor<int64_t, 1>();
  auto count_a = per_class.accessor<int64_t, 1>();
  for (int64_t i = 0; i < pred.size(0); ++i)
    if (pred_a[i] == label_a[i]) ++count_a[label_a[i]];
  std::printf("correct per class: %ld %ld %ld %ld\n", static_cast<long>(count_a[0]), static_cast<long>(count_a[1]),
              static_cast<long>(count_a[2]), static_cast<long>(count_a[3]));
  for (const auto& item : model->named_buffers()) {
    if (item.key().find("layer2.bn2.running_") == std::string::npos) continue;
    torch::Tensor b = item.value();
    std::printf("%s: sum %.5f\n", item.key().c_str(), b.to(torch::kDouble).sum().item<double>());
  }
  torch::Tensor flat = torch::nn::utils::parameters_to_vector(model->parameters());
  std::printf("parameter vector: %ld values, norm %.5f\n", static_cast<long>(flat.numel()), flat.norm().item<float>());
  torch::nn::utils::vector_to_parameters(flat * (1.0 + 0.05 * torch::cos(torch::arange(flat.numel()).to(torch::kFloat))),
                                         model->parameters());
  const float perturbed = torch::nn::functional::cross_entropy(model->forward(test_images), test_labels).item<float>();
  torch::nn::utils::vector_to_parameters(flat, model->parameters());
  std::printf("test loss %.5f, perturbed by 5%% %.5f, restored %.5f\n",
              torch::nn::functional::cross_entropy(logits, test_labels).item<float>(), perturbed,
              torch::nn::functional::cross_entropy(model->forward(test_images), test_labels).item<float>());
  torch::Tensor probs = torch::softmax(logits.index({Slice(0, 2)}), 1);
  std::cout << "probabilities of the first two:\n" << probs << std::endl;
  std::cout << "train-mode logits differ from eval-mode ones: " << std::boolalpha
            << !torch::allclose(logits, (model->train(), model->forward(test_images))) << std::endl;
  return 0;
}
