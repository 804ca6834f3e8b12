// SVG line charts (see svg_chart.h).
#include "tools/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace kiln::cli {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick label: 1024 -> "1024", 1e6 -> "1M", 0.01 -> "0.01".
std::string tick_text(double v) {
  char buf[32];
  if (v >= 1e9 && std::fmod(v, 1e9) == 0)
    std::snprintf(buf, sizeof buf, "%gG", v / 1e9);
  else if (v >= 1e6 && std::fmod(v, 1e6) == 0)
    std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
  else if (v >= 1 << 20 && std::fmod(v, 1 << 20) == 0)
    std::snprintf(buf, sizeof buf, "%gMi", v / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

struct Axis {
  bool log = true;
  double lo = 1, hi = 10;
  double map(double v, double from, double to) const {
    const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
    const double t = ((log ? std::log10(v) : v) - a) / (b > a ? b - a : 1);
    return from + (to - from) * t;
  }
  bool shows(double v) const { return !log || v > 0; }
};

Axis axis_of(const Chart& c, bool x) {
  Axis a;
  a.log = x ? c.log_x : c.log_y;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const ChartLine& l : c.lines)
    for (double v : x ? l.x : l.y)
      if (a.shows(v) && std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = 1, hi = 10;
  if (a.log && x) {  // the data's own range: its ticks are the data's values
    lo /= 1.3;
    hi *= 1.3;
  } else if (a.log) {
    lo = std::pow(10, std::floor(std::log10(lo)));
    hi = std::pow(10, std::ceil(std::log10(hi)));
    if (hi <= lo) hi = lo * 10;
  } else {
    lo = std::min(lo, 0.0);
    hi = hi > lo ? hi * 1.1 : lo + 1;
  }
  a.lo = lo;
  a.hi = hi;
  return a;
}

// Tick positions: the data's own x values on a log x axis (sizes are powers of
// two), powers of ten on a log y axis, five even steps on a linear one.
std::vector<double> ticks(const Chart& c, const Axis& a, bool x) {
  std::vector<double> t;
  if (a.log && x) {
    for (const ChartLine& l : c.lines)
      for (double v : l.x)
        if (v > 0) t.push_back(v);
    std::sort(t.begin(), t.end());
    t.erase(std::unique(t.begin(), t.end()), t.end());
    while (t.size() > 8) {  // every other one
      std::vector<double> kept;
      for (size_t i = 0; i < t.size(); i += 2) kept.push_back(t[i]);
      t = kept;
    }
  } else if (a.log) {
    for (double v = a.lo; v <= a.hi * 1.0001; v *= 10) t.push_back(v);
  } else {
    for (int i = 0; i <= 5; ++i) t.push_back(a.lo + (a.hi - a.lo) * i / 5);
  }
  return t;
}

std::string chart_svg(const Chart& c, double left0, double width, double height) {
  const double left = left0 + 64, right = left0 + width - 16, top = 40, bottom = height - 52;
  const Axis ax = axis_of(c, true), ay = axis_of(c, false);
  std::string out;
  out += "<text x=\"" + num(left) + "\" y=\"22\" font-size=\"14\" font-weight=\"bold\">" +
         escape(c.title) + "</text>\n";
  out += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(right - left) +
         "\" height=\"" + num(bottom - top) + "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (double v : ticks(c, ax, true)) {
    const double x = ax.map(v, left, right);
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(bottom) + "\" stroke=\"#eee\"/>\n";
    out += "<text x=\"" + num(x) + "\" y=\"" + num(bottom + 14) +
           "\" font-size=\"10\" text-anchor=\"middle\">" + tick_text(v) + "</text>\n";
  }
  for (double v : ticks(c, ay, false)) {
    const double y = ay.map(v, bottom, top);
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(y) + "\" x2=\"" + num(right) + "\" y2=\"" +
           num(y) + "\" stroke=\"#eee\"/>\n";
    out += "<text x=\"" + num(left - 4) + "\" y=\"" + num(y + 3) +
           "\" font-size=\"10\" text-anchor=\"end\">" + tick_text(v) + "</text>\n";
  }
  out += "<text x=\"" + num((left + right) / 2) + "\" y=\"" + num(bottom + 32) +
         "\" font-size=\"11\" text-anchor=\"middle\">" + escape(c.x_label) + "</text>\n";
  out += "<text transform=\"translate(" + num(left0 + 14) + "," + num((top + bottom) / 2) +
         ") rotate(-90)\" font-size=\"11\" text-anchor=\"middle\">" + escape(c.y_label) +
         "</text>\n";
  if (!c.marker_label.empty() && ax.shows(c.marker_x)) {
    const double x = ax.map(c.marker_x, left, right);
    out += "<line x1=\"" + num(x) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x) + "\" y2=\"" +
           num(bottom) + "\" stroke=\"#d62728\" stroke-dasharray=\"4,3\"/>\n";
    out += "<text x=\"" + num(x + 3) + "\" y=\"" + num(top + 12) +
           "\" font-size=\"10\" fill=\"#d62728\">" + escape(c.marker_label) + "</text>\n";
  }
  double legend_y = top + 14;
  for (const ChartLine& l : c.lines) {
    std::string points;
    for (size_t i = 0; i < l.x.size() && i < l.y.size(); ++i) {
      if (!ax.shows(l.x[i]) || !ay.shows(l.y[i]) || !std::isfinite(l.y[i])) continue;
      const double x = ax.map(l.x[i], left, right), y = ay.map(l.y[i], bottom, top);
      points += num(x) + "," + num(y) + " ";
      out += "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"2.5\" fill=\"" + l.colour +
             "\"/>\n";
    }
    out += "<polyline fill=\"none\" stroke=\"" + l.colour + "\" stroke-width=\"2\"" +
           (l.dashed ? " stroke-dasharray=\"6,4\"" : "") + " points=\"" + points + "\"/>\n";
    out += "<line x1=\"" + num(left + 10) + "\" y1=\"" + num(legend_y - 4) + "\" x2=\"" +
           num(left + 30) + "\" y2=\"" + num(legend_y - 4) + "\" stroke=\"" + l.colour +
           "\" stroke-width=\"2\"" + (l.dashed ? " stroke-dasharray=\"6,4\"" : "") + "/>\n";
    out += "<text x=\"" + num(left + 35) + "\" y=\"" + num(legend_y) + "\" font-size=\"10\">" +
           escape(l.label) + "</text>\n";
    legend_y += 14;
  }
  return out;
}

}  // namespace

std::string svg_charts(const std::vector<Chart>& charts, double width, double height) {
  const double total = width * static_cast<double>(std::max<size_t>(charts.size(), 1));
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(total) +
                    "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(total) + " " +
                    num(height) + "\" font-family=\"Helvetica, Arial, sans-serif\">\n" +
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (size_t i = 0; i < charts.size(); ++i)
    out += chart_svg(charts[i], width * static_cast<double>(i), width, height);
  return out + "</svg>\n";
}

}  // namespace kiln::cli
