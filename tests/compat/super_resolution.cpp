// A small super-resolution network written for libtorch's C++ frontend, in
// the manner of PyTorch's super_resolution and fast_neural_style examples:
// 8 x 8 images are upscaled to 16 x 16. The head pads by replication
// (ReplicationPad2d) before a 5 x 5 convolution; two residual blocks pad by
// reflection (ReflectionPad2d) and normalise per image and channel
// (InstanceNorm2d, affine); the tail pads with zeros (ZeroPad2d) and turns
// 4 channels into a 2x larger image (PixelShuffle), added to the input's
// nearest upscaling. Adagrad (with lr_decay and weight_decay) trains it on
// smooth patterns drawn with tensor ops. Evaluation under NoGradGuard prints
// the PSNR, the cosine similarity and pairwise distance of outputs and
// targets, and checks that pixel_unshuffle undoes pixel_shuffle and that the
// functional pads agree with the modules.
//
// Every parameter starts from a formula, not a random draw, and the data has
// none either, so the numbers it prints are the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding.
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

namespace F = torch::nn::functional;

namespace {

const int64_t kImages = 48;
const int64_t kBatch = 16;
const int64_t kSteps = 24;
const int64_t kChannels = 8;

// n smooth 16 x 16 patterns [n, 1, 16, 16] in [0, 1]: sums of two waves whose
// frequencies and phases depend on the image's index.
torch::Tensor make_patterns(int64_t n) {
  torch::Tensor i = torch::arange(n, torch::kFloat).view({n, 1, 1, 1});
  torch::Tensor y = torch::arange(16, torch::kFloat).view({1, 1, 16, 1});
  torch::Tensor x = torch::arange(16, torch::kFloat).view({1, 1, 1, 16});
  torch::Tensor fy = 0.2 + 0.05 * torch::fmod(i, 5.0);
  torch::Tensor fx = 0.15 + 0.07 * torch::fmod(i * 3.0, 4.0);
  torch::Tensor a = torch::sin(y * fy + x * fx + i * 0.4);
  torch::Tensor b = torch::cos(x * 0.3 - y * 0.25 * torch::fmod(i, 3.0) + i);
  return (0.5 + 0.3 * a + 0.2 * b).clamp(0.0, 1.0);
}

struct ResidualBlockImpl : torch::nn::Module {
  explicit ResidualBlockImpl(int64_t c)
      : pad1(torch::nn::ReflectionPad2dOptions(1)),
        conv1(torch::nn::Conv2dOptions(c, c, 3)),
        norm1(torch::nn::InstanceNorm2dOptions(c).affine(true)),
        pad2(torch::nn::ReflectionPad2dOptions({1, 1, 1, 1})),
        conv2(torch::nn::Conv2dOptions(c, c, 3)),
        norm2(torch::nn::InstanceNorm2dOptions(c).affine(true).eps(1e-4)) {
    register_module("pad1", pad1);
    register_module("conv1", conv1);
    register_module("norm1", norm1);
    register_module("pad2", pad2);
    register_module("conv2", conv2);
    register_module("norm2", norm2);
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor h = torch::relu(norm1(conv1(pad1(x))));
    return x + norm2(conv2(pad2(h)));
  }

  torch::nn::ReflectionPad2d pad1;
  torch::nn::Conv2d conv1;
  torch::nn::InstanceNorm2d norm1;
  torch::nn::ReflectionPad2d pad2;
  torch::nn::Conv2d conv2;
  torch::nn::InstanceNorm2d norm2;
};
TORCH_MODULE(ResidualBlock);

struct SuperResolutionImpl : torch::nn::Module {
  SuperResolutionImpl()
      : head(torch::nn::ReplicationPad2d(2), torch::nn::Conv2d(torch::nn::Conv2dOptions(1, kChannels, 5))),
        block1(kChannels),
        block2(kChannels),
        tail(torch::nn::ZeroPad2d(1), torch::nn::Conv2d(torch::nn::Conv2dOptions(kChannels, 4, 3)),
             torch::nn::PixelShuffle(torch::nn::PixelShuffleOptions(2))) {
    register_module("head", head);
    register_module("block1", block1);
    register_module("block2", block2);
    register_module("tail", tail);
  }

