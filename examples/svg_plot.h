// Line charts as SVG text, for the examples that draw their curves: a chart
// is a framed box with a title and some series, each scaled to the box.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace kiln::examples {

/// One curve: points (x[i], y[i]); with x empty, y[i] is drawn at x = i.
struct PlotSeries {
  std::vector<double> x, y;
  std::string colour = "#1f77b4";
  std::string dash = "none";  // stroke-dasharray, e.g. "6,4"
};

/// A chart in the box (left, top, width, height): a frame, `title` above it, and
/// each series mapped from [x_lo, x_hi] x [y_lo, y_hi] (y clamped to the box).
struct PlotChart {
  double left = 40, top = 40, width = 320, height = 220;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  std::string title;
  std::vector<PlotSeries> series;
};

/// A coordinate as SVG text, to a tenth of a pixel.
inline std::string svg_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

/// The <polyline> of one series in `c`'s box.
inline std::string svg_polyline(const PlotChart& c, const PlotSeries& s) {
  std::string out = "<polyline fill=\"none\" stroke=\"" + s.colour +
                    "\" stroke-width=\"2\" stroke-dasharray=\"" + s.dash + "\" points=\"";
  const double xs = c.x_hi > c.x_lo ? c.x_hi - c.x_lo : 1,
               ys = c.y_hi > c.y_lo ? c.y_hi - c.y_lo : 1;
  for (size_t i = 0; i < s.y.size(); ++i) {
    const double xv = s.x.empty() ? double(i) : s.x[i];
    const double x = c.left + c.width * (xv - c.x_lo) / xs;
    const double y =
        c.top + c.height - c.height * (std::clamp(s.y[i], c.y_lo, c.y_hi) - c.y_lo) / ys;
    out += svg_num(x) + "," + svg_num(y) + " ";
  }
  return out + "\"/>\n";
}

/// The frame, title and series of one chart.
inline std::string svg_chart(const PlotChart& c) {
  std::string out = "<text x=\"" + svg_num(c.left) + "\" y=\"" + svg_num(c.top - 16) + "\">" +
                    c.title + "</text>\n<rect x=\"" + svg_num(c.left) + "\" y=\"" + svg_num(c.top) +
                    "\" width=\"" + svg_num(c.width) + "\" height=\"" + svg_num(c.height) +
                    "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (const PlotSeries& s : c.series) out += svg_polyline(c, s);
  return out;
}

/// A whole document of the given size: a white page holding `body` (charts,
/// labels as <text> elements).
inline std::string svg_document(int width, int height, const std::string& body) {
  const std::string w = std::to_string(width), h = std::to_string(height);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
         "\" font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"" + w + "\" height=\"" +
         h + "\" fill=\"white\"/>\n" + body + "</svg>\n";
}

/// A <text> label at (x, y) in `colour`.
inline std::string svg_text(double x, double y, const std::string& text,
                            const std::string& colour = "black") {
  return "<text x=\"" + svg_num(x) + "\" y=\"" + svg_num(y) + "\" fill=\"" + colour + "\">" + text +
         "</text>\n";
}

}  // namespace kiln::examples
