// Resuming training from files (frontend/checkpoint.h): optimizer state files,
// and training checkpoints that carry the default generators' states, so a
// run resumed mid-epoch into new objects computes exactly what the
// uninterrupted run computed, eagerly and with the step traced.
#include <filesystem>
#include <functional>
#include <memory>

#include "frontend/random_internal.h"
#include "frontend/tensor_impl.h"
#include "runtime/binary_io.h"
#include "test_util.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

// A fresh directory for one test's files.
std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("kiln_resume_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// A small regression model with dropout; its weights come from the default generator.
nn::Sequential make_model() {
  return nn::Sequential(nn::Linear(8, 32), nn::ReLU(), nn::Dropout(0.3), nn::Linear(32, 1));
}

enum class Resume { no, checkpoint, weights_and_optimizer_only };

// Three epochs of shuffled batches (6 per epoch) with Adam, the step eager or
// traced; every step's loss. With `how` != no, after global step `stop_at` the
// run saves its state and goes on as a new process would: new model, optimizer
// and compiled step made from other draws, the state loaded into them, then the
// next batch of the same epoch (a DataLoader's order depends only on its seed
// and the epoch).
std::vector<float> train(bool traced, Resume how, int stop_at, const std::string& dir) {
  manual_seed(11);
  Tensor x = randn({96, 8}), y = (x.sum(1, true) * 0.5).sin();
  data::DataLoader loader(data::TensorDataset({x, y}),
                          {.batch_size = 16, .shuffle = true, .seed = 3});
  nn::Sequential model = make_model();
  auto opt = std::make_unique<optim::Adam>(model->parameters(), 0.01);
  auto body = [&](Tensor in, Tensor target) {
    opt->zero_grad();
    Tensor loss = nn::functional::mse_loss(model(in), target);
    loss.backward();
    opt->step();
    return loss;
  };
  auto make_step = [&]() -> std::function<Tensor(Tensor, Tensor)> {
    if (traced) return jit(body, "resume_step");
    return body;
  };
  std::function<Tensor(Tensor, Tensor)> step = make_step();
  std::vector<float> losses;
  int global = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(epoch);
    for (const std::vector<Tensor>& batch : loader) {
      losses.push_back(step(batch[0], batch[1]).item<float>());
      if (how != Resume::no && global == stop_at) {
        const std::string ckpt = dir + "/run.ckpt", weights = dir + "/w.kiln",
                          state = dir + "/opt.kiln";
        if (how == Resume::checkpoint) {
          save_checkpoint(ckpt, model, *opt);
        } else {
          save(model, weights);
          save(*opt, state);
        }
        // What a new process would have: other weights, other draws, a new plan.
        manual_seed(999);
        (void)rand({17});
        model = make_model();
        opt = std::make_unique<optim::Adam>(model->parameters(), 0.5);
        step = make_step();
        if (how == Resume::checkpoint) {
          load_checkpoint(ckpt, model, *opt);
        } else {
          load(model, weights);
          load(*opt, state);
        }
      }
      ++global;
    }
  }
  return losses;
}

}  // namespace

TEST_CASE("a checkpoint resumes a dropout run mid-epoch with the uninterrupted run's losses") {
  const std::string dir = temp_dir("resume");
  for (bool traced : {false, true}) {
    CAPTURE(traced);
    const std::vector<float> whole = train(traced, Resume::no, -1, dir);
    REQUIRE(whole.size() == 18);
    CHECK(whole.back() < whole.front());
    // Stopped after step 8: epoch 1, batch 2 of 6.
    const std::vector<float> resumed = train(traced, Resume::checkpoint, 8, dir);
    CHECK(resumed == whole);
    // Weights and optimizer alone resume the arithmetic but not the dropout masks.
    const std::vector<float> no_rng = train(traced, Resume::weights_and_optimizer_only, 8, dir);
    CHECK(std::equal(no_rng.begin(), no_rng.begin() + 9, whole.begin()));
    CHECK(no_rng[9] != whole[9]);
  }
}

