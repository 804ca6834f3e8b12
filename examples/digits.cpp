// The digits examples' shared part (digits.h).
#include "digits.h"
#include "svg_plot.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "runtime/binary_io.h"
#include "runtime/blas.h"

namespace kiln::examples {

namespace {

struct Curves {
  std::vector<double> loss, accuracy;
  double first_epoch_ms = 0;  // traced: includes tracing and compiling the step
  double ms_per_epoch = 0;    // over the epochs after the first (the first if only one)
};

struct Data {
  Tensor x_train, y_train, x_test, y_test;
};

Data load_digits(const std::string& path, bool images) {
  Tensor all = data::read_csv(path);  // [1797, 65]: 64 pixels (0..16), the digit
  data::Split split = data::train_test_split(all.size(0), 0.2, /*seed=*/0);
  const data::TensorDataset rows({all});
  Tensor train = rows.subset(split.train).tensors()[0], test = rows.subset(split.test).tensors()[0];
  auto pixels = [&](const Tensor& t) {
    Tensor p = t.narrow(1, 0, 64).div(Scalar(16.0));
    return (images ? p.reshape({t.size(0), 1, 8, 8}) : p).contiguous();
  };
  auto labels = [](const Tensor& t) { return t.select(1, 64).to(kInt64).contiguous(); };
  return {pixels(train), labels(train), pixels(test), labels(test)};
}

double accuracy(nn::Sequential& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  model->eval();
  const double correct = model(x).argmax(1).eq(y).to(kFloat64).sum().item<double>();
  model->train();
  return correct / double(x.size(0));
}

// Trains from seed 0; `traced` runs each step as one compiled plan.
Curves train(const DigitsModel& m, const Data& d, int epochs, bool traced,
             std::vector<Tensor>* weights) {
  manual_seed(0);
  nn::Sequential model = m.make();
  optim::Adam opt(model->parameters(), m.lr);
  auto body = [&](Tensor xb, Tensor yb) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(xb), yb);
    loss.backward();
    opt.step();
    return loss;
  };
  auto compiled = jit(body, m.name + "_step");
  data::DataLoaderOptions lo;
  lo.batch_size = 64;
  lo.shuffle = true;
  lo.seed = 1;
  lo.drop_last = true;  // one batch shape: one plan
  data::DataLoader loader(data::TensorDataset({d.x_train, d.y_train}), lo);
  Curves c;
  double ms = 0;
  for (int e = 0; e < epochs; ++e) {
    loader.set_epoch(e);
    double total = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& batch : loader) {
      Tensor l = traced ? compiled(batch[0], batch[1]) : body(batch[0], batch[1]);
      total += l.item<double>();
    }
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (e == 0)
      c.first_epoch_ms = t;
    else
      ms += t;
    c.loss.push_back(total / double(loader.size()));
    c.accuracy.push_back(accuracy(model, d.x_test, d.y_test));
  }
  c.ms_per_epoch = epochs > 1 ? ms / (epochs - 1) : c.first_epoch_ms;
  *weights = model->parameters();
  return c;
}

void write_svg(const std::string& path, const Curves& eager, const Curves& traced) {
  double top = 0;
  for (double l : eager.loss) top = std::max(top, l);
  PlotChart loss, acc;
  loss.y_hi = top;
  loss.title = "training loss (per epoch)";
  acc.left = 420;
  acc.y_lo = 0.8;
  acc.title = "test accuracy (0.8 to 1)";
  for (PlotChart* c : {&loss, &acc}) {
    const bool is_loss = c == &loss;
    c->x_hi = double(std::max<size_t>(eager.loss.size() - 1, 1));
    c->series = {{{}, is_loss ? eager.loss : eager.accuracy, "#1f77b4", "none"},
                 {{}, is_loss ? traced.loss : traced.accuracy, "#d62728", "6,4"}};
  }
  io::write_file_durable(
      path, svg_document(760, 300,
                         svg_chart(loss) + svg_chart(acc) +
                             svg_text(40, 286, "eager (solid)", "#1f77b4") +
                             svg_text(160, 286, "traced (dashed)", "#d62728")));
}

}  // namespace

int train_digits(const DigitsModel& m, int epochs, const std::string& svg) {
  const Data d = load_digits(std::string(KILN_DATA_DIR) + "/digits.csv.gz", m.images);
  std::printf("%s: %lld training and %lld test images, %d epochs, batch 64, %s\n", m.name.c_str(),
              static_cast<long long>(d.x_train.size(0)), static_cast<long long>(d.x_test.size(0)),
              epochs, blas_info().c_str());
  std::vector<Tensor> we, wt;
  const Curves eager = train(m, d, epochs, false, &we);
  const Curves traced = train(m, d, epochs, true, &wt);
  double diff = 0;
  for (size_t i = 0; i < we.size(); ++i)
    diff = std::max(diff, (we[i] - wt[i]).abs().max().item<double>());
  std::printf("eager : test accuracy %.1f%%, final loss %.4f, %.2f ms per epoch (first %.0f ms)\n",
              100 * eager.accuracy.back(), eager.loss.back(), eager.ms_per_epoch,
              eager.first_epoch_ms);
  std::printf("traced: test accuracy %.1f%%, final loss %.4f, %.2f ms per epoch (%.2fx eager; "
              "first %.0f ms, tracing and compiling the step included)\n",
              100 * traced.accuracy.back(), traced.loss.back(), traced.ms_per_epoch,
              eager.ms_per_epoch / traced.ms_per_epoch, traced.first_epoch_ms);
  std::printf("largest weight difference, traced vs eager: %.3g (the same dropout draws; f32 "
              "sums in another order, grown over the steps by Adam)\n",
              diff);
  write_svg(svg, eager, traced);
  std::printf("curves: %s\n", svg.c_str());
  return 0;
}

}  // namespace kiln::examples
