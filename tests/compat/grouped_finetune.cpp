// Fine-tuning written for libtorch's C++ frontend: a backbone and a head
// pretrained together on synthetic four-class points, saved with torch::save,
// loaded into a new model, then fine-tuned with two optimizer parameter groups
// (the backbone at a small rate with options of its own, the head with the
// optimizer's momentum), a warm-up schedule of one's own (a
// torch::optim::LRScheduler subclass) followed by StepLR, gradient clipping,
// label-smoothed targets made with scatter_, a checkpoint of model and
// optimizer mid-way that a second optimizer resumes (its rates and state), and a
// per-class report with scatter_add and index_put_.
// It builds unchanged against libtorch (tests/compat/against_libtorch.sh).
// Built against Kiln, the training step is traced (KILN_TRACE) unless KILN_JIT=0.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

namespace {

const int64_t kClasses = 4;
const int64_t kPoints = 256;
const double kSmoothing = 0.1;

struct NetImpl : torch::nn::Module {
  NetImpl() {
    backbone = register_module(
        "backbone", torch::nn::Sequential(torch::nn::Linear(2, 32), torch::nn::Tanh(),
                                          torch::nn::Linear(32, 32), torch::nn::Tanh()));
    head = register_module("head", torch::nn::Linear(32, kClasses));
  }
  torch::Tensor forward(torch::Tensor x) { return head->forward(backbone->forward(x)); }
  torch::nn::Sequential backbone{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Net);

// Points around four centres; the label is the centre's index.
std::pair<torch::Tensor, torch::Tensor> make_points(int64_t n) {
  torch::Tensor labels = torch::randint(0, kClasses, {n}, torch::kLong);
  torch::Tensor angle = labels.to(torch::kFloat) * (3.14159265 / 2);
  torch::Tensor centres = torch::stack({torch::cos(angle), torch::sin(angle)}, 1);
  return {centres + 0.45 * torch::randn({n, 2}), labels};
}

// Smoothed one-hot targets: 1 - smoothing at the label, smoothing spread over the rest.
torch::Tensor smoothed_targets(const torch::Tensor& labels) {
  torch::Tensor t = torch::full({labels.size(0), kClasses}, kSmoothing / (kClasses - 1));
  t.scatter_(1, labels.unsqueeze(1), 1.0 - kSmoothing);
  return t;
}

// A linear warm-up over `steps` scheduler steps to the rates the groups started with.
class WarmupLR : public torch::optim::LRScheduler {
 public:
  WarmupLR(torch::optim::Optimizer& optimizer, unsigned steps)
      : torch::optim::LRScheduler(optimizer), steps_(steps) {
    for (auto& group : optimizer.param_groups()) {
      targets_.push_back(group.options().get_lr());
      group.options().set_lr(group.options().get_lr() / (steps + 1));
    }
  }

 private:
  std::vector<double> get_lrs() override {
    std::vector<double> lrs;
    for (double target : targets_)
      lrs.push_back(target * std::min<double>(step_count_ + 2, steps_ + 1) / (steps_ + 1));
    return lrs;
  }
  unsigned steps_;
  std::vector<double> targets_;
};

Net model{nullptr};
std::unique_ptr<torch::optim::SGD> optimizer;

}  // namespace

// One optimisation step on a batch; returns the loss.
STEP(torch::Tensor, train_step, torch::Tensor x, torch::Tensor targets) {
  optimizer->zero_grad();
  torch::Tensor logp = torch::log_softmax(model->forward(x), 1);
  torch::Tensor loss = -(targets * logp).sum(1).mean();
  loss.backward();
  torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
  optimizer->step();
  return loss.detach();
}

std::unique_ptr<torch::optim::SGD> make_optimizer(Net& net) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(net->backbone->parameters(),
                      std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.02)));
  groups.emplace_back(net->head->parameters());
  return std::make_unique<torch::optim::SGD>(groups,
                                             torch::optim::SGDOptions(0.2).momentum(0.9));
}

