// The libtorch spelling probe: 136 one-line uses of libtorch's C++ API, each
// compiled and run through <torch/torch.h> alone. It prints how many ran;
// the test wants all of them. against_libtorch.sh builds the same file
// against real libtorch, proving every line is libtorch's own spelling.
#include <torch/torch.h>

#include <cstdio>
#include <sstream>
#include <tuple>
#include <vector>

static int ran = 0;
#define S(...)   \
  do {           \
    __VA_ARGS__; \
    ++ran;       \
  } while (0)

struct ProbeImpl : torch::nn::Module {
  ProbeImpl() : fc(register_module("fc", torch::nn::Linear(3, 2))) {
    register_parameter("scale", torch::ones({1}));
    register_buffer("count", torch::zeros({1}));
  }
  torch::Tensor forward(torch::Tensor x) { return fc(x) * named_parameters()["scale"]; }
  torch::nn::Linear fc;
};
TORCH_MODULE(Probe);

struct Twice : torch::autograd::Function<Twice> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, double k) {
    ctx->saved_data["k"] = k;
    return x * k;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list g) {
    return {g[0] * ctx->saved_data["k"].toDouble(), torch::Tensor()};
  }
};

int main() {
  namespace F = torch::nn::functional;
  torch::manual_seed(0);
  auto x = torch::randn({4, 3});
  auto img = torch::randn({2, 3, 8, 8});
  auto idx = torch::tensor({0, 2, 1, 1});
  torch::Tensor t;
  // creation (16)
  S(t = torch::zeros({2, 3}));
  S(t = torch::ones(5));
  S(t = torch::empty(3, torch::kCPU));
  S(t = torch::full({2}, 7));
  S(t = torch::rand({2, 2}));
  S(t = torch::randn({2, 2}, torch::requires_grad()));
  S(t = torch::randint(10, {3}));
  S(t = torch::randperm(5));
  S(t = torch::arange(0, 10, 2));
  S(t = torch::linspace(0, 1, 5));
  S(t = torch::eye(3));
  S(t = torch::tensor({1.0, 2.0}, torch::kFloat64));
  S(t = torch::tensor(std::vector<float>{1, 2, 3}));
  S(t = torch::zeros_like(x));
  S(t = torch::ones({2}, torch::TensorOptions().dtype(torch::kInt64).device(torch::kCPU)));
  S(t = torch::from_blob(std::vector<float>{1, 2}.data(), {2}, torch::kFloat).clone());
  // tensor methods (30)
  S(t = x.reshape({-1}));
  S(t = x.view({3, 4}));
  S(t = x.t().contiguous());
  S(t = x.transpose(0, 1));
  S(t = x.permute({1, 0}));
  S(t = x.unsqueeze(0).squeeze(0));
  S(t = x.flatten());
  S(t = x.narrow(0, 1, 2));
  S(t = x.select(1, 0));
  S(t = x.index_select(0, idx));
  S(t = x.index({torch::indexing::Slice(1, torch::indexing::None), 0}));
  S(t = x.sum(1, /*keepdim=*/true));
  S(t = x.mean());
  S(t = std::get<0>(x.max(1)));
  S(t = x.argmax(1));
  S(t = x.norm(2, 1));
  S(t = x.pow(2));
  S(t = x.clamp(-1, 1));
  S(t = x.abs().sqrt().exp().log());
  S(t = x.to(torch::kFloat64));
  S(t = x.to(torch::kCPU));
  S(t = x.detach().clone());
  S((void)x[0][0].item<float>());
  S((void)x.sizes());
  S((void)x.size(0));
  S((void)x.dim());
  S((void)x.numel());
  S((void)x.dtype());
  S((void)x.is_contiguous());
  S(t = x.masked_fill(x > 0, 0.0));
  // in place and data (10)
  S(t = torch::empty({4}).uniform_(0.8, 1.0));
  S(t = torch::empty({4}).normal_(0, 1));
  S(t = torch::zeros(3).fill_(1));
  S(t = torch::ones(3).zero_());
  S(t = torch::ones(3).mul_(2).add_(1));
  S(t = torch::ones(3).eq_(torch::ones(3)));
  S(t = torch::ones(3); t.data() = t.data() / 2);
  S(t = torch::ones({2, 2}); t[0] = 5);
  S((void)torch::tensor({2.5}).item().toFloat());
  S((void)torch::tensor({3}).item().to<int64_t>());
  // free functions (22)
  S(t = torch::relu(x));
  S(t = torch::sigmoid(x));
  S(t = torch::tanh(x));
  S(t = torch::softmax(x, 1));
  S(t = torch::log_softmax(x, /*dim=*/1));
  S(t = torch::dropout(x, 0.5, /*train=*/true));
  S(t = torch::pow(x, 2));
  S(t = torch::sum(x));
  S(t = torch::mean(x, {0}));
  S(t = torch::reshape(x, {12}));
  S(t = torch::cat({x, x}, 0));
  S(t = torch::stack({x, x}));
  S(t = torch::matmul(x, x.t()));
  S(t = torch::mm(x, x.t()));
  S(t = torch::max_pool2d(img, 2));
  S(t = torch::avg_pool2d(img, {2, 2}));
  S(t = torch::where(x > 0, x, torch::zeros_like(x)));
  S(t = torch::outer(torch::ones(2), torch::ones(3)));
  S(t = torch::einsum("ij,kj->ik", {x, x}));
  S((void)torch::allclose(x, x));
  S(t = torch::nll_loss(torch::log_softmax(x, 1), idx, {}, torch::Reduction::Sum));
  S(t = torch::binary_cross_entropy(torch::sigmoid(x), torch::ones_like(x)));
  // losses and functional (10)
  S(t = torch::smooth_l1_loss(x, torch::zeros_like(x)));
  S(t = torch::huber_loss(x, torch::zeros_like(x), torch::Reduction::Mean, 0.5));
  S(t = torch::nn::HuberLoss(torch::nn::HuberLossOptions().delta(2.0))(x, torch::zeros_like(x)));
  S(t = torch::mse_loss(x, torch::zeros_like(x)));
  S(t = F::relu(x, F::ReLUFuncOptions().inplace(false)));
  S(t = F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.2)));
  S(t = F::layer_norm(x, F::LayerNormFuncOptions({3}).eps(1e-5)));
  S(t = F::dropout(x, F::DropoutFuncOptions().p(0.2).training(false)));
  S(t = F::cross_entropy(x, idx));
  S(t = F::nll_loss(torch::log_softmax(x, 1), idx,
                    F::NLLLossFuncOptions().reduction(torch::kMean)));
  S(t = F::softmax(x, F::SoftmaxFuncOptions(1)));
  S(t = F::conv2d(img, torch::randn({4, 3, 3, 3}), F::Conv2dFuncOptions().padding(1)));
  // modules (22)
  Probe probe;
  S(t = probe(x));
  S(t = probe->forward(x));
  S((void)probe->named_parameters()["fc.weight"]);
  S(for (auto& p : probe->named_parameters())(void) p.key(), (void)p.value());
  S((void)probe->parameters().size());
  S((void)probe->named_buffers().size());
  S(probe->train());
  S(probe->eval());
  S((void)probe->is_training());
  S(probe->to(torch::kCPU));
  S(probe->to(torch::kFloat32));
  S(probe->zero_grad());
  S(torch::nn::Sequential seq(torch::nn::Linear(3, 4), torch::nn::Functional(torch::relu),
                              torch::nn::Linear(4, 1));
    t = seq->forward(x));
  S(torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 4, 3).stride(1).padding(1)); t = conv(img));
  S(torch::nn::ConvTranspose2d ct(torch::nn::ConvTranspose2dOptions(3, 2, 4).stride(2).padding(1));
    t = ct(img));
  S(torch::nn::BatchNorm2d bn(3); t = bn(img));
  S(torch::nn::BatchNorm1d bn1(torch::nn::BatchNorm1dOptions(3).momentum(0.2)); t = bn1(x));
  S(torch::nn::Dropout2d d2(torch::nn::Dropout2dOptions(0.3)); t = d2(img));
  S(torch::nn::LeakyReLU lr(torch::nn::LeakyReLUOptions().negative_slope(0.2)); t = lr(x));
  S(torch::nn::Functional f(torch::leaky_relu, 0.2); t = f(x));
  S(torch::nn::AdaptiveLogSoftmaxWithLoss asm_(
        torch::nn::AdaptiveLogSoftmaxWithLossOptions(16, 10, {4, 8}).div_value(2.).head_bias(true));
    t = asm_(torch::randn({4, 16}), torch::tensor({0, 5, 9, 3}, torch::kLong)).output);
  S(torch::nn::AdaptiveLogSoftmaxWithLoss asm_(
        torch::nn::AdaptiveLogSoftmaxWithLossOptions(16, 10, {4, 8}));
    auto h = torch::randn({4, 16}); t = asm_->log_prob(h) + asm_->predict(h).unsqueeze(1));
  // optim, autograd, data, serialize, misc (9)
  S(torch::optim::Adam adam(probe->parameters(),
                            torch::optim::AdamOptions(1e-3).betas(std::make_tuple(0.5, 0.999)));
    adam.zero_grad());
  S(torch::optim::SGD sgd(probe->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    sgd.step());
  S(auto a = torch::ones({2}, torch::requires_grad()); Twice::apply(a, 2.0).sum().backward());
  S(auto a = torch::ones({2}, torch::requires_grad());
    (void)torch::autograd::grad({(a * a).sum()}, {a}));
  S({ torch::NoGradGuard no_grad; });
  S(std::stringstream ss; torch::save(x, ss); torch::Tensor y; torch::load(y, ss));
  S((void)torch::cuda::is_available());
  S(std::ostringstream os; os << x.device(); TORCH_CHECK(os.str() == "cpu", os.str()));
  S((void)torch::str("a", 1, "b"));
  // sizes, devices, sampling, pretrained tables, frozen parameters (15)
  S((void)x.sizes().vec());
  S((void)x.strides().vec());
  S((void)x.stride(0));
  S(torch::Device dev("cpu"); t = x.to(dev));
  S(t = x.to(torch::Device("cpu")));
  S(t = torch::eye(2, 3));
  S(t = torch::logspace(0, 2, 3));
  S(t = torch::hardswish(x));
  S(t = torch::hardsigmoid(x));
  S(t = torch::empty({4}, torch::kLong).random_(0, 5));
  S(t = torch::softmax(x, 1).multinomial(2));
  S(t = torch::multinomial(torch::ones({4}), 8, true));
  S(auto e = torch::nn::Embedding::from_pretrained(torch::randn({5, 3}));
    t = e(torch::tensor({1, 2}, torch::kLong)));
  S(torch::nn::BatchNorm1d bn(torch::nn::BatchNorm1dOptions(3).momentum(c10::nullopt));
    t = bn(x) + bn->num_batches_tracked);
  S(torch::optim::SGD frozen({torch::ones({2})}, torch::optim::SGDOptions(0.1)); frozen.step());
  std::printf("%d/136 spellings\n", ran);
  return ran == 136 ? 0 : 1;
}
