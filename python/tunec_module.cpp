// The Python package's native part, `tunec._tunec` (python/tunec/__init__.py is the API users
// import): models compiled in this process or loaded from model.so, run on NumPy arrays with the
// GIL released; tuning jobs; tuning databases. Every error the CLI would print is raised as
// tunec.Error with the same message; wrong inputs raise TypeError, ValueError or KeyError naming
// the input and what was expected.
#include "cli/model_session.h"
#include "cli/model_tasks.h"
#include "cli/record_checks.h"
#include "cli/target_flag.h"
#include "codegen/peak_probe.h"
#include "support/atomic_file.h"
#include "templates/isa.h"
#include "tuner/tuning_job.h"
#include "tuning_db/database.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sstream>

namespace py = pybind11;

namespace tunec::python {

namespace {

/// tunec.Error: what the CLI prints after "tunec: ".
struct TunecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T> T unwrap(Expected<T> e) {
  if (!e) throw TunecError(e.error().message());
  return std::move(*e);
}

void check(const Status& s) {
  if (!s) throw TunecError(s.error().message());
}

/// NumPy's name of a tunec element type ("" when NumPy has none: bf16).
std::string numpyName(DType t) {
  switch (t) {
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  case DType::F16:
    return "float16";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::I16:
    return "int16";
  case DType::I8:
    return "int8";
  case DType::U8:
    return "uint8";
  case DType::U16:
    return "uint16";
  case DType::U32:
    return "uint32";
  case DType::U64:
    return "uint64";
  case DType::Bool:
    return "bool";
  default:
    return "";
  }
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string describe(const rt::IoSpec& io) {
  return "'" + io.name + "' (" + numpyName(io.dtype) + ", shape " + shapeText(io.shape) + ")";
}

// A symbolic dimension shows its name ("sequence"), as ONNX Runtime's shapes do; "bounds" holds
// every dimension's largest size.
py::dict tensorInfo(const rt::IoSpec& io, const std::vector<std::string>& dimNames) {
  py::dict d;
  d["name"] = io.name;
  py::list shape;
  for (size_t i = 0; i < io.shape.size(); ++i) {
    if (i < dimNames.size() && !dimNames[i].empty())
      shape.append(dimNames[i]);
    else
      shape.append(io.shape[i]);
  }
  d["shape"] = py::tuple(shape);
  d["bounds"] = py::tuple(py::cast(io.shape));
  d["dtype"] = numpyName(io.dtype);
  return d;
}

using DimRanges = std::map<std::string, std::pair<int64_t, int64_t>>;

// --input-shape and --dim as Python gives them: input_shapes={"x": (1, 3, 224, 224)},
// dims={"sequence": (1, 512)}.
using DimBuckets = std::map<std::string, std::vector<int64_t>>;

InputDims inputDims(const std::map<std::string, std::vector<int64_t>>& shapes,
                    const DimRanges& ranges, const DimBuckets& buckets = {}) {
  InputDims out;
  for (const auto& [name, dims] : shapes) out.shapes.emplace(name, Shape(dims));
  for (const auto& [name, range] : ranges) {
    if (range.first < 0 || range.first > range.second)
      throw py::value_error("dims['" + name + "'] = (" + std::to_string(range.first) + ", " +
                            std::to_string(range.second) + "): the bounds must satisfy 0 <= min " +
                            "<= max");
    out.ranges[name] = range;
  }
  // The buckets checked as --buckets is (ascending, within the symbol's bounds).
  std::vector<std::string> dimFlags, bucketFlags;
  for (const auto& [name, range] : ranges)
    dimFlags.push_back(name + "=" + std::to_string(range.first) + ".." +
                       std::to_string(range.second));
  for (const auto& [name, edges] : buckets) {
    std::string flag = name + "=";
    for (size_t i = 0; i < edges.size(); ++i) flag += (i ? "," : "") + std::to_string(edges[i]);
    bucketFlags.push_back(flag);
  }
  auto checked = cli::parseInputDims({}, dimFlags, bucketFlags);
  if (!checked) throw py::value_error(checked.error().message());
  out.buckets = checked->buckets;
  return out;
}

class Model {
public:
  Model(cli::ModelSession session, std::string source, int threads)
      : session_(std::make_shared<cli::ModelSession>(std::move(session))),
        source_(std::move(source)), threads_(threads) {}

  py::list inputs() const {
    py::list l;
    for (size_t i = 0; i < session_->inputs.size(); ++i)
      l.append(tensorInfo(session_->inputs[i], dimNames(session_->inputDimNames, i)));
    return l;
  }
  py::list outputs() const {
    py::list l;
    for (size_t i = 0; i < session_->outputs.size(); ++i)
      l.append(tensorInfo(session_->outputs[i], dimNames(session_->outputDimNames, i)));
    return l;
  }
  static std::vector<std::string> dimNames(const std::vector<std::vector<std::string>>& names,
                                           size_t i) {
    return i < names.size() ? names[i] : std::vector<std::string>{};
  }
  const std::string& report() const { return session_->report; }

  /// Checks every array against its input (name, type, dtype, shape, memory order) before any
  /// run: a wrong one raises and nothing runs. No array is copied or converted.
  py::dict run(const py::dict& feeds) {
    std::string names;
    for (const rt::IoSpec& io : session_->inputs)
      names += (names.empty() ? "" : ", ") + describe(io);
    for (const auto& item : feeds) {
      std::string key = py::str(item.first);
      bool known = std::any_of(session_->inputs.begin(), session_->inputs.end(),
                               [&](const rt::IoSpec& io) { return io.name == key; });
      if (!known)
        throw py::key_error("unknown input '" + key + "'; the model's inputs are " + names);
    }
    std::vector<py::array> keep;
    std::vector<const void*> in;
    std::vector<std::vector<int64_t>> shapes;
    for (const rt::IoSpec& io : session_->inputs) {
      std::string want = numpyName(io.dtype);
      if (!feeds.contains(io.name.c_str()))
        throw py::key_error("missing input " + describe(io) + "; the model's inputs are " + names);
      py::object value = feeds[io.name.c_str()];
      if (!py::isinstance<py::array>(value))
        throw py::type_error("input '" + io.name + "': expected a numpy.ndarray of " + want +
                             ", shape " + shapeText(io.shape) + "; got " +
                             std::string(py::str(value.get_type().attr("__name__"))));
      py::array a = value.cast<py::array>();
      std::string got = py::str(a.dtype());
      if (want.empty())
        throw py::type_error("input '" + io.name + "' is " + std::string(dtypeName(io.dtype)) +
                             ", which NumPy has no type for");
      if (got != want)
        throw py::type_error("input '" + io.name + "': dtype " + got + ", expected " + want +
                             " (convert it with x.astype(numpy." + want + "))");
      std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
      // A symbolic model takes any shape of the input's rank; the run checks it against the
      // bounds before anything runs.
      if (shape != io.shape && !(session_->symbolic() && shape.size() == io.shape.size()))
        throw py::value_error("input '" + io.name + "': shape " + shapeText(shape) + ", expected " +
                              shapeText(io.shape));
      shapes.push_back(shape);
      if (!(a.flags() & py::array::c_style))
        throw py::value_error("input '" + io.name +
                              "': not C-contiguous (a transposed or sliced view); tunec reads "
                              "arrays in place: pass numpy.ascontiguousarray(x)");
      if (!py::bool_(a.attr("flags").attr("aligned")))
        throw py::value_error("input '" + io.name +
                              "': not aligned to its element size; pass numpy.array(x)");
      in.push_back(a.data());
      keep.push_back(std::move(a));
    }
    py::dict result;
    std::vector<void*> out;
    for (const rt::IoSpec& io : session_->outputs) {
      py::array a(py::dtype(numpyName(io.dtype)), io.shape);
      out.push_back(a.mutable_data());
      result[io.name.c_str()] = a;
    }
    Status status;
    std::vector<std::vector<int64_t>> outShapes;
    {
      py::gil_scoped_release release;
      status = session_->symbolic() ? session_->runShaped(in.data(), shapes, out.data(), outShapes)
                                    : session_->run(in.data(), out.data());
    }
    check(status);
    // A symbolic output: dense at the run's shape at the start of its bound-sized buffer.
    for (size_t o = 0; o < outShapes.size(); ++o) {
      const rt::IoSpec& io = session_->outputs[o];
      py::array shaped(py::dtype(numpyName(io.dtype)), outShapes[o]);
      std::memcpy(shaped.mutable_data(), out[o], static_cast<size_t>(shaped.nbytes()));
      result[io.name.c_str()] = shaped;
    }
    return result;
  }

  /// Whole runs on random inputs in C++, the GIL released: what `tunec bench` measures.
  py::dict bench(int runs, int warmup) {
    if (runs < 1 || warmup < 0) throw py::value_error("bench: runs >= 1 and warmup >= 0");
    cli::RunBuffers buffers = cli::randomRunBuffers(*session_, 7);
    Expected<cli::LatencyStats> stats = Error("not run");
    {
      py::gil_scoped_release release;
      stats = cli::timeRuns(*session_, buffers, warmup, runs);
    }
    cli::LatencyStats s = unwrap(std::move(stats));
    py::dict d;
    d["median_ms"] = s.medianMs;
    d["p90_ms"] = s.p90Ms;
    d["min_ms"] = s.minMs;
    d["runs"] = runs;
    d["threads"] = threads_;
    return d;
  }

  std::string repr() const {
    return "<tunec.Model " + source_ + ": " + std::to_string(session_->inputs.size()) +
           " inputs, " + std::to_string(session_->outputs.size()) + " outputs, " +
           std::to_string(session_->steps.size()) + " steps, " + std::to_string(threads_) +
           " threads>";
  }

  const std::shared_ptr<cli::ModelSession>& session() const { return session_; }

private:
  std::shared_ptr<cli::ModelSession> session_;
  std::string source_;
  int threads_;
};

/// tunec.Generator: one sequence of a decoder's generation (rt::Generator), the caller choosing
/// each token from the logits append returns.
class Generator {
public:
  explicit Generator(const Model& model)
      : session_(model.session()), generator_(unwrap(cli::openGenerator(*session_))) {}

  /// The tokens (a sequence of ints or a 1-d integer array) appended to the context; returns the
  /// last one's logits, a new float32 array of the vocabulary's size.
  py::array_t<float> append(const py::object& ids) {
    std::vector<int64_t> tokens = tokenList(ids);
    const float* logits = nullptr;
    {
      py::gil_scoped_release release;
      logits = unwrap(generator_->append(tokens.data(), static_cast<int64_t>(tokens.size())));
    }
    py::array_t<float> out(generator_->vocab());
    std::memcpy(out.mutable_data(), logits, static_cast<size_t>(generator_->vocab()) * 4);
    return out;
  }

  /// Greedy generation: appends the prompt, then `tokens` times the token of the largest logit;
  /// returns the tokens chosen.
  std::vector<int64_t> greedy(const py::object& prompt, int64_t tokens) {
    if (tokens < 0) throw py::value_error("tokens must be >= 0, not " + std::to_string(tokens));
    const std::vector<int64_t> ids = tokenList(prompt);
    py::gil_scoped_release release;
    return unwrap(generator_->greedy(ids, tokens));
  }

  int64_t length() const { return generator_->length(); }
  int64_t capacity() const { return generator_->capacity(); }
  int64_t vocab() const { return generator_->vocab(); }
  bool inPlace() const { return generator_->inPlace(); }
  void reset() { generator_->reset(); }

private:
  static std::vector<int64_t> tokenList(const py::object& ids) {
    std::vector<int64_t> tokens;
    if (py::isinstance<py::array>(ids)) {
      auto a = py::array::ensure(ids);
      if (a.ndim() != 1 || a.dtype().kind() != 'i')
        throw py::type_error("token ids must be a 1-d integer array or a sequence of ints");
      auto v = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
      tokens.assign(v.data(), v.data() + v.size());
    } else {
      for (const auto& item : ids) {
        if (!py::isinstance<py::int_>(item))
          throw py::type_error("token ids must be ints, not " +
                               std::string(py::str(py::type::of(item))));
        tokens.push_back(item.cast<int64_t>());
      }
    }
    if (tokens.empty()) throw py::value_error("append needs at least one token id");
    return tokens;
  }

  std::shared_ptr<cli::ModelSession> session_; ///< keeps the model loaded
  std::unique_ptr<rt::Generator> generator_;
};

int threadsOr(std::optional<int> threads) {
  int t = threads.value_or(cli::defaultThreads());
  if (t < 1) throw py::value_error("threads must be at least 1, not " + std::to_string(t));
  return t;
}

Model compileModel(const std::string& onnx, std::optional<std::string> db,
                   const std::string& precision, std::optional<std::string> target,
                   std::optional<int> threads,
                   const std::map<std::string, std::vector<int64_t>>& shapes,
                   std::optional<std::string> output, const DimRanges& dims,
                   const DimBuckets& buckets) {
  auto parsed = driver::parsePrecision(precision);
  if (!parsed)
    throw py::value_error(parsed.error().message() + " (int8: quantize the model with 'tunec "
                                                     "quantize'; its kernels run dequantized)");
  cli::SessionOptions options;
  options.precision = *parsed;
  options.threads = threadsOr(threads);
  options.dbPath = db.value_or("");
  options.inputDims = inputDims(shapes, dims, buckets);
  if (target) {
    options.target = unwrap(readTargetFile(*target));
    if (cli::targetKey(options.target) != cli::targetKey(cli::thisMachine()) && !output)
      throw TunecError("target " + *target +
                       " is another machine: its code cannot run here; give output='model.so' "
                       "(or use tunec.compile_to_file)");
  }
  if (output) {
    unwrap(cli::compileToFile(onnx, *output, options));
    if (cli::targetKey(options.target) != cli::targetKey(cli::thisMachine()))
      throw TunecError("compiled " + *output + " for target " + *target +
                       "; it cannot be loaded on this machine (use tunec.compile_to_file)");
    return Model(unwrap(cli::openModel(*output, options)), *output, options.threads);
  }
  Model m(unwrap(cli::openModel(onnx, options)), onnx, options.threads);
  return m;
}

std::string compileToFile(const std::string& onnx, const std::string& output,
                          std::optional<std::string> db, std::optional<std::string> target,
                          std::optional<int> threads,
                          const std::map<std::string, std::vector<int64_t>>& shapes,
                          const DimRanges& dims, const DimBuckets& buckets) {
  cli::SessionOptions options;
  options.threads = threadsOr(threads);
  options.dbPath = db.value_or("");
  options.inputDims = inputDims(shapes, dims, buckets);
  if (target) options.target = unwrap(readTargetFile(*target));
  return unwrap(cli::compileToFile(onnx, output, options));
}

Model loadModel(const std::string& path, std::optional<int> threads) {
  cli::SessionOptions options;
  options.threads = threadsOr(threads);
  if (path.size() < 3 || path.compare(path.size() - 3, 3, ".so") != 0)
    throw py::value_error(path + ": tunec.load takes a compiled model.so (tunec.compile takes "
                                 "an ONNX model)");
  return Model(unwrap(cli::openModel(path, options)), path, options.threads);
}

std::atomic<bool> interrupted{false};
void onInterrupt(int) {
  interrupted.store(true);
}

/// A tuning job, as `tunec tune` runs it. Ctrl-C stops it after the running candidate, with
/// everything measured committed, then raises KeyboardInterrupt; a progress callable that
/// raises stops it the same way and its exception propagates.
py::dict tune(const std::vector<std::string>& models, const std::string& dbPath, int trials,
              std::optional<double> timeBudget, std::optional<int> threads,
              std::optional<py::function> progress, uint32_t seed,
              const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& worker,
              const std::string& precision, const DimRanges& dims, const DimBuckets& buckets,
              const std::map<std::string, std::map<int64_t, double>>& histogram) {
  if (models.empty()) throw py::value_error("tune: no model given");
  auto parsed = driver::parsePrecision(precision);
  if (!parsed) throw py::value_error(parsed.error().message());
  if (trials < 1) throw py::value_error("tune: trials must be at least 1");
  const Target& target = cli::thisMachine();
  int t = threads.value_or(target.cores);
  if (t < 1) throw py::value_error("threads must be at least 1");
  const InputDims given = inputDims(shapes, dims, buckets);
  std::optional<cli::LengthHistogram> lengths;
  if (histogram.size() > 1) throw py::value_error("histogram: give one symbol's lengths");
  for (const auto& [name, counts] : histogram) {
    auto range = given.ranges.find(name);
    if (range == given.ranges.end())
      throw py::value_error("histogram: '" + name + "' has no bounds: give them in dims");
    lengths = cli::LengthHistogram{name, {}, 0};
    for (const auto& [value, count] : counts) {
      if (value < range->second.first || value > range->second.second || !(count >= 0))
        throw py::value_error("histogram['" + name + "']: " + std::to_string(value) + ": " +
                              std::to_string(count) +
                              " is not a value within its bounds and a "
                              "count >= 0");
      lengths->counts[value] += count;
      lengths->total += count;
    }
    if (!(lengths->total > 0)) throw py::value_error("histogram: no runs");
  }
  auto found =
      unwrap(cli::modelTasks(models, given, target, t, *parsed, lengths ? &*lengths : nullptr));
  db::TuningDatabase database = unwrap(db::TuningDatabase::open(dbPath, true));
  tuner::TuneOptions o;
  o.target = target;
  o.trials = trials;
  o.timeBudgetSeconds = timeBudget.value_or(0);
  o.seed = seed;
  o.progress = false;
  o.workerArgv = {worker, "tune-worker"};
  // No progress lines here (progress=callable gets the numbers): no roof to measure.
  std::optional<py::error_already_set> callbackError;
  interrupted.store(false);
  if (progress)
    o.onBatch = [&](const tuner::TuneProgress& p) {
      py::gil_scoped_acquire gil;
      if (callbackError) return;
      try {
        py::dict d;
        d["trials"] = p.trials;
        d["budget"] = p.budget;
        d["task"] = p.task;
        d["task_trials"] = p.taskTrials;
        d["best_gflops"] = p.bestGflops;
        d["kernels_ms"] = p.kernelsMs;
        d["elapsed_s"] = p.elapsedSeconds;
        (*progress)(d);
      } catch (py::error_already_set& e) {
        callbackError = std::move(e);
        interrupted.store(true);
      }
    };
  auto previous = std::signal(SIGINT, onInterrupt);
  Expected<tuner::TuneSummary> summary = Error("not run");
  {
    py::gil_scoped_release release;
    summary = tuner::runTuningJob(found.tasks, database, o, interrupted);
  }
  std::signal(SIGINT, previous);
  if (callbackError) throw std::move(*callbackError);
  tuner::TuneSummary s = unwrap(std::move(summary));
  if (s.interrupted) {
    // Ctrl-C: everything measured is committed; the job resumes when run again.
    PyErr_SetString(PyExc_KeyboardInterrupt,
                    ("tuning stopped after " + std::to_string(s.trials) +
                     " trials; every measurement is in " + dbPath + ", run it again to resume")
                        .c_str());
    throw py::error_already_set();
  }
  py::dict d;
  d["trials"] = s.trials;
  d["errors"] = s.errors;
  d["seconds"] = s.seconds;
  d["recorded_before"] = s.recordedBefore;
  d["heavy_kernels"] = found.heavyKernels;
  py::list tasks;
  for (const tuner::TaskOutcome& o2 : s.tasks) {
    py::dict td;
    td["label"] = o2.label;
    td["trials"] = o2.trials;
    td["best_gflops"] = o2.bestGflops;
    td["default_gflops"] = o2.defaultGflops;
    tasks.append(td);
  }
  d["tasks"] = tasks;
  return d;
}

class Database {
public:
  explicit Database(const std::string& path, bool create)
      : path_(path),
        db_(std::make_shared<db::TuningDatabase>(unwrap(db::TuningDatabase::open(path, create)))) {}

  py::dict stats() {
    db::DatabaseStats s = unwrap(db_->stats());
    py::dict d;
    d["workloads"] = s.workloads;
    d["records"] = s.records;
    d["targets"] = s.targets;
    py::list per;
    for (const db::WorkloadStats& w : s.perWorkload) {
      py::dict e;
      e["key"] = w.key;
      e["template"] = w.templateName;
      e["records"] = w.records;
      e["best_gflops"] = w.bestGflops;
      per.append(e);
    }
    d["per_workload"] = per;
    return d;
  }

  /// The best record of a workload for this machine (a dict, as `tunec db best` prints it), or
  /// None.
  py::object best(const std::string& key, bool compatible) {
    cli::BestLookup found = unwrap(
        cli::lookUpBest(*db_, key, db::TargetInfo::fromTarget(cli::thisMachine()), compatible));
    if (!found.best) return py::none();
    return py::module_::import("json").attr("loads")(found.best->record.toJson().dump());
  }

  int64_t exportTo(const std::string& path, bool bestOnly, const std::string& target) {
    std::string text;
    check(writeFileAtomically(path, [&](std::ostream& os) -> Status {
      std::ostringstream buffer;
      TUNEC_TRY(db_->exportJsonl(buffer, target, bestOnly));
      text = buffer.str();
      os << text;
      return Status();
    }));
    return std::count(text.begin(), text.end(), '\n');
  }

  py::dict importFrom(const std::string& path) {
    std::ifstream file(path);
    if (!file) throw TunecError(path + ": cannot open file");
    db::ImportReport r = unwrap(db_->importJsonl(file, cli::validateRecord));
    py::dict d;
    d["imported"] = r.imported;
    d["duplicates"] = r.duplicates;
    d["rejected"] = r.rejected;
    d["lines"] = r.lines;
    return d;
  }

  py::list merge(const std::vector<std::string>& inputs) {
    py::list l;
    for (const db::MergeInput& in :
         unwrap(db::mergeDatabases(path_, inputs, cli::validateRecord))) {
      py::dict d;
      d["path"] = in.path;
      d["skipped"] = in.skipped;
      d["imported"] = in.report.imported;
      d["duplicates"] = in.report.duplicates;
      d["rejected"] = in.report.rejected;
      l.append(d);
    }
    return l;
  }

  std::vector<std::string> verify() { return unwrap(db_->verify(cli::validateRecord)).problems; }

  const std::string& path() const { return path_; }

private:
  std::string path_;
  std::shared_ptr<db::TuningDatabase> db_;
};

} // namespace

} // namespace tunec::python

PYBIND11_MODULE(_tunec, m) {
  using namespace tunec::python;
  m.doc() = "tunec's native module; import tunec instead";
  py::register_exception<TunecError>(m, "Error", PyExc_RuntimeError);
  py::class_<Model>(m, "Model")
      .def_property_readonly("inputs", &Model::inputs)
      .def_property_readonly("outputs", &Model::outputs)
      .def_property_readonly("report", &Model::report)
      .def("run", &Model::run, py::arg("feeds"))
      .def("bench", &Model::bench, py::arg("runs") = 50, py::arg("warmup") = 5)
      .def("__repr__", &Model::repr);
  py::class_<Generator>(m, "Generator")
      .def(py::init<const Model&>(), py::arg("model"))
      .def("append", &Generator::append, py::arg("ids"))
      .def("greedy", &Generator::greedy, py::arg("prompt"), py::arg("tokens"))
      .def("reset", &Generator::reset)
      .def_property_readonly("length", &Generator::length)
      .def_property_readonly("capacity", &Generator::capacity)
      .def_property_readonly("vocab", &Generator::vocab)
      .def_property_readonly("in_place", &Generator::inPlace);
  m.def("compile", &compileModel, py::arg("onnx_path"), py::arg("db") = py::none(),
        py::arg("precision") = "fp32", py::arg("target") = py::none(),
        py::arg("threads") = py::none(),
        py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
        py::arg("output") = py::none(), py::arg("dims") = DimRanges{},
        py::arg("buckets") = DimBuckets{});
  m.def("compile_to_file", &compileToFile, py::arg("onnx_path"), py::arg("output"),
        py::arg("db") = py::none(), py::arg("target") = py::none(), py::arg("threads") = py::none(),
        py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>{},
        py::arg("dims") = DimRanges{}, py::arg("buckets") = DimBuckets{});
  m.def("load", &loadModel, py::arg("path"), py::arg("threads") = py::none());
  m.def("tune", &tune, py::arg("models"), py::arg("db"), py::arg("trials"), py::arg("time_budget"),
        py::arg("threads"), py::arg("progress"), py::arg("seed"), py::arg("input_shapes"),
        py::arg("worker"), py::arg("precision") = "fp32", py::arg("dims") = DimRanges{},
        py::arg("buckets") = DimBuckets{},
        py::arg("histogram") = std::map<std::string, std::map<int64_t, double>>{});
  py::class_<Database>(m, "Database")
      .def(py::init<const std::string&, bool>(), py::arg("path"), py::arg("create") = true)
      .def_property_readonly("path", &Database::path)
      .def("stats", &Database::stats)
      .def("best", &Database::best, py::arg("workload_key"), py::arg("compatible") = false)
      .def("export", &Database::exportTo, py::arg("path"), py::arg("best_only") = false,
           py::arg("target") = "")
      .def("import_", &Database::importFrom, py::arg("path"))
      .def("merge", &Database::merge, py::arg("inputs"))
      .def("verify", &Database::verify);
}
