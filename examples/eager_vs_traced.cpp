// Eager vs traced: one function run both ways, the IR it became, the fused
// kernel it compiled to (dumped with LLVM IR, assembly and pictures), and the
// two-layer net trained eagerly and as one compiled step, side by side (its
// step dumped, and profiled as a trace-event file).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <kiln/kiln.h>

#include "course.h"
#include "ir/printer.h"

namespace kiln::examples {
namespace {

Tensor g_bias = tensor({0.5f, -0.5f, 1.f, 0.f});

// Decorator-like: `gelu_bias` is a traced function; the block is its body.
KILN_TRACE(Tensor, gelu_bias, Tensor x) { return ((x + g_bias).gelu() * 2 - 1).tanh(); }

// The same math with a scalar shift, for timing on a long vector.
KILN_TRACE(Tensor, gelu_shift, Tensor x) { return ((x + 0.5f).gelu() * 2 - 1).tanh(); }

template <class F>
double best_ms(F f, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The lines of the dumped assembly's inner loop that use vector registers.
std::string vector_lines(const std::filesystem::path& asm_file, int max_lines) {
  std::ifstream in(asm_file);
  std::string line, out;
  int n = 0;
  while (std::getline(in, line) && n < max_lines)
    if (line.find("%zmm") != std::string::npos || line.find("%ymm") != std::string::npos) {
      out += "    " + line + "\n";
      ++n;
    }
  return out;
}

}  // namespace

int eager_vs_traced(const char* dump_dir) {
  std::cout << "== Eager vs traced ==\n";
  Tensor x = tensor({{-1.f, 0.f, 1.f, 2.f}, {0.5f, 1.5f, -2.f, 3.f}});
  std::cout << "eager:  " << ((x + g_bias).gelu() * 2 - 1).tanh() << "\n";
  std::cout << "traced: " << gelu_bias(x) << "\n";
  std::cout << "\nthe graph it traced (each node keeps its source line):\n"
            << print_graph(gelu_bias.graph(x, false), PrintOptions{true});
  std::cout << "after the pass pipeline:\n" << print_graph(gelu_bias.graph(x));

  std::filesystem::path dir(dump_dir);
  gelu_bias.dump(dir.string(), x);
  std::filesystem::path sig = dir / "gelu_bias" / "f32-2x4";
  std::cout << "\ndumped to " << sig.string() << ": graph after each pass, fusion groups, kernel IR,\n"
            << "LLVM IR before and after O3, assembly, summary.txt. summary.txt says:\n";
  std::ifstream summary(sig / "summary.txt");
  std::cout << summary.rdbuf();
  Tensor big = randn({1 << 22});
  gelu_shift.dump(dir.string(), big);
  for (auto& f : std::filesystem::directory_iterator(dir / "gelu_shift" / "f32-4194304" / "kernels"))
    if (f.path().extension() == ".s")
      std::cout << "vector instructions in " << f.path().filename().string() << " (4M elements):\n"
                << vector_lines(f.path(), 6);

  gelu_shift(big);
  wait_for_background_compiles();  // the optimised kernels swapped in for the quick tier's
  double eager_ms = best_ms([&] { ((big + 0.5f).gelu() * 2 - 1).tanh(); }, 5);
  double traced_ms = best_ms([&] { gelu_shift(big); }, 5);
  std::printf("4M elements: eager %.2f ms, traced %.2f ms (%.1fx; rough, see bench/ for the real figures)\n\n",
              eager_ms, traced_ms, eager_ms / traced_ms);
  return 0;
}

int compiled_training(const char* dump_dir) {
  std::cout << "== The two-layer net, eager and compiled side by side (500 steps) ==\n";
  constexpr int64_t N = 64, D_in = 1000, H = 100, D_out = 10;
  manual_seed(0);
  Tensor x = randn({N, D_in}), y = randn({N, D_out});
  Tensor w1_init = randn({D_in, H}), w2_init = randn({H, D_out});
  const double lr = 1e-6;

  auto run = [&](bool traced, double* ms) {
    Tensor w1 = w1_init.clone().requires_grad_(), w2 = w2_init.clone().requires_grad_();
    auto step = [&](Tensor in, Tensor target) {
      Tensor loss = (in.mm(w1).clamp_min(0).mm(w2) - target).pow(2).sum();
      loss.backward();
      NoGradGuard no_grad;
      w1 -= lr * w1.grad();
      w2 -= lr * w2.grad();
      w1.grad().zero_();
      w2.grad().zero_();
      return loss;
    };
    auto compiled = jit(step, "two_layer_step");
    float last = 0;
    // Two warm-up steps: compiling (and the one retrace once .grad exists) is not timed.
    int warm = 2;
    for (int t = 0; t < warm; ++t) last = (traced ? compiled(x, y) : step(x, y)).item<float>();
    wait_for_background_compiles();  // the optimised kernels swapped in for the quick tier's
    auto t0 = std::chrono::steady_clock::now();
    for (int t = warm; t < 500; ++t) last = (traced ? compiled(x, y) : step(x, y)).item<float>();
    *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / (500 - warm);
    if (traced) {
      compiled.dump(dump_dir, x, y);
      // One more step with profiling on: a trace to open in Perfetto or chrome://tracing.
      compiled.profile((std::filesystem::path(dump_dir) / "two_layer_step.trace.json").string(), x,
                       y);
    }
    return last;
  };
  double eager_ms = 0, traced_ms = 0;
  float eager_loss = run(false, &eager_ms);
  float traced_loss = run(true, &traced_ms);
  std::printf("eager:  loss after 500 steps %.6g, %.3f ms/step\n", eager_loss, eager_ms);
  std::printf("traced: loss after 500 steps %.6g, %.3f ms/step (%.1fx faster)\n", traced_loss, traced_ms,
              eager_ms / traced_ms);
  std::cout << "the compiled step (forward, backward and both updates) was dumped to "
            << (std::filesystem::path(dump_dir) / "two_layer_step").string()
            << " (fused.svg: its kernels as a picture)\nand one step of it profiled to "
            << (std::filesystem::path(dump_dir) / "two_layer_step.trace.json").string()
            << " (open it at https://ui.perfetto.dev or chrome://tracing)\n\n";
  return 0;
}

}  // namespace kiln::examples

#ifdef KILN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "kiln_dump";
  kiln::examples::eager_vs_traced(dir);
  return kiln::examples::compiled_training(dir);
}
#endif
