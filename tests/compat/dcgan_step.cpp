// A DCGAN trained for a few steps on MNIST, written for libtorch's C++
// frontend: a generator module declared with TORCH_MODULE (ConvTranspose2d,
// BatchNorm2d), a discriminator as nn::Sequential with nn::Functional layers
// taking libtorch's functions by name, Adam with betas as a tuple,
// binary_cross_entropy against labels drawn with uniform_, a loader with
// worker threads, and checkpoints of the generator, its optimizer and a sample
// with torch::save / torch::load, checked to round-trip exactly. It builds
// unchanged against libtorch (tests/compat/against_libtorch.sh). Built against
// Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
//
// usage: compat_dcgan_step [DATA_ROOT [STEPS]]
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

const int64_t kNoiseSize = 16;
const int64_t kBatchSize = 32;

using namespace torch;

struct DCGANGeneratorImpl : nn::Module {
  DCGANGeneratorImpl(int kNoiseSize)
      : conv1(nn::ConvTranspose2dOptions(kNoiseSize, 32, 7).bias(false)),
        batch_norm1(32),
        conv2(nn::ConvTranspose2dOptions(32, 16, 4).stride(2).padding(1).bias(false)),
        batch_norm2(16),
        conv3(nn::ConvTranspose2dOptions(16, 1, 4).stride(2).padding(1).bias(false)) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv3", conv3);
    register_module("batch_norm1", batch_norm1);
    register_module("batch_norm2", batch_norm2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(batch_norm1(conv1(x)));
    x = torch::relu(batch_norm2(conv2(x)));
    x = torch::tanh(conv3(x));
    return x;
  }

  nn::ConvTranspose2d conv1, conv2, conv3;
  nn::BatchNorm2d batch_norm1, batch_norm2;
};
TORCH_MODULE(DCGANGenerator);

nn::Sequential make_discriminator() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 4).stride(2).padding(1).bias(false)),
                        nn::Functional(torch::leaky_relu, 0.2),
                        nn::Conv2d(nn::Conv2dOptions(16, 32, 4).stride(2).padding(1).bias(false)),
                        nn::BatchNorm2d(32),
                        nn::LeakyReLU(nn::LeakyReLUOptions().negative_slope(0.2)),
                        nn::Conv2d(nn::Conv2dOptions(32, 1, 7).stride(1).padding(0).bias(false)),
                        nn::Functional(torch::sigmoid));
}

DCGANGenerator generator(nullptr);
nn::Sequential discriminator(nullptr);
std::unique_ptr<optim::Adam> generator_optimizer, discriminator_optimizer;

using Losses = std::tuple<torch::Tensor, torch::Tensor>;

// One discriminator update on real and generated images, then one generator update.
STEP(Losses, gan_step, torch::Tensor real_images) {
  const int64_t n = real_images.size(0);
  discriminator->zero_grad();
  torch::Tensor real_labels = torch::empty(n).uniform_(0.8, 1.0);
  torch::Tensor real_output = discriminator->forward(real_images).reshape({n});
  torch::Tensor d_loss_real = torch::binary_cross_entropy(real_output, real_labels);
  d_loss_real.backward();

  torch::Tensor noise = torch::randn({n, kNoiseSize, 1, 1});
  torch::Tensor fake_images = generator->forward(noise);
  torch::Tensor fake_labels = torch::zeros(n);
  torch::Tensor fake_output = discriminator->forward(fake_images.detach()).reshape({n});
  torch::Tensor d_loss_fake = torch::binary_cross_entropy(fake_output, fake_labels);
  d_loss_fake.backward();
  torch::Tensor d_loss = d_loss_real + d_loss_fake;
  discriminator_optimizer->step();

  generator->zero_grad();
  fake_labels.fill_(1);
  fake_output = discriminator->forward(fake_images).reshape({n});
  torch::Tensor g_loss = torch::binary_cross_entropy(fake_output, fake_labels);
  g_loss.backward();
  generator_optimizer->step();
  return {d_loss, g_loss};
}

bool same_parameters(const nn::Module& a, const nn::Module& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i)
    if (pa[i].key() != pb[i].key() || !torch::equal(pa[i].value(), pb[i].value())) return false;
  return true;
}

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : "./data";
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 6;
  torch::manual_seed(1);

  generator = DCGANGenerator(kNoiseSize);
  discriminator = make_discriminator();
  generator_optimizer = std::make_unique<optim::Adam>(
      generator->parameters(), optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));
  discriminator_optimizer = std::make_unique<optim::Adam>(
      discriminator->parameters(), optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));

  auto dataset = torch::data::datasets::MNIST(root)
                     .map(torch::data::transforms::Normalize<>(0.5, 0.5))
                     .map(torch::data::transforms::Stack<>());
  const int64_t batches_per_epoch =
      std::ceil(dataset.size().value() / static_cast<double>(kBatchSize));
  auto data_loader = torch::data::make_data_loader(
      std::move(dataset),
      torch::data::DataLoaderOptions().batch_size(kBatchSize).workers(2).drop_last(true));
  std::printf("%ld batches per epoch\n", static_cast<long>(batches_per_epoch));

  int64_t batch_index = 0;
  for (torch::data::Example<>& batch : *data_loader) {
    if (batch_index >= steps) continue;  // run the loader to its end
    auto [d_loss, g_loss] = gan_step(batch.data);
    ++batch_index;
    std::printf("[%2ld/%2ld] D_loss: %.4f | G_loss: %.4f\n", static_cast<long>(batch_index),
                static_cast<long>(steps), d_loss.item<float>(), g_loss.item<float>());
  }

  // Checkpoints: generator, its optimizer, and a sample; restored into fresh objects.
  generator->eval();
  torch::Tensor samples;
  {
    torch::NoGradGuard no_grad;
    samples = generator->forward(torch::randn({4, kNoiseSize, 1, 1}));
  }
  torch::save(generator, "dcgan-generator.pt");
  torch::save(*generator_optimizer, "dcgan-generator-optimizer.pt");
  torch::save((samples + 1.0) / 2.0, torch::str("dcgan-sample-", 1, ".pt"));

  DCGANGenerator restored(kNoiseSize);
  optim::Adam restored_optimizer(restored->parameters(),
                                 optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));
  torch::load(restored, "dcgan-generator.pt");
  torch::load(restored_optimizer, "dcgan-generator-optimizer.pt");
  torch::Tensor restored_samples;
  torch::load(restored_samples, "dcgan-sample-1.pt");
  std::cout << std::boolalpha
            << "generator restored exactly: " << same_parameters(*generator, *restored)
            << "\nsample restored exactly: "
            << torch::equal(restored_samples, (samples + 1.0) / 2.0) << std::endl;

  // The restored optimizer takes the step the original takes.
  for (auto* pair : {&generator, &restored}) {
    (*pair)->train();
    (*pair)->zero_grad();
  }
  torch::manual_seed(7);
  auto noise = torch::randn({8, kNoiseSize, 1, 1});
  generator->forward(noise).pow(2).mean().backward();
  restored->forward(noise).pow(2).mean().backward();
  generator_optimizer->step();
  restored_optimizer.step();
  std::cout << "optimizer state restored exactly: " << same_parameters(*generator, *restored)
            << std::endl;
  std::printf("sample mean: %.5f\n", samples.mean().item<float>());
  return 0;
}