TEST_CASE("optimizer files: state and learning rate round trip; mismatches are clean errors") {
  const std::string dir = temp_dir("optimizer");
  manual_seed(1);
  nn::Linear a(3, 2), b(3, 2);
  optim::Adam opt(a->parameters(), 0.1), other(b->parameters(), 0.7);
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    a(randn({4, 3})).pow(2).sum().backward();
    opt.step();
  }
  opt.set_lr(0.05);
  save(opt, dir + "/adam.kiln");
  load(other, dir + "/adam.kiln");
  CHECK(other.lr() == 0.05);
  const std::vector<Tensor> want = opt.state(), got = other.state();
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(equal(want[i], got[i]));

  // Another shape, another kind, another file: errors, and the optimizer unchanged.
  nn::Linear wide(5, 2);
  optim::Adam wrong(wide->parameters(), 0.3);
  KILN_CHECK_ERROR(load(wrong, dir + "/adam.kiln"),
                   "adam.kiln: state.1: the file has shape [2,3], the optimizer [2,5]");
  CHECK(wrong.lr() == 0.3);
  optim::SGD sgd(a->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  KILN_CHECK_ERROR(
      load(sgd, dir + "/adam.kiln"), "the names in the file do not match the optimizer's",
      "not in the optimizer: 'state.2', 'state.3'", "an optimizer of the same kind and options");
  save(a, dir + "/weights.kiln");
  KILN_CHECK_ERROR(load(other, dir + "/weights.kiln"), "not a Kiln optimizer file",
                   "a Kiln weights file");
  KILN_CHECK_ERROR(load(a, dir + "/adam.kiln"), "not a Kiln weights file",
                   "a Kiln optimizer file, for kiln::load(optimizer, path)");
  // SGD without momentum has no state but its learning rate.
  optim::SGD plain(a->parameters(), 0.25), plain2(b->parameters(), 1);
  save(plain, dir + "/sgd.kiln");
  load(plain2, dir + "/sgd.kiln");
  CHECK(plain2.lr() == 0.25);
}

