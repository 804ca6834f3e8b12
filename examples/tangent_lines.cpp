// Exercise 2: tangent lines by autograd. f1(x) = 3 - x + (x/2)^2 and
// f2(x) = 3 - (x/2)^2 at x = -1: the slopes come from backward(); skipping
// grad().zero_() between the two shows gradients accumulating. Writes an SVG
// plot of both curves with their tangents.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <kiln/kiln.h>

#include "runtime/binary_io.h"

#include "course.h"

namespace kiln::examples {
namespace {

Tensor f1(const Tensor& x) { return 3 - x + (x / 2).pow(2); }
Tensor f2(const Tensor& x) { return 3 - (x / 2).pow(2); }

// Plot coordinates: x in [-4, 4], y in [-2, 10] onto a 640x480 canvas.
double px(double x) { return (x + 4.0) / 8.0 * 600.0 + 20.0; }
double py(double y) { return 460.0 - (y + 2.0) / 12.0 * 440.0; }

std::string polyline(const Tensor& xs, const Tensor& ys, const char* color, const char* dash) {
  auto xv = xs.to_vector<float>();
  auto yv = ys.to_vector<float>();
  std::ostringstream os;
  os << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << " points=\"";
  for (size_t i = 0; i < xv.size(); ++i) os << px(xv[i]) << "," << py(yv[i]) << " ";
  os << "\"/>\n";
  return os.str();
}

void write_svg(const char* path, double x0, double y1, double s1, double y2, double s2) {
  NoGradGuard no_grad;
  Tensor xs = linspace(-4, 4, 161);
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"480\">\n"
      << "<rect width=\"640\" height=\"480\" fill=\"white\"/>\n"
      << "<line x1=\"20\" y1=\"" << py(0) << "\" x2=\"620\" y2=\"" << py(0) << "\" stroke=\"#999\"/>\n"
      << "<line x1=\"" << px(0) << "\" y1=\"20\" x2=\"" << px(0) << "\" y2=\"460\" stroke=\"#999\"/>\n";
  svg << polyline(xs, f1(xs), "#1f77b4", "");
  svg << polyline(xs, f2(xs), "#d62728", "");
  svg << polyline(xs, y1 + s1 * (xs - x0), "#1f77b4", " stroke-dasharray=\"6,4\"");
  svg << polyline(xs, y2 + s2 * (xs - x0), "#d62728", " stroke-dasharray=\"6,4\"");
  svg << "<circle cx=\"" << px(x0) << "\" cy=\"" << py(y1) << "\" r=\"4\" fill=\"#1f77b4\"/>\n"
      << "<circle cx=\"" << px(x0) << "\" cy=\"" << py(y2) << "\" r=\"4\" fill=\"#d62728\"/>\n"
      << "<text x=\"30\" y=\"40\" font-family=\"sans-serif\" fill=\"#1f77b4\">f1(x) = 3 - x + (x/2)^2, slope "
      << s1 << " at x = " << x0 << "</text>\n"
      << "<text x=\"30\" y=\"60\" font-family=\"sans-serif\" fill=\"#d62728\">f2(x) = 3 - (x/2)^2, slope "
      << s2 << " at x = " << x0 << "</text>\n</svg>\n";
  io::write_file_durable(path, svg.str());  // atomic: a reader never sees half a file
}

}  // namespace

int tangent_lines(const char* svg_path) {
  std::cout << "== Exercise 2: tangent lines ==\n";
  Tensor x = tensor({-1.f});
  x.requires_grad_();

  Tensor y1 = f1(x);
  y1.backward();
  float s1 = x.grad().item<float>();
  std::cout << "f1(-1) = " << y1.item<float>() << ", slope f1'(-1) = " << s1 << "\n";
  x.grad().zero_();

  Tensor y2 = f2(x);
  y2.backward();
  float s2 = x.grad().item<float>();
  std::cout << "f2(-1) = " << y2.item<float>() << ", slope f2'(-1) = " << s2 << "\n";

  // Without zero_(), the next backward adds to what is there.
  x.grad().zero_();
  f1(x).backward();
  f2(x).backward();
  std::cout << "without zero_() between them, x.grad() = " << x.grad().item<float>()
            << " (the two slopes accumulate: " << s1 << " + " << s2 << ")\n";

  write_svg(svg_path, -1.0, y1.item<float>(), s1, y2.item<float>(), s2);
  std::cout << "plot written to " << svg_path << "\n\n";
  return 0;
}

}  // namespace kiln::examples

#ifdef KILN_EXAMPLE_MAIN
int main(int argc, char** argv) {
  return kiln::examples::tangent_lines(argc > 1 ? argv[1] : "tangent_lines.svg");
}
#endif
