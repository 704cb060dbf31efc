// Roofline bounds per step, and their text, JSON and HTML forms.
#include "cli/roofline.h"

#include "cli/html_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

namespace tunec::cli {

Profile boundSteps(const std::vector<StepInfo>& steps, const std::vector<double>& medianSeconds,
                   const Roofs& roofs) {
  Profile p;
  p.roofs = roofs;
  // The weights a run streams (weight-only matmuls, each read once a run): when they pass the
  // last-level cache together, each run reads them from memory, whatever one step's size.
  int64_t streamed = 0;
  for (const StepInfo& s : steps) streamed += s.streamsWeights ? s.bytes : 0;
  const bool streamedFromMemory = streamed > roofs.cacheBytes;
  for (size_t i = 0; i < steps.size(); ++i) {
    StepBound b;
    b.step = steps[i];
    b.seconds = medianSeconds[i];
    double peak = (b.step.generated ? roofs.kernelGflops : roofs.loopGflops) * 1e9;
    // A step with bf16 or int8 kernels: its roof time is their operations at their peak plus
    // the rest at the FMA peak, and its peak the rate that time gives.
    const double bf16 = roofs.bf16Gflops > 0 ? b.step.bf16Flops : 0,
                 int8 = roofs.int8Gops > 0 ? b.step.int8Ops : 0;
    if (bf16 + int8 > 0 && peak > 0)
      peak = b.step.flops /
             ((bf16 > 0 ? bf16 / (roofs.bf16Gflops * 1e9) : 0) +
              (int8 > 0 ? int8 / (roofs.int8Gops * 1e9) : 0) + (b.step.flops - bf16 - int8) / peak);
    bool inCache = roofs.cacheGBs > 0 && b.step.bytes <= roofs.cacheBytes &&
                   !(b.step.streamsWeights && streamedFromMemory);
    double bandwidth = (inCache ? roofs.cacheGBs : roofs.bandwidthGBs) * 1e9;
    if (b.seconds > 0) {
      b.gflops = b.step.flops / b.seconds / 1e9;
      b.gbs = static_cast<double>(b.step.bytes) / b.seconds / 1e9;
    }
    b.computeSeconds = peak > 0 ? b.step.flops / peak : 0;
    b.memorySeconds = bandwidth > 0 ? static_cast<double>(b.step.bytes) / bandwidth : 0;
    b.boundSeconds = std::max(b.computeSeconds, b.memorySeconds);
    b.bound = b.step.bytes == 0 && b.step.flops == 0 ? "unknown"
              : b.computeSeconds >= b.memorySeconds  ? "compute"
              : inCache                              ? "cache"
                                                     : "memory";
    b.ofPeak = peak > 0 ? b.gflops * 1e9 / peak : 0;
    b.ofBandwidth = bandwidth > 0 ? b.gbs * 1e9 / bandwidth : 0;
    p.stepsSeconds += b.seconds;
    p.boundSeconds += b.boundSeconds;
    p.steps.push_back(std::move(b));
  }
  return p;
}

namespace {

/// The achieved rate in the bound's unit, as the table shows it.
std::string rate(const StepBound& b) {
  char buf[48];
  if (b.bound == "compute")
    std::snprintf(buf, sizeof(buf), "%.1f GFLOP/s", b.gflops);
  else if (b.bound == "memory" || b.bound == "cache")
    std::snprintf(buf, sizeof(buf), "%.1f GB/s", b.gbs);
  else
    std::snprintf(buf, sizeof(buf), "-");
  return buf;
}

double ofBound(const StepBound& b) {
  return b.seconds > 0 ? b.boundSeconds / b.seconds : 0;
}

std::string summaryLine(const Profile& p) {
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "%zu steps: %.3f ms (median of %d profiled runs), whole run %.3f ms (median of %d "
                "runs): the steps are %.1f%% of it; at the roofline the steps would take %.3f ms "
                "(%.0f%% of the steps' time)",
                p.steps.size(), p.stepsSeconds * 1e3, p.runs, p.runSeconds * 1e3, p.runs,
                p.runSeconds > 0 ? 100 * p.stepsSeconds / p.runSeconds : 0.0, p.boundSeconds * 1e3,
                p.stepsSeconds > 0 ? 100 * p.boundSeconds / p.stepsSeconds : 0.0);
  return buf;
}

std::string roofsLine(const Roofs& r) {
  char buf[300];
  std::snprintf(buf, sizeof(buf),
                "roofs (%d thread%s, %s): generated kernels %.1f GFLOP/s (fp32 FMA peak, "
                "measured), loop kernels %.1f GFLOP/s (half of it), memory %.1f GB/s, last-level "
                "cache %.1f GB/s for operands up to %lld MiB (triads, measured)",
                r.threads, r.threads > 1 ? "s" : "", r.isa.c_str(), r.kernelGflops, r.loopGflops,
                r.bandwidthGBs, r.cacheGBs, static_cast<long long>(r.cacheBytes >> 20));
  std::string line = buf;
  if (r.bf16Gflops > 0) {
    std::snprintf(buf, sizeof(buf), "; bf16 kernels %.1f GFLOP/s (%s peak, measured)", r.bf16Gflops,
                  r.bf16Instruction);
    line += buf;
  }
  if (r.int8Gops > 0) {
    std::snprintf(buf, sizeof(buf), "; int8 kernels %.1f GOP/s (%s peak, measured)", r.int8Gops,
                  r.int8Instruction);
    line += buf;
  }
  return line;
}

} // namespace

