// Metric learning with a gradient-penalty critic, written for libtorch's C++
// frontend. An embedding network (Linear, LayerNorm, GELU, Linear) maps 8-D
// points of three classes onto the unit sphere through a custom autograd
// Function (L2 normalisation with a hand-written backward, as the "Extending
// autograd" tutorial writes one), trained with TripletMarginLoss on triplets
// picked by formula. A critic learns to tell the embedded points of class 0
// from those of class 1, WGAN-GP style: the penalty on the critic's gradient
// at points between the two (torch::autograd::grad with create_graph, then
// backward through it) keeps it 1-Lipschitz. RMSprop (centered, momentum)
// trains the critic; Adam the embedding.
//
// Evaluation under NoGradGuard: the custom Function's gradient against
// functional::normalize's, cosine similarities (CosineSimilarity) and pairwise
// distances (PairwiseDistance) between class centres, nearest-centre accuracy,
// and the critic's scores per class.
//
// Every parameter starts from a formula, not a random draw, and the data has
// none either, so the numbers it prints are the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding.
// Built against Kiln, the training steps are traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <tuple>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using torch::indexing::Slice;
namespace F = torch::nn::functional;

namespace {

const int64_t kPerClass = 12;
const int64_t kClasses = 3;
const int64_t kSteps = 20;
const double kPenalty = 10.0;

// x / |x| along dim 1, with its gradient written out:
// d(x/|x|) = (g - y (g . y)) / |x|.
class L2Normalize : public torch::autograd::Function<L2Normalize> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x) {
    torch::Tensor norm = x.norm(2, {1}, /*keepdim=*/true).clamp_min(1e-12);
    torch::Tensor y = x / norm;
    ctx->save_for_backward({y, norm});
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor y = saved[0], norm = saved[1], g = grad_outputs[0];
    return {(g - y * (g * y).sum(1, true)) / norm};
  }
};

// Three classes of 8-D points: each a direction of its own, bent by sines of
// the point's index.
std::pair<torch::Tensor, torch::Tensor> make_points() {
  const int64_t n = kPerClass * kClasses;
  torch::Tensor i = torch::arange(n, torch::kFloat).view({n, 1});
  torch::Tensor d = torch::arange(8, torch::kFloat).view({1, 8});
  torch::Tensor label = torch::fmod(torch::arange(n), kClasses);
  torch::Tensor c = label.to(torch::kFloat).view({n, 1});
  torch::Tensor x = torch::cos(d * (0.9 + 0.6 * c) + c) + 0.3 * torch::sin(0.37 * i * (d + 1.0));
  return {x, label};
}

struct EmbedderImpl : torch::nn::Module {
  EmbedderImpl()
      : fc1(8, 16),
        norm(torch::nn::LayerNormOptions({16}).eps(1e-5)),
        fc2(16, 4) {
    register_module("fc1", fc1);
    register_module("norm", norm);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor h = F::gelu(norm(fc1(x)));
    return L2Normalize::apply(fc2(h));
  }
  torch::nn::Linear fc1;
  torch::nn::LayerNorm norm;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Embedder);

void deterministic_init(torch::nn::Module& m, double phase) {
  torch::NoGradGuard no_grad;
  for (auto& named : m.named_parameters()) {
    torch::Tensor& p = named.value();
    phase += 0.5;
    torch::Tensor wave = torch::cos(torch::arange(p.numel(), torch::kFloat) * 2.1 + phase).view(p.sizes());
    if (p.dim() == 1)
      p.copy_(named.key().find("norm.weight") != std::string::npos ? 1.0 + 0.1 * wave : 0.05 * wave);
    else
      p.copy_(wave / std::sqrt(static_cast<double>(p.size(1))));
  }
}

Embedder embedder{nullptr};
torch::nn::Sequential critic{nullptr};
std::unique_ptr<torch::optim::Adam> embed_optimizer;
std::unique_ptr<torch::optim::RMSprop> critic_optimizer;
torch::nn::TripletMarginLoss triplet_loss{nullptr};

STEP(torch::Tensor, metric_step, torch::Tensor anchor, torch::Tensor positive, torch::Tensor negative) {
  embed_optimizer->zero_grad();
  torch::Tensor loss = triplet_loss(embedder(anchor), embedder(positive), embedder(negative));
  loss.backward();
  embed_optimizer->step();
  return loss;
}

// The critic's gradient norms at points between real and fake, and its
// penalty ((|grad| - 1)^2, averaged).
std::pair<torch::Tensor, torch::Tensor> gradient_penalty(const torch::Tensor& real, const torch::Tensor& fake,
                                                         const torch::Tensor& alpha) {
  torch::Tensor between = (alpha * real + (1 - alpha) * fake).requires_grad_(true);
  torch::Tensor score = critic->forward(between);
  torch::Tensor grad = torch::autograd::grad({score}, {between}, {torch::ones_like(score)},
                                             /*retain_graph=*/true, /*create_graph=*/true)[0];
  torch::Tensor norms = grad.norm(2, {1});
  return {norms, (norms - 1).pow(2).mean()};
}

