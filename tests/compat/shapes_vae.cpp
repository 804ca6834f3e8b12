// A convolutional variational autoencoder written for libtorch's C++ frontend,
// on 16 x 16 images of three kinds of shape (a horizontal bar, a vertical bar,
// a box) drawn with tensor ops. The encoder is Conv2d, GroupNorm, ELU and
// Mish, an AdaptiveMaxPool2d to 3 x 3 (overlapping windows), Flatten and a
// Linear giving the mean and a Hardtanh-clamped log-variance; the latent is
// drawn with the reparameterisation trick; the decoder is Linear, SELU,
// Unflatten and ConvTranspose2d with PReLU. The loss is the reconstruction's
// binary cross entropy with logits plus the KL term, and a small classifier of
// the latent mean learns the shape's kind by KLDivLoss (batchmean) against
// smoothed labels, its temperature a Softplus of a parameter. A buffer
// (register_buffer) keeps a running KL per latent dimension, updated in the
// step. Evaluation under NoGradGuard: reconstruction, accuracy, active units,
// samples from the prior, and gather/scatter_add/index reports. It builds
// unchanged against libtorch (tests/compat/against_libtorch.sh). Built against
// Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <tuple>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

using torch::indexing::Ellipsis;
using torch::indexing::None;
using torch::indexing::Slice;

namespace {

const int64_t kSide = 16;
const int64_t kLatent = 6;
const int64_t kKinds = 3;
const int64_t kImages = 384;
const int64_t kBatch = 48;
const int64_t kEpochs = 6;

// n images [n, 1, 16, 16] in {0, 1} and their kinds [n]: 0 a horizontal bar,
// 1 a vertical bar, 2 a 5 x 5 box outline, each at a random place.
std::tuple<torch::Tensor, torch::Tensor> make_shapes(int64_t n) {
  torch::Tensor rows = torch::arange(kSide).view({1, kSide, 1});
  torch::Tensor cols = torch::arange(kSide).view({1, 1, kSide});
  torch::Tensor kind = torch::randint(0, kKinds, {n});
  torch::Tensor r = torch::randint(2, kSide - 7, {n, 1, 1});
  torch::Tensor c = torch::randint(2, kSide - 7, {n, 1, 1});
  torch::Tensor in_r = rows.ge(r).logical_and(rows.lt(r + 5));
  torch::Tensor in_c = cols.ge(c).logical_and(cols.lt(c + 5));
  torch::Tensor hbar = rows.eq(r).logical_and(cols.ge(2)).logical_and(cols.lt(kSide - 2));
  torch::Tensor vbar = cols.eq(c).logical_and(rows.ge(2)).logical_and(rows.lt(kSide - 2));
  torch::Tensor edge =
      rows.eq(r).logical_or(rows.eq(r + 4)).logical_or(cols.eq(c)).logical_or(cols.eq(c + 4));
  torch::Tensor box = in_r.logical_and(in_c).logical_and(edge);
  torch::Tensor k = kind.view({n, 1, 1});
  torch::Tensor img = torch::where(k.eq(0), hbar, torch::where(k.eq(1), vbar, box));
  return {img.to(torch::kFloat).unsqueeze(1), kind};
}

struct VAEImpl : torch::nn::Module {
  VAEImpl()
      : encoder(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).stride(2).padding(1)),
                torch::nn::GroupNorm(torch::nn::GroupNormOptions(4, 16)),
                torch::nn::ELU(torch::nn::ELUOptions().alpha(1.0)),
                torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).stride(2).padding(1)),
                torch::nn::GroupNorm(torch::nn::GroupNormOptions(8, 32).eps(1e-4)),
                torch::nn::Mish(),
                torch::nn::AdaptiveMaxPool2d(torch::nn::AdaptiveMaxPool2dOptions(3)),
                torch::nn::Flatten()),
        to_stats(32 * 3 * 3, 2 * kLatent),
        clamp(torch::nn::HardtanhOptions().min_val(-6.0).max_val(3.0)),
        decoder(torch::nn::Linear(kLatent, 32 * 4 * 4), torch::nn::SELU(),
                torch::nn::Unflatten(torch::nn::UnflattenOptions(1, {32, 4, 4})),
                torch::nn::ConvTranspose2d(
                    torch::nn::ConvTranspose2dOptions(32, 16, 4).stride(2).padding(1)),
                torch::nn::PReLU(torch::nn::PReLUOptions().num_parameters(16).init(0.2)),
                torch::nn::ConvTranspose2d(
                    torch::nn::ConvTranspose2dOptions(16, 1, 4).stride(2).padding(1))),
        classifier(kLatent, kKinds) {
    register_module("encoder", encoder);
    register_module("to_stats", to_stats);
    register_module("clamp", clamp);
    register_module("decoder", decoder);
    register_module("classifier", classifier);
    temperature = register_parameter("temperature", torch::zeros({1}));
    kl_per_dim = register_buffer("kl_per_dim", torch::zeros({kLatent}));
  }
  // The latent's mean and log-variance.
  std::tuple<torch::Tensor, torch::Tensor> encode(const torch::Tensor& x) {
    std::vector<torch::Tensor> stats = to_stats(encoder->forward(x)).chunk(2, /*dim=*/1);
    return {stats[0], clamp(stats[1])};
  }
  // Log-probabilities of the kinds from the latent mean, at a learned temperature.
  torch::Tensor classify(const torch::Tensor& mu) {
    torch::Tensor t = torch::nn::functional::softplus(
                          temperature, torch::nn::functional::SoftplusFuncOptions().beta(2.0)) +
                      0.5;
    return torch::log_softmax(classifier(mu) / t, /*dim=*/1);
  }
  torch::nn::Sequential encoder;
  torch::nn::Linear to_stats;
  torch::nn::Hardtanh clamp;
  torch::nn::Sequential decoder;
  torch::nn::Linear classifier;
  torch::Tensor temperature, kl_per_dim;
};
TORCH_MODULE(VAE);

