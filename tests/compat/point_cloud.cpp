// A point-cloud classifier written for libtorch's C++ frontend, in the manner
// of DGCNN's edge convolution: each point's k nearest neighbours (cdist and
// topk) are gathered by advanced indexing (a batch index broadcast against the
// neighbour indices), their offsets from the point pass through a small MLP,
// and the largest response over the neighbours, then over the points, feeds a
// linear classifier. The clouds are rings and square outlines in 3-D, tilted
// by rotations built from cross products, drawn with tensor ops. Adam trains
// it; an exponential moving average of the weights is kept with lerp_.
//
// Evaluation under NoGradGuard describes the clouds with libtorch's tensor
// functions: covariances (baddbmm), their traces, diagonals and norms
// (torch::linalg), distance histograms (histc, bucketize, bincount), the far
// points (nonzero, masked_select), voxel indices (floor_divide), medians,
// diff, searchsorted, tensordot, kron, block_diag and rot90.
//
// Every parameter starts from a formula, not a random draw, and the data has
// none either, so the numbers it prints are the same built against libtorch
// (tests/compat/against_libtorch.sh) and against Kiln, to float rounding.
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

using torch::indexing::Slice;

namespace {

const int64_t kClouds = 24;
const int64_t kPoints = 32;
const int64_t kNeighbours = 4;
const int64_t kSteps = 30;

// n clouds [n, kPoints, 3]: even ones rings, odd ones square outlines, each of
// its own size, tilted about an axis made from a cross product.
std::pair<torch::Tensor, torch::Tensor> make_clouds(int64_t n) {
  torch::Tensor c = torch::arange(n, torch::kFloat).view({n, 1});
  torch::Tensor t = torch::arange(kPoints, torch::kFloat).view({1, kPoints}) * (2 * M_PI / kPoints);
  torch::Tensor r = 0.8 + 0.1 * torch::fmod(c, 3.0);
  // A ring, or the square with the same angles (the larger of |cos|, |sin| is 1).
  torch::Tensor cx = torch::cos(t + 0.1 * c), sy = torch::sin(t + 0.1 * c);
  torch::Tensor edge = torch::maximum(cx.abs(), sy.abs());
  torch::Tensor square = torch::fmod(c, 2.0).view({n, 1});
  torch::Tensor scale = torch::lerp(torch::ones_like(edge), 1.0 / edge, square);
  torch::Tensor z = 0.05 * torch::sin(3.0 * t + c);
  torch::Tensor pts = torch::stack({r * cx * scale, r * sy * scale, z.expand({n, kPoints})}, 2);
  // Tilt: rotate about the unit axis a x b by an angle that grows with c.
  torch::Tensor a = torch::stack({torch::ones({n}), 0.1 * c.view({n}), torch::zeros({n})}, 1);
  torch::Tensor b = torch::stack({torch::zeros({n}), torch::ones({n}), torch::cos(c.view({n}))}, 1);
  torch::Tensor axis = torch::cross(a, b, 1);
  axis = axis / torch::linalg::vector_norm(axis, 2, {1}, true, c10::nullopt);
  torch::Tensor angle = (0.3 * c).view({n, 1, 1});
  torch::Tensor k = torch::zeros({n, 3, 3});
  k.index_put_({Slice(), 0, 1}, -axis.index({Slice(), 2}));
  k.index_put_({Slice(), 0, 2}, axis.index({Slice(), 1}));
  k.index_put_({Slice(), 1, 2}, -axis.index({Slice(), 0}));
  k = k - k.transpose(1, 2);
  // Rodrigues: I + sin(angle) K + (1 - cos(angle)) K^2.
  torch::Tensor rot = torch::eye(3).expand({n, 3, 3}) + torch::sin(angle) * k +
                      (1 - torch::cos(angle)) * torch::bmm(k, k);
  torch::Tensor labels = torch::fmod(torch::arange(n), 2);
  return {torch::bmm(pts, rot.transpose(1, 2)), labels};
}

// A linear layer's weights from a formula (no random draw).
void init_linear(torch::nn::Linear& l, double phase) {
  torch::NoGradGuard no_grad;
  torch::Tensor w = l->weight;
  torch::Tensor i = torch::arange(w.numel(), torch::kFloat).view(w.sizes());
  w.copy_(torch::sin(i * 0.7 + phase) / std::sqrt(double(w.size(1))));
  l->bias.copy_(0.01 * torch::cos(torch::arange(l->bias.numel(), torch::kFloat) + phase));
}

struct EdgeNetImpl : torch::nn::Module {
  EdgeNetImpl() : edge1(6, 16), edge2(16, 16), head(16, 2) {
    register_module("edge1", edge1);
    register_module("edge2", edge2);
    register_module("head", head);
    init_linear(edge1, 0.1);
    init_linear(edge2, 0.2);
    init_linear(head, 0.3);
  }
  // pts [B, N, 3], neighbours [B, N, k] -> logits [B, 2].
  torch::Tensor forward(const torch::Tensor& pts, const torch::Tensor& nbr) {
    const int64_t b = pts.size(0);
    torch::Tensor batch = torch::arange(b).view({b, 1, 1});
    torch::Tensor near = pts.index({batch, nbr});                      // [B, N, k, 3]
    torch::Tensor centre = pts.unsqueeze(2).expand_as(near);
    torch::Tensor e = torch::cat({centre, near - centre}, 3);        // [B, N, k, 6]
    e = torch::relu(edge1(e));
    e = torch::relu(edge2(e));
    torch::Tensor per_point = std::get<0>(e.max(2));                 // [B, N, 16]
    return head(std::get<0>(per_point.max(1)));
  }
  torch::nn::Linear edge1, edge2, head;
};
TORCH_MODULE(EdgeNet);

// The k nearest other points of each point, by cdist and topk.
torch::Tensor neighbours(const torch::Tensor& pts) {
  torch::Tensor d = torch::cdist(pts, pts) + 1e3 * torch::eye(pts.size(1));
  return std::get<1>(d.topk(kNeighbours, -1, false));
}

void describe(const torch::Tensor& pts) {
  const int64_t n = pts.size(0);
  torch::Tensor centred = pts - pts.mean(1, true);
  torch::Tensor cov = torch::baddbmm(torch::zeros({n, 3, 3}), centred.transpose(1, 2), centred, 0.0,
                                     1.0 / (kPoints - 1));
  torch::Tensor tr = torch::stack({torch::trace(cov[0]), torch::trace(cov[1])});
  std::printf("trace %.5f %.5f\n", tr[0].item<float>(), tr[1].item<float>());
  std::printf("diag %.5f %.5f %.5f\n", torch::diag(cov[1])[0].item<float>(),
              torch::diag(cov[1])[1].item<float>(), torch::diag(cov[1])[2].item<float>());
  std::printf("fro %.5f inf %.5f\n",
              torch::linalg::norm(cov[2], "fro", c10::nullopt, false, c10::nullopt).item<float>(),
              torch::linalg::matrix_norm(cov[2], INFINITY, {-2, -1}, false, c10::nullopt).item<float>());
  torch::Tensor radius = torch::linalg::vector_norm(centred, 2, {2}, false, c10::nullopt);  // [n, N]
  torch::Tensor hist = torch::histc(radius, 6, 0.55, 1.15);
  std::printf("histc");
  for (int64_t i = 0; i < 6; ++i) std::printf(" %.0f", hist[i].item<float>());
  std::printf("\n");
  torch::Tensor edges = torch::linspace(0.75, 1.15, 5);
  torch::Tensor bucket = torch::bucketize(radius.flatten(), edges);
  torch::Tensor counts = torch::bincount(bucket, {}, 6);
  std::printf("bincount");
  for (int64_t i = 0; i < counts.size(0); ++i) std::printf(" %ld", (long)counts[i].item<int64_t>());
  std::printf("\n");
  torch::Tensor far = radius > 1.05;
  std::printf("far %ld mean %.5f\n", (long)torch::nonzero(far).size(0),
              torch::masked_select(radius, far).mean().item<float>());
  torch::Tensor voxels = torch::floor_divide(pts + 2.03, 0.5).to(torch::kLong);
  std::printf("voxel sum %ld\n", (long)voxels.sum().item<int64_t>());
  torch::Tensor med = std::get<0>(torch::median(radius, 1));
  std::printf("median %.5f %.5f\n", med[0].item<float>(), med[1].item<float>());
  torch::Tensor sorted = std::get<0>(radius[1].sort());
  std::printf("diff max %.5f\n", torch::diff(sorted).max().item<float>());
  torch::Tensor pos = torch::searchsorted(sorted, torch::tensor({1.0f, 1.2f}));
  std::printf("searchsorted %ld %ld\n", (long)pos[0].item<int64_t>(), (long)pos[1].item<int64_t>());
  torch::Tensor moment = torch::tensordot(centred, centred, {0, 1}, {0, 1}) / double(n * kPoints);
  std::printf("moment %.5f %.5f\n", moment[0][0].item<float>(), moment[2][2].item<float>());
  torch::Tensor blocks = torch::block_diag({cov[0].index({Slice(0, 2), Slice(0, 2)}), torch::kron(torch::eye(2), cov[1][2][2].view({1, 1}))});
  std::printf("block_diag %.5f\n", blocks.abs().sum().item<float>());
  torch::Tensor grid = torch::arange(6, torch::kFloat).view({2, 3});
  std::printf("rot90 %.0f\n", (torch::rot90(grid, 1, {0, 1}) * torch::arange(6, torch::kFloat).view({3, 2})).sum().item<float>());
  auto [lo, hi] = torch::aminmax(radius);
  std::printf("aminmax %.5f %.5f\n", lo.item<float>(), hi.item<float>());
}

EdgeNet net{nullptr};
std::unique_ptr<torch::optim::Adam> opt;

STEP(torch::Tensor, train_step, torch::Tensor x, torch::Tensor idx, torch::Tensor y) {
  opt->zero_grad();
  torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x, idx), y);
  loss.backward();
  opt->step();
  return loss;
}

}  // namespace

