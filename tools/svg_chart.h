// Line charts as SVG, drawn by `kiln bench speedup` without Python: log or
// linear axes with ticks and labels, one polyline and marker per series, a
// legend. Several charts go side by side in one picture.
#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

struct ChartLine {
  std::string label;
  std::string colour = "#1f77b4";
  std::vector<double> x, y;  // points; a y that is not positive is left out on a log axis
  bool dashed = false;
};

struct Chart {
  std::string title, x_label, y_label;
  bool log_x = true, log_y = true;
  std::vector<ChartLine> lines;
  /// A vertical marker (the break-even N), drawn when `marker_label` is set.
  double marker_x = 0;
  std::string marker_label;
};

/// The charts side by side, each `width` x `height` pixels, as one SVG document.
std::string svg_charts(const std::vector<Chart>& charts, double width = 440, double height = 320);

}  // namespace kiln::cli
