// Self-contained HTML pages for `tunec profile --html` and `tunec report`: one file, inline CSS,
// SVG and script, nothing loaded from anywhere.
#pragma once

#include <string>
#include <vector>

namespace tunec::cli {

std::string escapeHtml(const std::string& text);

/// A table whose columns sort on a click of their header (numbers by value: each numeric cell
/// carries data-v). `id` names it for tests.
struct HtmlTable {
  std::string id;
  std::vector<std::string> headers;
  /// Per row, per column: the text shown and, for numeric columns, the value to sort by
  /// (NaN: text).
  struct Cell {
    std::string text;
    double value;
  };
  std::vector<std::vector<Cell>> rows;
  std::string html() const;
};

/// A cell of text, or of a number shown with printf `format`.
HtmlTable::Cell textCell(const std::string& text);
HtmlTable::Cell numberCell(double value, const char* format);

/// The page around `body`: title, style and the table-sorting script.
std::string htmlPage(const std::string& title, const std::string& body);

/// Axes of a chart: a frame of `width` x `height` pixels with ticks; log10 scales when `logX` /
/// `logY`. Maps data to pixels for the marks drawn inside.
class SvgChart {
public:
  SvgChart(int width, int height, double x0, double x1, double y0, double y1, bool logX, bool logY);
  double px(double x) const;
  double py(double y) const;
  /// The frame, grid, ticks and the axis titles.
  std::string axes(const std::string& xTitle, const std::string& yTitle) const;
  int width() const { return width_; }
  int height() const { return height_; }

private:
  int width_, height_;
  double x0_, x1_, y0_, y1_;
  bool logX_, logY_;
};

} // namespace tunec::cli