int main() {
  auto [clouds, labels] = make_clouds(kClouds);
  auto [test_clouds, test_labels] = make_clouds(2 * kClouds);
  test_clouds = test_clouds.index({Slice(kClouds)});
  test_labels = test_labels.index({Slice(kClouds)});
  torch::Tensor nbr = neighbours(clouds);
  torch::Tensor test_nbr = neighbours(test_clouds);

  net = EdgeNet();
  opt = std::make_unique<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(0.01));
  std::vector<torch::Tensor> ema;
  for (const auto& p : net->parameters()) ema.push_back(p.detach().clone());

  for (int64_t s = 0; s < kSteps; ++s) {
    torch::Tensor loss = train_step(clouds, nbr, labels);
    {
      torch::NoGradGuard no_grad;
      auto params = net->parameters();
      for (size_t i = 0; i < params.size(); ++i) ema[i].lerp_(params[i], 0.1);
    }
    if (s % 10 == 0 || s == kSteps - 1) std::printf("step %ld loss %.5f\n", (long)s, loss.item<float>());
  }
  torch::NoGradGuard no_grad;
  torch::Tensor pred = net->forward(test_clouds, test_nbr).argmax(1);
  std::printf("test accuracy %.4f\n", pred.eq(test_labels).to(torch::kFloat).mean().item<float>());
  double drift = 0;
  auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i) drift += (params[i] - ema[i]).abs().sum().item<float>();
  std::printf("ema drift %.5f\n", drift);
  describe(clouds);
  return 0;
}
