// An MLP on the handwritten digits (examples/data: 1797 8x8 images, 10
// classes), trained twice from the same seed: eagerly, then with the whole
// training step (forward, loss, backward, Adam) as one compiled plan per call.
// Dropout draws from the generator inside the plan, and with the same seed
// both runs draw the same masks, so they end with the same weights.
//   build/examples/digits_mlp [epochs] [curves.svg]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "runtime/binary_io.h"
#include "runtime/blas.h"

using namespace kiln;

namespace {

struct Curves {
  std::vector<double> loss, accuracy;
  double ms_per_epoch = 0;
};

struct Data {
  Tensor x_train, y_train, x_test, y_test;
};

Data load_digits(const std::string& path) {
  Tensor all = data::read_csv(path);  // [1797, 65]: 64 pixels (0..16), the digit
  data::Split split = data::train_test_split(all.size(0), 0.2, /*seed=*/0);
  const data::TensorDataset rows({all});
  Tensor train = rows.subset(split.train).tensors()[0], test = rows.subset(split.test).tensors()[0];
  auto pixels = [](const Tensor& t) { return t.narrow(1, 0, 64).div(Scalar(16.0)).contiguous(); };
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
Curves train(const Data& d, int epochs, bool traced, std::vector<Tensor>* weights) {
  manual_seed(0);
  nn::Sequential model(nn::Linear(64, 128), nn::ReLU(), nn::Dropout(0.1), nn::Linear(128, 10));
  optim::Adam opt(model->parameters(), 2e-3);
  auto body = [&](Tensor xb, Tensor yb) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model(xb), yb);
    loss.backward();
    opt.step();
    return loss;
  };
  auto compiled = jit(body, "digits_mlp_step");
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
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    c.loss.push_back(total / double(loader.size()));
    c.accuracy.push_back(accuracy(model, d.x_test, d.y_test));
  }
  c.ms_per_epoch = ms / epochs;
  *weights = model->parameters();
  return c;
}

std::string polyline(const std::vector<double>& v, double lo, double hi, double x0, double y0,
                     double w, double h, const char* colour, const char* dash) {
  std::string s = "<polyline fill=\"none\" stroke=\"" + std::string(colour) +
                  "\" stroke-width=\"2\" stroke-dasharray=\"" + dash + "\" points=\"";
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = x0 + w * double(i) / double(std::max<size_t>(v.size() - 1, 1));
    const double y = y0 + h - h * (std::clamp(v[i], lo, hi) - lo) / (hi - lo);
    s += std::to_string(x) + "," + std::to_string(y) + " ";
  }
  return s + "\"/>\n";
}

void write_svg(const std::string& path, const Curves& eager, const Curves& traced) {
  double top = 0;
  for (double l : eager.loss) top = std::max(top, l);
  std::string s =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"760\" height=\"300\" font-family=\"sans-serif\" "
      "font-size=\"13\">\n<rect width=\"760\" height=\"300\" fill=\"white\"/>\n"
      "<text x=\"40\" y=\"24\">training loss (per epoch)</text>\n"
      "<text x=\"420\" y=\"24\">test accuracy (0.8 to 1)</text>\n"
      "<rect x=\"40\" y=\"40\" width=\"320\" height=\"220\" fill=\"none\" stroke=\"#999\"/>\n"
      "<rect x=\"420\" y=\"40\" width=\"320\" height=\"220\" fill=\"none\" stroke=\"#999\"/>\n"
      "<text x=\"40\" y=\"286\" fill=\"#1f77b4\">eager (solid)</text>\n"
      "<text x=\"160\" y=\"286\" fill=\"#d62728\">traced (dashed)</text>\n";
  s += polyline(eager.loss, 0, top, 40, 40, 320, 220, "#1f77b4", "none");
  s += polyline(traced.loss, 0, top, 40, 40, 320, 220, "#d62728", "6,4");
  s += polyline(eager.accuracy, 0.8, 1, 420, 40, 320, 220, "#1f77b4", "none");
  s += polyline(traced.accuracy, 0.8, 1, 420, 40, 320, 220, "#d62728", "6,4");
  s += "</svg>\n";
  io::write_file_durable(path, s);
}

}  // namespace

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 30;
  const std::string svg = argc > 2 ? argv[2] : "digits_mlp.svg";
  const Data d = load_digits(std::string(KILN_DATA_DIR) + "/digits.csv.gz");
  std::printf("digits_mlp: %lld training and %lld test images, %d epochs, batch 64, %s\n",
              static_cast<long long>(d.x_train.size(0)), static_cast<long long>(d.x_test.size(0)),
              epochs, blas_info().c_str());
  std::vector<Tensor> we, wt;
  const Curves eager = train(d, epochs, false, &we);
  const Curves traced = train(d, epochs, true, &wt);
  double diff = 0;
  for (size_t i = 0; i < we.size(); ++i)
    diff = std::max(diff, (we[i] - wt[i]).abs().max().item<double>());
  std::printf("eager : test accuracy %.1f%%, final loss %.4f, %.2f ms per epoch\n",
              100 * eager.accuracy.back(), eager.loss.back(), eager.ms_per_epoch);
  std::printf("traced: test accuracy %.1f%%, final loss %.4f, %.2f ms per epoch (%.2fx eager)\n",
              100 * traced.accuracy.back(), traced.loss.back(), traced.ms_per_epoch,
              eager.ms_per_epoch / traced.ms_per_epoch);
  std::printf("largest weight difference, traced vs eager: %.3g (the same dropout draws; f32 "
              "sums in another order, grown over the steps by Adam)\n",
              diff);
  write_svg(svg, eager, traced);
  std::printf("curves: %s\n", svg.c_str());
  return 0;
}