TEST_CASE("checkpoints: the generators' states, parts that must match, damaged entries") {
  const std::string dir = temp_dir("checkpoint");
  manual_seed(21);
  nn::Linear m(4, 3);
  optim::SGD opt(m->parameters(), optim::SGDOptions(0.1).momentum(0.5));
  (void)rand({5});
  const Tensor state = get_rng_state();
  save_checkpoint(dir + "/a.ckpt", m, opt);
  save_checkpoint(dir + "/no_opt.ckpt", m);
  const Tensor next = rand({6});

  // Loading sets the default generator where saving found it.
  manual_seed(5);
  nn::Linear m2(4, 3);
  optim::SGD opt2(m2->parameters(), optim::SGDOptions(0.9).momentum(0.5));
  load_checkpoint(dir + "/a.ckpt", m2, opt2);
  CHECK(equal(get_rng_state(), state));
  CHECK(equal(rand({6}), next));
  CHECK(equal(m2->weight, m->weight));
  CHECK(opt2.lr() == 0.1);
  auto holder = std::make_shared<nn::LinearImpl>(4, 3);
  load_checkpoint(dir + "/no_opt.ckpt", holder);
  CHECK(equal(holder->weight, m->weight));

  KILN_CHECK_ERROR(load_checkpoint(dir + "/no_opt.ckpt", m2, opt2),
                   "no_opt.ckpt: the checkpoint has no optimizer state");
  KILN_CHECK_ERROR(load_checkpoint(dir + "/a.ckpt", m2),
                   "a.ckpt: the checkpoint has an optimizer's state");
  nn::Linear bigger(4, 5);
  KILN_CHECK_ERROR(load_checkpoint(dir + "/a.ckpt", bigger, opt2),
                   "weight: the file has shape [3,4], the module [5,4]");
  save(m, dir + "/w.kiln");
  KILN_CHECK_ERROR(load_checkpoint(dir + "/w.kiln", m2), "not a Kiln checkpoint file",
                   "a Kiln weights file");
  KILN_CHECK_ERROR(load(m2, dir + "/a.ckpt"), "not a Kiln weights file",
                   "a Kiln checkpoint file, for kiln::load_checkpoint");

  // Hand-made files: a state for a device this machine lacks waits for that
  // device's generator; unknown names and bad rng entries are errors.
  auto write = [&](const std::string& name, const std::vector<std::pair<std::string, Tensor>>& e) {
    const io::FrameFormat f{"KILN-CHECKPOINT\n", kCheckpointFormatVersion, "Kiln checkpoint file",
                            "entry count"};
    io::ByteWriter w;
    io::begin_frame(w, f, uint32_t(e.size()));
    for (const auto& [n, t] : e)
      io::write_tensor_record(w, n, t.dtype(), t.sizes(), t.contiguous().impl()->view().data);
    io::end_frame(w, f);
    io::write_file_durable(dir + "/" + name, w.str());
    return dir + "/" + name;
  };
  const Tensor seed7 = scalar_tensor(int64_t{7}, kInt64);
  const Tensor cuda_state = tensor({int64_t{9}, int64_t{123}});
  const std::string pending = write("pending.ckpt", {{"module.weight", m->weight},
                                                     {"module.bias", m->bias},
                                                     {"rng.seed", seed7},
                                                     {"rng.cuda:1", cuda_state}});
  load_checkpoint(pending, m2);
  // The CPU generator was not in the file: it restarts from the file's seed.
  CHECK(get_rng_state().to_vector<int64_t>() == std::vector<int64_t>{7, 0});
  const detail::DefaultRngStates now = detail::default_rng_states();
  CHECK(now.seed == 7);
  bool found = false;
  for (const auto& [d, s] : now.states)
    if (d == Device(kCUDA, 1)) found = equal(s, cuda_state);
  CHECK(found);
  manual_seed(3);  // forgets states waiting for their generators
  for (const auto& [d, s] : detail::default_rng_states().states) CHECK(d.is_cpu());

  const std::string stray = write("stray.ckpt", {{"module.weight", m->weight},
                                                 {"module.bias", m->bias},
                                                 {"rng.seed", seed7},
                                                 {"epoch", seed7}});
  KILN_CHECK_ERROR(load_checkpoint(stray, m2), "entries of no part of a checkpoint: 'epoch'");
  const std::string gpu = write("gpu.ckpt", {{"module.weight", m->weight},
                                             {"module.bias", m->bias},
                                             {"rng.seed", seed7},
                                             {"rng.gpu", cuda_state}});
  KILN_CHECK_ERROR(load_checkpoint(gpu, m2), "an entry for an unknown device, 'rng.gpu'");
  const std::string no_seed =
      write("no_seed.ckpt",
            {{"module.weight", m->weight}, {"module.bias", m->bias}, {"rng.cpu", cuda_state}});
  KILN_CHECK_ERROR(load_checkpoint(no_seed, m2), "no rng.seed entry");
  const std::string bad_shape = write("bad_shape.ckpt", {{"module.weight", m->weight},
                                                         {"module.bias", m->bias},
                                                         {"rng.seed", seed7},
                                                         {"rng.cpu", zeros({3}, kInt64)}});
  // A bad file changes nothing, the generators included.
  manual_seed(8);
  const Tensor before = get_rng_state(), weight = m2->weight.clone();
  KILN_CHECK_ERROR(load_checkpoint(bad_shape, m2), "rng.cpu has shape [3]");
  CHECK(equal(get_rng_state(), before));
  CHECK(equal(m2->weight, weight));

  auto f = jit([&](Tensor x) {
    save_checkpoint(dir + "/t.ckpt", m);
    return x + 1;
  });
  KILN_CHECK_ERROR(f(ones({1})), "save_checkpoint(", "inside a traced function");
}

}  // namespace kiln
