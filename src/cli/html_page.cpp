// The pages' shared pieces: escaping, the sortable table, the page shell and chart axes.
#include "cli/html_page.h"

#include "support/sha256.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace tunec::cli {

namespace {

const char* kStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
td:last-child, th:last-child { text-align: left; }
th { cursor: pointer; background: #f3f3f3; position: sticky; top: 0; }
th.sorted-asc::after { content: " \25B2"; } th.sorted-desc::after { content: " \25BC"; }
.summary td { text-align: left; white-space: normal; } .summary td:first-child { color: #555; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.note { color: #555; max-width: 60em; }
figure.chart { display: inline-block; margin: 4px; }
figure.chart figcaption { max-width: 300px; font-size: 12px; }
)css";

// Sorting: a click on a header sorts its table's body by that column (numbers by data-v).
const char* kScript = R"js(
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.addEventListener('click', function () {
      var asc = !th.classList.contains('sorted-asc');
      table.querySelectorAll('th').forEach(function (h) { h.className = ''; });
      th.className = asc ? 'sorted-asc' : 'sorted-desc';
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col], y = b.cells[col];
        var vx = x.dataset.v, vy = y.dataset.v, r;
        if (vx !== undefined && vy !== undefined) r = parseFloat(vx) - parseFloat(vy);
        else r = x.textContent.localeCompare(y.textContent);
        return asc ? r : -r;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
// page.html#sort=TABLE:COLUMN[:desc] opens the page sorted (a link to a view; the tests use it).
(function () {
  var m = /sort=([\w-]+):(\d+)(:desc)?/.exec(location.hash);
  if (!m) return;
  var th = document.querySelectorAll('#' + m[1] + ' th')[parseInt(m[2], 10)];
  if (!th) return;
  th.click();
  if (m[3]) th.click();
})();
)js";

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

} // namespace

std::string escapeHtml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

HtmlTable::Cell textCell(const std::string& text) {
  return {text, std::nan("")};
}

HtmlTable::Cell numberCell(double value, const char* format) {
  if (!std::isfinite(value)) return {"-", -1e300};
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return {buf, value};
}

std::string HtmlTable::html() const {
  std::ostringstream os;
  os << "<table class=\"sortable\" id=\"" << escapeHtml(id) << "\"><thead><tr>";
  for (const std::string& h : headers) os << "<th>" << escapeHtml(h) << "</th>";
  os << "</tr></thead><tbody>\n";
  for (const auto& row : rows) {
    os << "<tr>";
    for (const Cell& c : row) {
      os << "<td";
      if (!std::isnan(c.value)) os << " data-v=\"" << number(c.value) << "\"";
      os << ">" << escapeHtml(c.text) << "</td>";
    }
    os << "</tr>\n";
  }
  os << "</tbody></table>\n";
  return os.str();
}

std::string htmlPage(const std::string& title, const std::string& body) {
  // Only the page's own style and script run: the policy names their SHA-256, so markup that
  // escaped its escaping (a model's or database's text) could neither run script nor style.
  static const std::string policy = "default-src 'none'; style-src " + cspHash(kStyle) +
                                    "; script-src " + cspHash(kScript) + "; img-src data:";
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
     << "<meta http-equiv=\"Content-Security-Policy\" content=\"" << policy << "\">\n"
     << "<title>" << escapeHtml(title) << "</title>\n<style>" << kStyle << "</style></head>\n"
     << "<body>\n<h1>" << escapeHtml(title) << "</h1>\n"
     << body << "<script>" << kScript << "</script>\n</body></html>\n";
  return os.str();
}

SvgChart::SvgChart(int width, int height, double x0, double x1, double y0, double y1, bool logX,
                   bool logY)
    : width_(width), height_(height), x0_(x0), x1_(x1), y0_(y0), y1_(y1), logX_(logX), logY_(logY) {
}

namespace {
constexpr double kLeft = 64, kRight = 16, kTop = 12, kBottom = 44;
}

double SvgChart::px(double x) const {
  double t = logX_ ? (std::log10(x) - std::log10(x0_)) / (std::log10(x1_) - std::log10(x0_))
                   : (x - x0_) / (x1_ - x0_);
  return kLeft + t * (width_ - kLeft - kRight);
}

double SvgChart::py(double y) const {
  double t = logY_ ? (std::log10(y) - std::log10(y0_)) / (std::log10(y1_) - std::log10(y0_))
                   : (y - y0_) / (y1_ - y0_);
  return height_ - kBottom - t * (height_ - kTop - kBottom);
}

std::string SvgChart::axes(const std::string& xTitle, const std::string& yTitle) const {
  std::ostringstream os;
  double left = kLeft, right = width_ - kRight, top = kTop, bottom = height_ - kBottom;
  os << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << right - left << "\" height=\""
     << bottom - top << "\" fill=\"none\" stroke=\"#888\"/>\n";
  // Ticks: powers of ten on a log axis, five even steps on a linear one.
  auto ticks = [](double a, double b, bool log) {
    std::vector<double> out;
    if (log) {
      for (double p = std::floor(std::log10(a)); p <= std::ceil(std::log10(b)); ++p) {
        double v = std::pow(10.0, p);
        if (v >= a * 0.999 && v <= b * 1.001) out.push_back(v);
      }
    } else {
      // A round step (1, 2 or 5 times a power of ten) giving about five ticks.
      double raw = (b - a) / 5, power = std::pow(10.0, std::floor(std::log10(raw)));
      double step = raw / power < 1.5 ? power : raw / power < 3.5 ? 2 * power : 5 * power;
      for (double v = std::ceil(a / step) * step; v <= b + step * 1e-9; v += step)
        out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    }
    return out;
  };
  for (double x : ticks(x0_, x1_, logX_))
    os << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << top << "\" y2=\"" << bottom
       << "\" stroke=\"#eee\"/><text x=\"" << px(x) << "\" y=\"" << bottom + 14
       << "\" text-anchor=\"middle\">" << number(x) << "</text>\n";
  for (double y : ticks(y0_, y1_, logY_))
    os << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << py(y) << "\" y2=\"" << py(y)
       << "\" stroke=\"#eee\"/><text x=\"" << left - 4 << "\" y=\"" << py(y) + 4
       << "\" text-anchor=\"end\">" << number(y) << "</text>\n";
  os << "<text x=\"" << (left + right) / 2 << "\" y=\"" << height_ - 8
     << "\" text-anchor=\"middle\">" << escapeHtml(xTitle) << "</text>\n"
     << "<text transform=\"translate(14," << (top + bottom) / 2
     << ") rotate(-90)\" text-anchor=\"middle\">" << escapeHtml(yTitle) << "</text>\n";
  return os.str();
}

} // namespace tunec::cli