/// A model compiled before its steps carried their costs has no bounds: say so, and how.
std::string unknownCostsNote(const Profile& p) {
  size_t unknown = std::count_if(p.steps.begin(), p.steps.end(),
                                 [](const StepBound& b) { return b.bound == "unknown"; });
  if (unknown == 0 || unknown < p.steps.size()) return "";
  return "note: this model was compiled by a tunec that did not record the steps' FLOPs and "
         "bytes, so they have no bounds; compile it again for them\n";
}

std::string profileText(const Profile& p, const std::string& model) {
  std::ostringstream os;
  os << model << ": " << summaryLine(p) << "\n"
     << roofsLine(p.roofs) << "\n"
     << unknownCostsNote(p);
  char line[512];
  std::snprintf(line, sizeof(line), "%4s %9s %6s %8s %8s %7s %6s %-8s %7s  %s\n", "step", "ms",
                "share", "GFLOP/s", "GB/s", "%peak", "%bw", "bound", "%bound", "label");
  os << line;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const StepBound& b = p.steps[i];
    std::snprintf(line, sizeof(line),
                  "%4zu %9.4f %5.1f%% %8.1f %8.1f %6.1f%% %5.1f%% %-8s %6.1f%%  %s%s\n", i,
                  b.seconds * 1e3, p.stepsSeconds > 0 ? 100 * b.seconds / p.stepsSeconds : 0.0,
                  b.gflops, b.gbs, 100 * b.ofPeak, 100 * b.ofBandwidth, b.bound.c_str(),
                  100 * ofBound(b), b.step.generated ? "" : "[loop] ", b.step.label.c_str());
    os << line;
  }
  os << "(%peak: of the compute roof of the step's kind; %bw: of its memory roof, the cache's "
        "when its operands fit the last-level cache; %bound: the bound's time over the step's, "
        "100% is at the roofline)\n";
  return os.str();
}

