// Data-parallel training of an MLP, traced: run it alone (a world of one) or
//   mpirun -np 2 build/examples/ddp_mlp
// With backend nccl (chosen by itself under mpirun when each rank has a GPU)
// each rank trains on its GPU and the gradients travel over NCCL.
// Each rank takes its share of the data (DistributedSampler), the whole
// training step is one compiled plan per rank, and DistributedDataParallel
// averages the gradients inside it, bucket by bucket, overlapping the backward.
// The task: 10 classes given by a fixed random teacher network on 32 features.
// (The digits data set of issue 11 has not landed; this is its stand-in.)
#include <chrono>
#include <cstdio>

#include <kiln/kiln.h>

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

// The rows of x at `rows` (host gather; x is small).
Tensor take_rows(const Tensor& x, const std::vector<int64_t>& rows) {
  const int64_t width = x.numel() / x.size(0);
  std::vector<double> all = x.to(kDouble).to_vector<double>(), out;
  for (int64_t r : rows) out.insert(out.end(), all.begin() + r * width, all.begin() + (r + 1) * width);
  Shape shape = x.sizes();
  shape[0] = static_cast<int64_t>(rows.size());
  return from_vector(out, shape, TensorOptions(x.dtype()));
}

}  // namespace

int main() {
  dist::init();
  const int rank = dist::rank(), world = dist::world_size();
  const Device dev = dist::device() >= 0 ? Device(kCUDA, dist::device()) : Device(kCPU);
  // The same data on every rank (same seed); each keeps its share.
  manual_seed(42);
  const int64_t n = 4096, features = 32, classes = 10;
  Tensor teacher = randn({features, classes});
  Tensor x_all = randn({n, features});
  Tensor y_all = x_all.matmul(teacher).argmax(1);
  dist::DistributedSampler sampler(n, /*shuffle=*/true, /*seed=*/7);
  std::vector<int64_t> mine = sampler.indices();
  Tensor x = take_rows(x_all, mine).to(dev), y = take_rows(y_all, mine).to(dev);

  manual_seed(0);
  nn::Sequential model(nn::Linear(features, 128), nn::ReLU(), nn::Linear(128, classes));
  model->to(dev);
  dist::DistributedDataParallel ddp(model);  // rank 0's weights everywhere
  optim::Adam opt(model->parameters(), 3e-3);
  auto step = jit([&](Tensor xb, Tensor yb) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(xb), yb);
    loss.backward();  // gradients averaged over the ranks here
    opt.step();
    return loss;
  }, "ddp_step");

  const int64_t batch = 256 / world;  // a global batch of 256
  const int64_t batches = x.size(0) / batch;
  if (rank == 0)
    std::printf("ddp_mlp: %d rank%s (%s, %s), %lld examples each, global batch 256\n", world,
                world > 1 ? "s" : "", dist::backend().c_str(), dev.str().c_str(),
                static_cast<long long>(x.size(0)));
  auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < 8; ++epoch) {
    double total = 0;
    for (int64_t b = 0; b < batches; ++b) {
      Tensor l = step(x.narrow(0, b * batch, batch).contiguous(), y.narrow(0, b * batch, batch).contiguous());
      dist::all_reduce(l, ReduceOp::avg);
      total += l.item<double>();
    }
    if (rank == 0) std::printf("epoch %d  loss %.4f\n", epoch, total / static_cast<double>(batches));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Accuracy on the whole set, each rank counting its share.
  Tensor correct;
  {
    NoGradGuard no_grad;
    correct = (model(x).argmax(1) == y).to(kFloat).sum();
  }
  dist::all_reduce(correct);
  if (rank == 0)
    std::printf("accuracy %.1f%% over %lld examples; %.1f ms per epoch\n",
                100.0 * correct.item<double>() / static_cast<double>(sampler.size() * world),
                static_cast<long long>(sampler.size() * world), ms / 8);
  return 0;
}