double accuracy(Net& net, const torch::Tensor& x, const torch::Tensor& labels) {
  torch::NoGradGuard no_grad;
  return net->forward(x).argmax(1).eq(labels).to(torch::kFloat).mean().item<double>();
}

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  torch::manual_seed(11);
  auto [x, labels] = make_points(kPoints);
  auto [x_val, labels_val] = make_points(128);
  torch::Tensor targets = smoothed_targets(labels);
  std::printf("targets row 0: %.4f %.4f %.4f %.4f\n", targets[0][0].item<double>(),
              targets[0][1].item<double>(), targets[0][2].item<double>(),
              targets[0][3].item<double>());

  // Pretraining: one group, every parameter at 0.1.
  model = Net();
  optimizer = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                  torch::optim::SGDOptions(0.1).momentum(0.5));
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    for (int64_t b = 0; b < kPoints; b += 64)
      total += train_step(x.slice(0, b, b + 64), targets.slice(0, b, b + 64)).item<double>();
    std::printf("pretrain epoch %d loss %.5f\n", epoch, total / (kPoints / 64));
  }
  torch::save(model, dir + "/grouped_finetune_pretrained.pt");

  // Fine-tuning: a new model loaded from the file, two groups.
  Net pretrained = model;
  model = Net();
  torch::load(model, dir + "/grouped_finetune_pretrained.pt");
  std::printf("loaded: head weights equal %d\n",
              static_cast<int>(torch::equal(model->head->weight, pretrained->head->weight)));
  optimizer = make_optimizer(model);
  for (size_t g = 0; g < optimizer->param_groups().size(); ++g) {
    auto& options = static_cast<torch::optim::SGDOptions&>(optimizer->param_groups()[g].options());
    std::printf("group %zu: %zu tensors, lr %.3f, momentum %.2f\n", g,
                optimizer->param_groups()[g].params().size(), options.lr(), options.momentum());
  }
  WarmupLR warmup(*optimizer, 2);
  torch::optim::StepLR decay(*optimizer, 2, 0.5);
  for (int epoch = 0; epoch < 8; ++epoch) {
    double total = 0;
    for (int64_t b = 0; b < kPoints; b += 32)
      total += train_step(x.slice(0, b, b + 32), targets.slice(0, b, b + 32)).item<double>();
    std::printf("epoch %d loss %.5f lr %.5f %.5f val %.4f\n", epoch, total / (kPoints / 32),
                optimizer->param_groups()[0].options().get_lr(),
                optimizer->param_groups()[1].options().get_lr(),
                accuracy(model, x_val, labels_val));
    if (epoch < 2)
      warmup.step();
    else
      decay.step();
    if (epoch == 4) {  // a checkpoint: model and optimizer (its state; loading keeps the rates)
      torch::save(model, dir + "/grouped_finetune_model.pt");
      torch::save(*optimizer, dir + "/grouped_finetune_optimizer.pt");
    }
  }

  // Resume from the checkpoint into a fresh model and optimizer.
  Net resumed;
  torch::load(resumed, dir + "/grouped_finetune_model.pt");
  auto resumed_optimizer = make_optimizer(resumed);
  torch::load(*resumed_optimizer, dir + "/grouped_finetune_optimizer.pt");
  std::printf("resumed rates %.5f %.5f\n", resumed_optimizer->param_groups()[0].options().get_lr(),
              resumed_optimizer->param_groups()[1].options().get_lr());

  // Per-class counts (scatter_add) and the correct ones marked by index_put_.
  torch::NoGradGuard no_grad;
  torch::Tensor predicted = model->forward(x_val).argmax(1);
  torch::Tensor counts = torch::zeros({kClasses}, torch::kLong)
                             .scatter_add(0, labels_val, torch::ones({labels_val.size(0)}, torch::kLong));
  torch::Tensor hits = torch::zeros({kClasses}, torch::kLong)
                           .scatter_add(0, labels_val, predicted.eq(labels_val).to(torch::kLong));
  for (int64_t c = 0; c < kClasses; ++c)
    std::printf("class %ld: %ld of %ld\n", static_cast<long>(c), static_cast<long>(hits[c].item<int64_t>()),
                static_cast<long>(counts[c].item<int64_t>()));
  torch::Tensor marks = torch::zeros({8});
  marks.index_put_({torch::arange(0, 8, 2, torch::kLong)}, torch::ones({4}));
  std::printf("marks %.0f %.0f %.0f\n", marks.sum().item<double>(), marks[0].item<double>(),
              marks[1].item<double>());
  return 0;
}