nlohmann::json profileJson(const Profile& p, const std::string& model) {
  nlohmann::json steps = nlohmann::json::array();
  for (const StepBound& b : p.steps)
    steps.push_back({{"label", b.step.label},
                     {"generated", b.step.generated},
                     {"seconds", b.seconds},
                     {"flops", b.step.flops},
                     {"bytes", b.step.bytes},
                     {"gflops", b.gflops},
                     {"gbs", b.gbs},
                     {"bound", b.bound},
                     {"bound_seconds", b.boundSeconds},
                     {"of_peak", b.ofPeak},
                     {"of_bandwidth", b.ofBandwidth}});
  return {{"model", model},
          {"isa", p.roofs.isa},
          {"threads", p.roofs.threads},
          {"kernel_peak_gflops", p.roofs.kernelGflops},
          {"loop_peak_gflops", p.roofs.loopGflops},
          {"bf16_peak_gflops", p.roofs.bf16Gflops},
          {"int8_peak_gops", p.roofs.int8Gops},
          {"bandwidth_gbs", p.roofs.bandwidthGBs},
          {"cache_gbs", p.roofs.cacheGBs},
          {"cache_bytes", p.roofs.cacheBytes},
          {"runs", p.runs},
          {"steps_seconds", p.stepsSeconds},
          {"run_seconds", p.runSeconds},
          {"bound_seconds", p.boundSeconds},
          {"steps", steps}};
}