STEP(std::vector<torch::Tensor>, critic_step, torch::Tensor real, torch::Tensor fake, torch::Tensor alpha) {
  critic_optimizer->zero_grad();
  auto [norms, penalty] = gradient_penalty(real, fake, alpha);
  torch::Tensor wasserstein = critic->forward(fake).mean() - critic->forward(real).mean();
  torch::Tensor loss = wasserstein + kPenalty * penalty;
  loss.backward();
  critic_optimizer->step();
  return {loss, wasserstein, penalty};
}

}  // namespace

int main() {
  auto [points, labels] = make_points();
  std::cout << "points " << points.sizes() << ", classes " << labels.max().item<int64_t>() + 1
            << std::endl;

  embedder = Embedder();
  deterministic_init(*embedder, 0.0);
  critic = torch::nn::Sequential(torch::nn::Linear(4, 12), torch::nn::Tanh(), torch::nn::Linear(12, 1));
  deterministic_init(*critic, 3.0);
  embed_optimizer = std::make_unique<torch::optim::Adam>(embedder->parameters(), torch::optim::AdamOptions(0.01));
  critic_optimizer = std::make_unique<torch::optim::RMSprop>(
      critic->parameters(), torch::optim::RMSpropOptions(0.005).alpha(0.9).momentum(0.5).centered(true));
  triplet_loss = torch::nn::TripletMarginLoss(torch::nn::TripletMarginLossOptions().margin(1.0).p(2.0).swap(true));

  // Triplets by formula: the anchor's positive is the next point of its class,
  // its negative a point of the next class.
  const int64_t n = points.size(0);
  torch::Tensor idx = torch::arange(n);
  torch::Tensor positive_idx = torch::fmod(idx + kClasses, n);
  torch::Tensor negative_idx = torch::fmod(idx + 1 + kClasses * torch::fmod(idx, 4), n);
  std::printf("negatives of another class: %ld of %ld\n",
              static_cast<long>(labels.index({negative_idx}).ne(labels).sum().item<int64_t>()), static_cast<long>(n));

  torch::Tensor class0 = points.index({labels == 0}), class1 = points.index({labels == 1});
  torch::Tensor alpha = (0.5 + 0.45 * torch::sin(torch::arange(kPerClass, torch::kFloat) * 1.7)).view({kPerClass, 1});

  for (int64_t step = 0; step < kSteps; ++step) {
    torch::Tensor loss = metric_step(points, points.index({positive_idx}), points.index({negative_idx}));
    torch::Tensor real, fake;
    {
      torch::NoGradGuard no_grad;
      real = embedder(class0);
      fake = embedder(class1);
    }
    std::vector<torch::Tensor> critic_out = critic_step(real, fake, alpha);
    if (step % 4 == 3)
      std::printf("step %2ld triplet %.5f critic %.5f wasserstein %.5f penalty %.5f\n", static_cast<long>(step),
                  loss.item<float>(), critic_out[0].item<float>(), critic_out[1].item<float>(),
                  critic_out[2].item<float>());
  }

  // The custom Function's gradient against functional::normalize's.
  torch::Tensor probe = (points.index({Slice(0, 5)}) * 0.7 + 0.1).requires_grad_(true);
  torch::Tensor weights = torch::cos(torch::arange(40, torch::kFloat)).view({5, 8});
  (L2Normalize::apply(probe) * weights).sum().backward();
  torch::Tensor custom_grad = probe.grad().clone();
  probe.grad().zero_();
  (F::normalize(probe, F::NormalizeFuncOptions().p(2).dim(1)) * weights).sum().backward();
  std::printf("custom Function gradient vs normalize: largest difference %.2g\n",
              (custom_grad - probe.grad()).abs().max().item<float>());

  torch::NoGradGuard no_grad;
  torch::Tensor z = embedder(points);
  std::vector<torch::Tensor> centres;
  for (int64_t c = 0; c < kClasses; ++c) centres.push_back(z.index({labels == c}).mean(0));
  torch::Tensor centre = torch::stack(centres);
  torch::nn::CosineSimilarity cosine(torch::nn::CosineSimilarityOptions().dim(1));
  torch::nn::PairwiseDistance distance(torch::nn::PairwiseDistanceOptions().p(2.0));
  torch::Tensor rolled = centre.roll(1, 0);
  torch::Tensor cos = cosine(centre, rolled), dist = distance(centre, rolled);
  for (int64_t c = 0; c < kClasses; ++c)
    std::printf("centres %ld-%ld: cosine %.5f distance %.5f\n", static_cast<long>(c),
                static_cast<long>((c + kClasses - 1) % kClasses), cos[c].item<float>(), dist[c].item<float>());
  torch::Tensor nearest = torch::cdist(z, centre).argmin(1);
  std::printf("nearest-centre accuracy %.4f\n", nearest.eq(labels).to(torch::kFloat).mean().item<float>());
  torch::Tensor spread = (z - centre.index({labels})).norm(2, {1});
  std::printf("spread: mean %.5f max %.5f\n", spread.mean().item<float>(), spread.max().item<float>());
  std::printf("unit norms: %s\n", torch::allclose(z.norm(2, {1}), torch::ones({n}), 1e-5, 1e-6) ? "yes" : "no");
  torch::Tensor scores = critic->forward(z);
  std::printf("critic: class 0 %.5f class 1 %.5f class 2 %.5f\n", scores.index({labels == 0}).mean().item<float>(),
              scores.index({labels == 1}).mean().item<float>(), scores.index({labels == 2}).mean().item<float>());
  return 0;
}
