// Data-parallel training over an MPI process group, written for libtorch's
// C++ frontend and c10d: each rank reads its share of MNIST through a
// DistributedRandomSampler, computes gradients, all-reduces them through the
// process group (a Work handle per parameter, waited on, abort on failure),
// averages them by writing through grad().data(), and steps. Run it under
// mpirun (alone it is a world of one). Built against Kiln, the training step
// (collectives included) is traced (KILN_TRACE) unless KILN_JIT=0.
//
// usage: mpirun -n 2 compat_ddp_mpi [DATA_ROOT [EPOCHS]]
#include <torch/torch.h>
#include <c10d/ProcessGroupMPI.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#ifdef KILN_TRACE
#define STEP(ret, name, ...) KILN_TRACE(ret, name, __VA_ARGS__)
#else
#define STEP(ret, name, ...) ret name(__VA_ARGS__)
#endif

struct Model : torch::nn::Module {
  Model()
      : conv1(torch::nn::Conv2dOptions(1, 8, 5)),
        conv2(torch::nn::Conv2dOptions(8, 16, 5)),
        fc1(256, 32),
        fc2(32, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 256});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, 0.5, is_training());
    return fc2->forward(x);
  }

  torch::nn::Conv2d conv1, conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1, fc2;
};

void waitWork(c10::intrusive_ptr<c10d::ProcessGroupMPI> pg,
              std::vector<c10::intrusive_ptr<c10d::Work>> works) {
  for (auto& work : works) {
    try {
      work->wait();
    } catch (const std::exception& ex) {
      std::cerr << "Exception received: " << ex.what() << std::endl;
      pg->abort();
    }
  }
}

c10::intrusive_ptr<c10d::ProcessGroupMPI> pg;
std::shared_ptr<Model> model;
std::unique_ptr<torch::optim::SGD> optimizer;

// Forward, backward, gradients averaged over the ranks, one SGD step.
STEP(torch::Tensor, train_step, torch::Tensor data, torch::Tensor target) {
  const int numranks = pg->getSize();
  model->zero_grad();
  auto prediction = model->forward(data);
  auto loss = torch::nll_loss(torch::log_softmax(prediction, 1), target);
  loss.backward();
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (auto& param : model->named_parameters()) {
    std::vector<torch::Tensor> tmp = {param.value().grad()};
    works.push_back(pg->allreduce(tmp));
    param.value().grad().data() = param.value().grad().data() / numranks;
  }
  waitWork(pg, works);
  optimizer->step();
  return loss;
}

int main(int argc, char* argv[]) {
  const std::string root = argc > 1 ? argv[1] : "./data";
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 2;
  pg = c10d::ProcessGroupMPI::createProcessGroupMPI();
  const int numranks = pg->getSize(), rank = pg->getRank();

  auto train_dataset = torch::data::datasets::MNIST(root)
                           .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                           .map(torch::data::transforms::Stack<>());
  auto data_sampler = torch::data::samplers::DistributedRandomSampler(train_dataset.size().value(),
                                                                      numranks, rank, false);
  const size_t samples_per_rank = train_dataset.size().value() / numranks;
  const int batch_size_per_rank = 64 / numranks;
  auto data_loader =
      torch::data::make_data_loader(std::move(train_dataset), data_sampler, batch_size_per_rank);

  torch::manual_seed(0);
  model = std::make_shared<Model>();
  optimizer = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                  torch::optim::SGDOptions(0.05).momentum(0.5));

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    data_sampler.set_epoch(epoch);  // the loader holds its own copy: this one is for show
    double loss_sum = 0;
    int64_t batches = 0;
    for (auto& batch : *data_loader) {
      auto loss = train_step(batch.data, batch.target.squeeze().to(torch::kLong));
      loss_sum += loss.item<double>();
      ++batches;
    }
    // The mean loss over every rank's batches.
    std::vector<torch::Tensor> total = {
        torch::tensor({loss_sum, static_cast<double>(batches)}, torch::kFloat64)};
    pg->allreduce(total)->wait();
    if (rank == 0)
      std::printf("epoch %d: mean loss %.5f over %ld batches on %d ranks (%zu samples each)\n",
                  epoch, total[0][0].item<double>() / total[0][1].item<double>(),
                  static_cast<long>(total[0][1].item<double>()), numranks, samples_per_rank);
  }

  // Every rank holds the same parameters: their sum's maximum and minimum over the ranks agree.
  double sum = 0;
  for (const auto& p : model->parameters()) sum += p.sum().item<double>();
  std::vector<torch::Tensor> hi = {torch::tensor(sum, torch::kFloat64)},
                             lo = {torch::tensor(sum, torch::kFloat64)};
  c10d::AllreduceOptions max_op, min_op;
  max_op.reduceOp = c10d::ReduceOp::MAX;
  min_op.reduceOp = c10d::ReduceOp::MIN;
  pg->allreduce(hi, max_op)->wait();
  pg->allreduce(lo, min_op)->wait();
  if (rank == 0)
    std::printf("parameters agree across ranks: %s (sum %.6f)\n",
                hi[0].item<double>() == lo[0].item<double>() ? "true" : "false", sum);
  return 0;
}