VAE model{nullptr};
std::unique_ptr<torch::optim::Adam> optimizer;
torch::nn::KLDivLoss kind_loss(torch::nn::KLDivLossOptions().reduction(torch::kBatchMean));

}  // namespace

// One step on a batch: returns (reconstruction loss, KL, kind loss).
STEP(torch::Tensor, train_step, torch::Tensor x, torch::Tensor soft_kind) {
  optimizer->zero_grad();
  auto [mu, logvar] = model->encode(x);
  torch::Tensor z = mu + torch::randn_like(mu) * torch::exp(0.5 * logvar);
  torch::Tensor logits = model->decoder->forward(z);
  const double n = static_cast<double>(x.size(0));
  torch::Tensor recon =
      torch::nn::functional::binary_cross_entropy_with_logits(
          logits, x,
          torch::nn::functional::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kSum)) /
      n;
  torch::Tensor kl_dim = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp());  // [N, latent]
  torch::Tensor kl = kl_dim.sum() / n;
  torch::Tensor kind = kind_loss(model->classify(mu), soft_kind);
  (recon + kl + kind).backward();
  optimizer->step();
  {
    torch::NoGradGuard no_grad;
    model->kl_per_dim.mul_(0.9).add_(0.1 * kl_dim.mean(0));
  }
  return torch::stack({recon, kl, kind}).detach();
}

