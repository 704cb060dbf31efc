// `tunec report`: a tuning database as a page a person reads: did each task converge, what
// failed, where the model's latency went over the job, which targets the records are of.
#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/html_page.h"
#include "cli/model_session.h"
#include "cli/model_tasks.h"
#include "cli/target_flag.h"
#include "support/atomic_file.h"
#include "support/terminal_text.h"
#include "templates/template.h"
#include "tuning_db/database.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

namespace tunec::cli {

namespace {

const CommandSpec kReportSpec{
    "report",
    "tunec report tuning.db [--model MODEL.onnx] [--target-key KEY] -o report.html",
    "Writes a self-contained HTML page of a tuning database: per task (workload), the best\n"
    "GFLOP/s against its trials as SVG curves, its measured, failed and timed-out configs and\n"
    "the time its measurements took; the estimated latency of the model's heavy kernels over\n"
    "the job (Σ occurrences x best time after each trial; --model gives the occurrences, else\n"
    "each workload counts once); and the records per target. One target's records are charted:\n"
    "--target-key, else the target with the most records.",
    {
        {"o", "FILE", "the page to write (required)"},
        {"model", "MODEL.onnx", "weight the tasks by how often this model runs them", true},
        {"target-key", "KEY", "chart this target's records ('tunec target' prints a key)"},
        {"input-shape", "NAME=SHAPE", "static shape for a dynamic input of --model", true},
        {"dim", "NAME=MIN..MAX", kDimFlagHelp, true},
        {"threads", "N",
         "the thread count the model's kernels were tuned for, as given to 'tunec tune' "
         "(default: the machine's cores)"},
        precisionFlag(),
    },
    1,
    1};

struct TaskSeries {
  std::string key, label, templ;
  double weight = 1, flops = 0;
  int trials = 0, ok = 0, errors = 0, timeouts = 0, wrong = 0;
  double measuredSeconds = 0;    ///< Σ repeats x median of its measurements
  std::vector<double> bestAfter; ///< best GFLOP/s after each of its trials (0 before an ok one)
  double best = 0;
  int bestAt = 0; ///< the trial (1-based) that found the best
};

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

/// One task's curve: best GFLOP/s against its trials.
std::string taskChart(const TaskSeries& t) {
  double top = std::max(t.best * 1.1, 1e-3);
  int n = std::max<int>(static_cast<int>(t.bestAfter.size()), 2);
  SvgChart chart(300, 170, 1, n, 0, top, false, false);
  std::ostringstream svg;
  svg << "<svg class=\"task\" width=\"300\" height=\"170\">" << chart.axes("trials", "best GFLOP/s")
      << "<polyline fill=\"none\" stroke=\"#2e86c1\" "
      << "stroke-width=\"2\" points=\"";
  for (size_t i = 0; i < t.bestAfter.size(); ++i)
    svg << chart.px(static_cast<double>(i + 1)) << "," << chart.py(t.bestAfter[i]) << " ";
  svg << "\"/></svg>";
  return "<figure class=\"chart\">" + svg.str() + "<figcaption>" + escapeHtml(t.label) + " (x" +
         fmt("%g", t.weight) + "): best " + fmt("%.1f", t.best) + " GFLOP/s at trial " +
         std::to_string(t.bestAt) + " of " + std::to_string(t.trials) + "</figcaption></figure>\n";
}

} // namespace

int commandReport(const std::vector<std::string>& argv) {
  auto args = Arguments::parse(kReportSpec, argv);
  if (!args) return fail(args.error().message());
  if (args->helpRequested()) {
    std::fputs(helpText(kReportSpec).c_str(), stdout);
    return 0;
  }
  if (!args->has("o")) return fail("tunec report: -o report.html is required");
  const std::string dbPath = args->positionals()[0];
  auto db = db::TuningDatabase::openReadOnly(dbPath);
  if (!db) return fail(db.error().message());
  auto records = db->allRecords();
  if (!records) return fail(records.error().message());
  if (records->empty()) return fail(dbPath + ": has no records to report (run 'tunec tune')");

  // Records per target, and the target charted.
  struct TargetRow {
    std::string model;
    int records = 0, ok = 0, failed = 0;
  };
  std::map<std::string, TargetRow> targets;
  for (const db::Record& r : *records) {
    TargetRow& row = targets[r.target.key()];
    row.model = r.target.model;
    ++row.records;
    (r.status == db::MeasureStatus::Ok ? row.ok : row.failed) += 1;
  }
  std::string targetKey = args->get("target-key");
  if (targetKey.empty()) {
    int most = -1;
    for (const auto& [key, row] : targets)
      if (row.records > most) most = row.records, targetKey = key;
  } else if (!targets.count(targetKey)) {
    return fail(dbPath + ": has no records of target " + targetKey +
                " ('tunec db stats' lists "
                "the targets)");
  }

  // Weights from the models, when given.
  std::map<std::string, double> weights;
  std::vector<std::string> models = args->getAll("model");
  if (!models.empty()) {
    auto shapes = parseInputDims(args->getAll("input-shape"), args->getAll("dim"));
    if (!shapes) return fail(shapes.error().message());
    auto threads = args->has("threads") ? parseThreads(args->get("threads"))
                                        : Expected<int>(thisMachine().cores);
    if (!threads) return fail(threads.error().message());
    auto precision = precisionFromArgs(*args);
    if (!precision) return fail(precision.error().message());
    auto found = modelTasks(models, *shapes, thisMachine(), *threads, *precision);
    if (!found) return fail(found.error().message());
    for (const tuner::Task& t : found->tasks) weights[t.key] = t.weight;
    bool any = std::any_of(records->begin(), records->end(), [&](const db::Record& r) {
      return r.target.key() == targetKey && weights.count(r.workloadKey());
    });
    if (!any)
      std::fprintf(stderr,
                   "tunec: warning: none of the %zu tasks of the model%s (at %d thread%s, %s) "
                   "has records of target %s in %s: were they tuned with other --threads or "
                   "--precision? The page charts no task\n",
                   found->tasks.size(), models.size() > 1 ? "s" : "", *threads,
                   *threads == 1 ? "" : "s",
                   *precision == driver::Precision::Bf16 ? "bf16" : "fp32", targetKey.c_str(),
                   forTerminal(dbPath).c_str());
  }

  // The series, in the order the job measured.
  std::map<std::string, TaskSeries> tasks;
  std::vector<std::string> order;
  /// Every ok measurement in job order: (job trial, workload key, seconds).
  struct Measured {
    int trial;
    std::string key;
    double seconds;
  };
  std::vector<Measured> measuredInOrder;
  int jobTrials = 0;
  std::string firstAt, lastAt;
  for (const db::Record& r : *records) {
    if (r.target.key() != targetKey) continue;
    std::string key = r.workloadKey();
    if (!weights.empty() && !weights.count(key)) continue; // not a kernel of the model
    auto [it, fresh] = tasks.emplace(key, TaskSeries{});
    TaskSeries& t = it->second;
    if (fresh) {
      order.push_back(key);
      t.key = key;
      t.templ = r.templateName();
      t.weight = weights.count(key) ? weights[key] : 1;
      auto w = parseWorkload(r.workload);
      t.label = w ? workloadLabel(*w) : key;
      t.flops = w ? workloadFlops(*w) : 0;
    }
    if (firstAt.empty()) firstAt = r.createdAt;
    lastAt = r.createdAt;
    ++t.trials;
    ++jobTrials;
    switch (r.status) {
    case db::MeasureStatus::Ok:
      ++t.ok;
      break;
    case db::MeasureStatus::Error:
      ++t.errors;
      break;
    case db::MeasureStatus::Timeout:
      ++t.timeouts;
      break;
    case db::MeasureStatus::WrongResult:
      ++t.wrong;
      break;
    }
    if (r.status == db::MeasureStatus::Ok && r.medianUs > 0) {
      t.measuredSeconds += static_cast<double>(r.repeats) * r.medianUs * 1e-6;
      if (r.gflops > t.best) {
        t.best = r.gflops;
        t.bestAt = t.trials;
      }
      measuredInOrder.push_back({jobTrials, key, r.medianUs * 1e-6});
    }
    t.bestAfter.push_back(t.best);
  }
  // Σ occurrences x best time so far after each measurement. A task not measured yet counts at
  // its first measured time (a job measures the analytical default first), so the curve spans
  // the whole job.
  std::map<std::string, double> best;
  for (const Measured& m : measuredInOrder) best.try_emplace(m.key, m.seconds);
  auto weightOf = [&](const std::string& k) { return weights.count(k) ? weights.at(k) : 1.0; };
  double ms = 0;
  for (const auto& [k, s] : best) ms += weightOf(k) * s * 1e3;
  std::vector<std::pair<int, double>> estimate;
  for (const Measured& m : measuredInOrder) {
    double& b = best[m.key];
    if (m.seconds < b) {
      ms -= weightOf(m.key) * (b - m.seconds) * 1e3;
      b = m.seconds;
    }
    estimate.emplace_back(m.trial, ms);
  }
  std::ostringstream body;
  int ok = 0, failed = 0;
  double measured = 0;
  for (const auto& [key, t] : tasks) {
    ok += t.ok;
    failed += t.trials - t.ok;
    measured += t.measuredSeconds;
  }
  body << "<table class=\"summary\">"
       << "<tr><td>database</td><td>" << escapeHtml(dbPath) << "</td></tr>"
       << "<tr><td>target charted</td><td>" << escapeHtml(targetKey) << " ("
       << escapeHtml(targets[targetKey].model) << ")</td></tr>"
       << "<tr><td>tasks</td><td>" << tasks.size()
       << (weights.empty() ? " (every workload of the target, each counted once)"
                           : " (the kernels of " + escapeHtml(models.front()) +
                                 (models.size() > 1 ? " and more" : "") + ")")
       << "</td></tr><tr><td>trials</td><td>" << jobTrials << ": " << ok << " measured, " << failed
       << " errors, timeouts or wrong results</td></tr>"
       << "<tr><td>time</td><td>measurements " << fmt("%.1f", measured) << " s; first record "
       << escapeHtml(firstAt) << ", last " << escapeHtml(lastAt) << "</td></tr>";
  if (!estimate.empty())
    body << "<tr><td>heavy kernels</td><td>estimated " << fmt("%.3f", estimate.front().second)
         << " ms after the first measurement, " << fmt("%.3f", estimate.back().second)
         << " ms at the end ("
         << fmt("%.2f", estimate.front().second / std::max(estimate.back().second, 1e-12))
         << "x)</td></tr>";
  body << "</table>\n";

  // The model's estimated latency over the job.
  if (estimate.size() >= 2) {
    double top = 0, bottom = std::numeric_limits<double>::infinity();
    for (const auto& [trial, ms] : estimate) top = std::max(top, ms), bottom = std::min(bottom, ms);
    SvgChart chart(820, 300, estimate.front().first,
                   std::max(jobTrials, estimate.front().first + 1), 0, top * 1.1, false, false);
    body << "<h2>Estimated latency of the heavy kernels over the job</h2>\n"
         << "<svg id=\"latency\" width=\"820\" "
            "height=\"300\">"
         << chart.axes("trial of the job", "ms (Σ occurrences x best time)")
         << "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"";
    for (const auto& [trial, ms] : estimate) body << chart.px(trial) << "," << chart.py(ms) << " ";
    body << "\"/></svg>\n<p class=\"note\">Σ over the tasks of occurrences x the best time "
            "measured so far; a task not measured yet counts at its first measurement (the "
            "analytical default, which a job measures first).</p>\n";
  }

  HtmlTable table;
  table.id = "tasks";
  table.headers = {"workload",     "template", "x",          "trials",
                   "ok",           "errors",   "timeouts",   "wrong",
                   "best GFLOP/s", "best at",  "measured s", "label"};
  for (const std::string& key : order) {
    const TaskSeries& t = tasks[key];
    table.rows.push_back(
        {textCell(key), textCell(t.templ), numberCell(t.weight, "%g"), numberCell(t.trials, "%.0f"),
         numberCell(t.ok, "%.0f"), numberCell(t.errors, "%.0f"), numberCell(t.timeouts, "%.0f"),
         numberCell(t.wrong, "%.0f"), numberCell(t.best, "%.1f"), numberCell(t.bestAt, "%.0f"),
         numberCell(t.measuredSeconds, "%.2f"), textCell(t.label)});
  }
  body << "<h2>Tasks</h2>\n<p class=\"note\">Click a column to sort.</p>\n" << table.html();
  body << "<h2>Convergence per task</h2>\n<div id=\"curves\">\n";
  for (const std::string& key : order) body << taskChart(tasks[key]);
  body << "</div>\n";
  HtmlTable targetTable;
  targetTable.id = "targets";
  targetTable.headers = {"records", "ok", "failed", "target key", "model"};
  for (const auto& [key, row] : targets)
    targetTable.rows.push_back({numberCell(row.records, "%.0f"), numberCell(row.ok, "%.0f"),
                                numberCell(row.failed, "%.0f"), textCell(key),
                                textCell(row.model)});
  body << "<h2>Records per target</h2>\n" << targetTable.html();

  std::string page = htmlPage("tunec report: " + dbPath, body.str());
  std::vector<std::string> inputs = args->getAll("model");
  inputs.push_back(dbPath);
  Status st = writeFileAtomically(
      args->get("o"),
      [&](std::ostream& os) -> Status {
        os << page;
        return {};
      },
      inputs);
  if (!st) return fail(st.error().message());
  std::printf("wrote %s: %zu tasks, %d trials of target %s\n", args->get("o").c_str(), tasks.size(),
              jobTrials, targetKey.c_str());
  return 0;
}

} // namespace tunec::cli