std::string profileHtml(const Profile& p, const std::string& model) {
  std::ostringstream body;
  body << "<table class=\"summary\"><tr><td>model</td><td>" << escapeHtml(model)
       << "</td></tr><tr><td>time</td><td>" << escapeHtml(summaryLine(p))
       << "</td></tr><tr><td>roofs</td><td>" << escapeHtml(roofsLine(p.roofs))
       << "</td></tr></table>\n";
  if (std::string note = unknownCostsNote(p); !note.empty())
    body << "<p class=\"note\">" << escapeHtml(note) << "</p>\n";
  // The roofline: operational intensity (FLOP/byte) against GFLOP/s, both log scales. Steps that
  // compute nothing (copies, reorders) have no intensity: they are in the table only.
  double x0 = 1.0 / 64, x1 = 256, y0 = 0.01, y1 = 1;
  double peak = std::max({p.roofs.kernelGflops, p.roofs.bf16Gflops, p.roofs.int8Gops, 1e-3});
  while (y1 < peak * 1.5) y1 *= 10;
  for (const StepBound& b : p.steps)
    if (b.step.flops > 0 && b.step.bytes > 0) {
      double ai = b.step.flops / static_cast<double>(b.step.bytes);
      while (ai < x0) x0 /= 4;
      while (ai > x1) x1 *= 4;
      while (b.gflops > 0 && b.gflops < y0) y0 /= 10;
    }
  SvgChart chart(820, 460, x0, x1, y0, y1, true, true);
  std::ostringstream svg;
  svg << "<svg id=\"roofline\" width=\"" << chart.width() << "\" height=\"" << chart.height()
      << "\">\n"
      << chart.axes("operational intensity (FLOP per byte of operands)", "GFLOP/s");
  // The roofs: bandwidth x intensity up to each compute peak.
  auto roof = [&](double gflops, double gbs, const char* color, const char* name) {
    if (!(gbs > 0)) return;
    double ridge = gflops / gbs;
    double startX = x0, startY = gbs * x0;
    if (startY < y0) {
      startX = y0 / gbs;
      startY = y0;
    }
    svg << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\""
        << chart.px(startX) << "," << chart.py(startY) << " " << chart.px(std::min(ridge, x1))
        << "," << chart.py(std::min(gflops, gbs * x1)) << " " << chart.px(x1) << ","
        << chart.py(std::min(gflops, gbs * x1)) << "\"/>\n"
        << "<text x=\"" << chart.px(startX) + 6 << "\" y=\"" << chart.py(startY) - 6 << "\">"
        << name << "</text>\n";
  };
  roof(p.roofs.kernelGflops, p.roofs.cacheGBs, "#c0392b", "");
  roof(p.roofs.loopGflops, p.roofs.cacheGBs, "#e67e22", "last-level cache");
  roof(p.roofs.kernelGflops, p.roofs.bandwidthGBs, "#c0392b", "");
  roof(p.roofs.loopGflops, p.roofs.bandwidthGBs, "#e67e22", "memory");
  svg << "<text x=\"" << chart.px(x1) - 4 << "\" y=\"" << chart.py(p.roofs.kernelGflops) - 5
      << "\" text-anchor=\"end\">generated kernels (fp32 FMA peak)</text>\n<text x=\""
      << chart.px(x1) - 4 << "\" y=\"" << chart.py(p.roofs.loopGflops) + 14
      << "\" text-anchor=\"end\">loop kernels</text>\n";
  // A model with bf16 or int8 kernels: their roofs above the FMA one.
  for (auto [top, instruction, kind] :
       {std::tuple{p.roofs.bf16Gflops, p.roofs.bf16Instruction, "bf16"},
        std::tuple{p.roofs.int8Gops, p.roofs.int8Instruction, "int8"}}) {
    if (!(top > 0)) continue;
    roof(top, p.roofs.cacheGBs, "#8e44ad", "");
    roof(top, p.roofs.bandwidthGBs, "#8e44ad", "");
    svg << "<text x=\"" << chart.px(x1) - 4 << "\" y=\"" << chart.py(top) - 5
        << "\" text-anchor=\"end\">" << kind << " kernels (" << instruction << " peak)</text>\n";
  }
  int plotted = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const StepBound& b = p.steps[i];
    if (!(b.step.flops > 0 && b.step.bytes > 0 && b.gflops > 0)) continue;
    double ai = b.step.flops / static_cast<double>(b.step.bytes);
    double share = p.stepsSeconds > 0 ? b.seconds / p.stepsSeconds : 0;
    double r = 3 + 40 * std::sqrt(share);
    svg << "<circle class=\"step\" cx=\"" << chart.px(ai) << "\" cy=\""
        << chart.py(std::max(b.gflops, y0)) << "\" r=\"" << r << "\" fill=\""
        << (b.step.generated ? "#2e86c1" : "#27ae60")
        << "\" fill-opacity=\"0.45\" stroke=\"#333\" stroke-width=\"0.5\"><title>" << i << ": "
        << escapeHtml(b.step.label) << " — " << escapeHtml(rate(b)) << ", "
        << static_cast<int>(100 * share + 0.5) << "% of the time</title></circle>\n";
    ++plotted;
  }
  svg << "</svg>\n";
  body << "<h2>Roofline</h2>\n"
       << svg.str() << "<p class=\"note\">Each circle is a step (blue: generated kernel, green: "
       << "loop kernel), its area the step's share of the time; " << plotted << " of "
       << p.steps.size()
       << " steps are drawn, the others move data without arithmetic and are in the table. "
          "Hover a circle for its step.</p>\n";
  HtmlTable t;
  t.id = "steps";
  t.headers = {"step", "ms",    "share",   "GFLOP/s", "GB/s", "% peak",
               "% bw", "bound", "% bound", "kind",    "label"};
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const StepBound& b = p.steps[i];
    t.rows.push_back(
        {numberCell(static_cast<double>(i), "%.0f"), numberCell(b.seconds * 1e3, "%.4f"),
         numberCell(p.stepsSeconds > 0 ? 100 * b.seconds / p.stepsSeconds : 0, "%.1f%%"),
         numberCell(b.gflops, "%.1f"), numberCell(b.gbs, "%.1f"),
         numberCell(100 * b.ofPeak, "%.1f%%"), numberCell(100 * b.ofBandwidth, "%.1f%%"),
         textCell(b.bound), numberCell(100 * ofBound(b), "%.1f%%"),
         textCell(b.step.generated ? "generated" : "loop"), textCell(b.step.label)});
  }
  body << "<h2>Steps</h2>\n<p class=\"note\">Click a column to sort.</p>\n" << t.html();
  return htmlPage("tunec profile: " + model, body.str());
}

} // namespace tunec::cli