int main() {
  torch::manual_seed(5);
  auto [images, kinds] = make_shapes(kImages);
  auto [test_images, test_kinds] = make_shapes(128);
  // Smoothed labels: 0.9 on the kind, the rest spread over the others.
  torch::Tensor soft =
      torch::nn::functional::one_hot(kinds, kKinds).to(torch::kFloat) * 0.85 + 0.05;
  std::printf("images %lld, ink %.4f, soft labels sum %.4f\n", static_cast<long long>(kImages),
              images.mean().item<float>(), soft.sum().item<float>() / kImages);

  model = VAE();
  int64_t numel = 0;
  for (const auto& p : model->named_parameters()) numel += p.value().numel();
  std::printf("parameters: %lld tensors, %lld numbers; buffers: %lld\n",
              static_cast<long long>(model->parameters().size()), static_cast<long long>(numel),
              static_cast<long long>(model->buffers().size()));
  optimizer =
      std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(2e-3));

  for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
    model->train();
    torch::Tensor sums = torch::zeros({3});
    int64_t batches = 0;
    for (int64_t b = 0; b < kImages; b += kBatch) {
      sums += train_step(images.narrow(0, b, kBatch), soft.narrow(0, b, kBatch));
      ++batches;
    }
    sums /= static_cast<double>(batches);
    std::printf("epoch %lld: reconstruction %.4f, kl %.4f, kind %.4f\n",
                static_cast<long long>(epoch), sums[0].item<float>(), sums[1].item<float>(),
                sums[2].item<float>());
  }

  torch::NoGradGuard no_grad;
  model->eval();
  auto [mu, logvar] = model->encode(test_images);
  torch::Tensor recon = torch::sigmoid(model->decoder->forward(mu));
  torch::Tensor err = (recon - test_images).abs().flatten(1).mean(1);
  std::printf("test reconstruction error %.4f (worst %.4f)\n", err.mean().item<float>(),
              err.max().item<float>());
  torch::Tensor predicted = model->classify(mu).argmax(1);
  std::printf("kind accuracy %.4f\n",
              predicted.eq(test_kinds).to(torch::kFloat).mean().item<float>());
  // Per-kind error: scatter_add of the errors into one slot per kind.
  torch::Tensor per_kind = torch::zeros({kKinds}).scatter_add(0, test_kinds, err);
  torch::Tensor count = torch::zeros({kKinds}).scatter_add(0, test_kinds, torch::ones_like(err));
  torch::Tensor mean_err = per_kind / count;
  std::printf("error per kind: %.4f %.4f %.4f\n", mean_err[0].item<float>(),
              mean_err[1].item<float>(), mean_err[2].item<float>());
  // Active latent units (running KL above 0.05), and the strongest.
  torch::Tensor kl = model->kl_per_dim;
  std::printf("active units %lld of %lld; largest running kl %.4f at %lld\n",
              static_cast<long long>(kl.gt(0.05).sum().item<int64_t>()),
              static_cast<long long>(kLatent), kl.max().item<float>(),
              static_cast<long long>(kl.argmax().item<int64_t>()));
  // Each image's reconstruction at its brightest true pixel.
  torch::Tensor where = test_images.flatten(1).argmax(1, /*keepdim=*/true);
  torch::Tensor at_ink = recon.flatten(1).gather(1, where);
  std::printf("reconstruction at an inked pixel %.4f\n", at_ink.mean().item<float>());
  // Samples from the prior, and a corner of the first sample.
  torch::Tensor samples = torch::sigmoid(model->decoder->forward(torch::randn({16, kLatent})));
  torch::Tensor corner = samples.index({0, Ellipsis, Slice(None, 4), Slice(None, 4)});
  std::printf("samples %lld x %lld x %lld x %lld, ink %.4f, corner %.4f, center row %.4f\n",
              static_cast<long long>(samples.size(0)), static_cast<long long>(samples.size(1)),
              static_cast<long long>(samples.size(2)), static_cast<long long>(samples.size(3)),
              samples.mean().item<float>(), corner.mean().item<float>(),
              samples.index({Slice(), 0, kSide / 2, None}).mean().item<float>());
  // The learned PReLU slopes and the classifier's temperature.
  auto prelu = model->decoder[4]->as<torch::nn::PReLU>();
  std::printf("prelu slopes mean %.4f; temperature %.4f\n", prelu->weight.mean().item<float>(),
              (torch::nn::functional::softplus(
                   model->temperature, torch::nn::functional::SoftplusFuncOptions().beta(2.0)) +
               0.5)
                  .item<float>());
  return 0;
}