  torch::Tensor forward(torch::Tensor low) {
    torch::Tensor h = torch::relu(head->forward(low));
    h = block2(block1(h));
    torch::Tensor up = F::interpolate(
        low, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
    return up + tail->forward(h);
  }

  torch::nn::Sequential head;
  ResidualBlock block1, block2;
  torch::nn::Sequential tail;
};
TORCH_MODULE(SuperResolution);

// Every parameter from a formula: convolution weights sin waves scaled by
// 1 / sqrt(fan in), norms' weights near 1, biases small.
void deterministic_init(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  double k = 0;
  for (auto& named : m.named_parameters()) {
    torch::Tensor p = named.value();
    const int64_t n = p.numel();
    torch::Tensor wave = torch::sin(torch::arange(n, torch::kFloat) * 0.731 + (k += 1.0));
    const std::string& name = named.key();
    const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
    if (p.dim() == 1 && !is_bias) {
      p.copy_((1.0 + 0.1 * wave).view_as(p));
    } else if (p.dim() == 1) {
      p.copy_((0.05 * wave).view_as(p));
    } else {
      const double fan_in = static_cast<double>(n / p.size(0));
      p.copy_((wave / std::sqrt(fan_in)).view_as(p));
    }
  }
}

SuperResolution model{nullptr};
std::unique_ptr<torch::optim::Adagrad> optimizer;

STEP(torch::Tensor, train_step, torch::Tensor low, torch::Tensor high) {
  optimizer->zero_grad();
  torch::Tensor loss = F::mse_loss(model->forward(low), high);
  loss.backward();
  optimizer->step();
  return loss;
}

}  // namespace

int main() {
  torch::Tensor high = make_patterns(kImages);
  torch::Tensor low = F::avg_pool2d(high, F::AvgPool2dFuncOptions(2));
  std::printf("images: %ld low-res %ldx%ld -> high-res %ldx%ld\n", static_cast<long>(kImages),
              static_cast<long>(low.size(2)), static_cast<long>(low.size(3)),
              static_cast<long>(high.size(2)), static_cast<long>(high.size(3)));

  model = SuperResolution();
  deterministic_init(*model);
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  std::printf("parameters: %ld in %zu tensors\n", static_cast<long>(count),
              model->parameters().size());
  optimizer = std::make_unique<torch::optim::Adagrad>(
      model->parameters(),
      torch::optim::AdagradOptions(0.05).lr_decay(1e-3).weight_decay(1e-4).initial_accumulator_value(0.1));

  {
    torch::NoGradGuard no_grad;
    torch::Tensor up = F::interpolate(
        low, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
    std::printf("nearest upscaling alone: mse %.6f\n", F::mse_loss(up, high).item<float>());
  }

  model->train();
  for (int64_t step = 0; step < kSteps; ++step) {
    const int64_t start = (step * kBatch) % kImages;
    torch::Tensor loss = train_step(low.narrow(0, start, kBatch), high.narrow(0, start, kBatch));
    if (step % 4 == 0 || step == kSteps - 1)
      std::printf("step %2ld loss %.6f\n", static_cast<long>(step), loss.item<float>());
  }

  torch::NoGradGuard no_grad;
  model->eval();
  torch::Tensor out = model->forward(low);
  const double mse = F::mse_loss(out, high).item<float>();
  std::printf("mse %.6f psnr %.3f dB\n", mse, 10.0 * std::log10(1.0 / mse));
  torch::Tensor flat_out = out.flatten(1), flat_high = high.flatten(1);
  torch::Tensor cos = F::cosine_similarity(flat_out, flat_high,
                                           F::CosineSimilarityFuncOptions().dim(1).eps(1e-8));
  torch::Tensor dist =
      F::pairwise_distance(flat_out, flat_high, F::PairwiseDistanceFuncOptions().p(2.0));
  torch::nn::CosineSimilarity cos_module(torch::nn::CosineSimilarityOptions().dim(1));
  torch::nn::PairwiseDistance dist_module(torch::nn::PairwiseDistanceOptions().p(1.0).keepdim(true));
  std::printf("cosine similarity: mean %.6f min %.6f (module %.6f)\n", cos.mean().item<float>(),
              cos.min().item<float>(), cos_module(flat_out, flat_high).mean().item<float>());
  std::printf("pairwise distance: L2 mean %.5f, L1 of the first %.5f (shape [%ld, %ld])\n",
              dist.mean().item<float>(), dist_module(flat_out, flat_high)[0][0].item<float>(),
              static_cast<long>(dist_module(flat_out, flat_high).size(0)),
              static_cast<long>(dist_module(flat_out, flat_high).size(1)));

  // pixel_unshuffle undoes pixel_shuffle; the functional pads agree with the modules.
  torch::Tensor shuffled = F::pixel_shuffle(out.repeat({1, 4, 1, 1}), 2);
  torch::Tensor back = F::pixel_unshuffle(shuffled, 2);
  std::printf("pixel_shuffle %ldx%ld, unshuffled back: %s\n", static_cast<long>(shuffled.size(2)),
              static_cast<long>(shuffled.size(3)),
              torch::equal(back, out.repeat({1, 4, 1, 1})) ? "equal" : "DIFFERENT");
  torch::Tensor reflect = F::pad(low, F::PadFuncOptions({1, 2, 2, 1}).mode(torch::kReflect));
  torch::Tensor replicate = F::pad(low, F::PadFuncOptions({2, 2, 2, 2}).mode(torch::kReplicate));
  torch::Tensor circular = F::pad(low, F::PadFuncOptions({1, 1, 2, 0}).mode(torch::kCircular));
  torch::nn::ReflectionPad2d reflect_module(torch::nn::ReflectionPad2dOptions({1, 2, 2, 1}));
  torch::nn::ReplicationPad2d replicate_module(2);
  std::printf("pads: reflect %s, replicate %s, circular sum %.5f, constant-pad module sum %.5f\n",
              torch::equal(reflect, reflect_module(low)) ? "equal" : "DIFFERENT",
              torch::equal(replicate, replicate_module(low)) ? "equal" : "DIFFERENT",
              circular.sum().item<float>(),
              torch::nn::ConstantPad2d(torch::nn::ConstantPad2dOptions({1, 1, 1, 1}, 0.5))(low)
                  .sum()
                  .item<float>());
  torch::Tensor in = F::instance_norm(out, F::InstanceNormFuncOptions().eps(1e-5));
  std::printf("instance_norm: per-image mean %.6f, variance %.6f\n",
              in.mean({2, 3}).abs().max().item<float>(),
              in.var({2, 3}, /*unbiased=*/false).mean().item<float>());
  return 0;
}
