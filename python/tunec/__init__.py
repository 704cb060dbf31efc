"""tunec from Python: compile an ONNX model for this CPU, run it on NumPy arrays, tune it, and
share the tuning records.

    import numpy as np, tunec
    tunec.tune("model.onnx", db="tuning.db", trials=200)          # measure on this machine
    model = tunec.compile("model.onnx", db="tuning.db")           # JIT-compile in this process
    y = model.run({"x": np.random.rand(1, 3, 224, 224).astype(np.float32)})["y"]
    print(model.bench(runs=50))                                   # {'median_ms': ..., ...}

A decoder exported with past/present K/V, compiled with --dim bounds for its lengths, generates
with tunec.Generator (the K/V caches kept in place: nothing of the past copied per token):

    gen = tunec.Generator(model)
    logits = gen.append(prompt_ids)                 # the prompt's prefill; the last token's logits
    logits = gen.append([int(logits.argmax())])     # one token (choose it as you like)
    ids = tunec.Generator(model).greedy(prompt_ids, 64)

Errors are tunec.Error (a RuntimeError) with the CLI's messages; an input of the wrong shape,
dtype or memory order raises ValueError or TypeError naming it, an unknown or missing input
KeyError. Nothing is copied or converted behind your back.
"""
import os
import shutil

# XGBoost's OpenMP threads (the tuner's cost model) spin while idle unless told not to; this must
# be in the environment before the native module loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from . import _tunec  # noqa: E402
from ._tunec import Error, Generator, Model  # noqa: E402,F401

try:
    from ._paths import TUNEC_BINARY as _BUILT_BINARY
except ImportError:  # pragma: no cover
    _BUILT_BINARY = ""

__all__ = ["compile", "compile_to_file", "load", "tune", "Database", "Model", "Generator",
           "Error"]


def compile(onnx_path, db=None, precision="fp32", target=None, threads=None, input_shapes=None,
            output=None, dims=None):
    """Compiles an ONNX model for this machine in this process and returns a Model.

    db: a tuning database (its best records for this machine; default: the analytical configs).
    precision: "fp32", or "bf16" (MatMul/Gemm layers with constant weights in bf16, f32
    accumulation; needs avx512_bf16, else tunec.Error says what the machine lacks).
    target: a target file ('tunec target --json')
    of this machine. threads: the most threads a run uses (default: the CPUs this process may
    use). input_shapes: {"x": (1, 3, 224, 224)} fixes dynamic inputs (a static compile). dims:
    {"batch": (1, 8), "sequence": (1, 512)} bounds the model's dynamic axes instead: one model
    for every shape within them (Model.run takes arrays of any such shape); a third element
    gives a symbol's size buckets, (1, 512, [16, 32, 64, 128, 256, 512]), as --buckets does. output: also write
    the compiled model.so there (and return it loaded).
    """
    return _tunec.compile(_path(onnx_path), None if db is None else _path(db), precision,
                          None if target is None else _path(target), threads,
                          _shapes(input_shapes), None if output is None else _path(output),
                          _dims(dims), _buckets(dims))


def compile_to_file(onnx_path, output, db=None, target=None, threads=None, input_shapes=None,
                    dims=None):
    """Compiles to model.so without loading it (for another machine too: target=its file).
    Returns the compile report."""
    return _tunec.compile_to_file(_path(onnx_path), _path(output),
                                  None if db is None else _path(db),
                                  None if target is None else _path(target), threads,
                                  _shapes(input_shapes), _dims(dims), _buckets(dims))


def load(path, threads=None):
    """Loads a compiled model.so (the runtime only, no compiler)."""
    return _tunec.load(_path(path), threads)


def tune(onnx_path, db="tuning.db", trials=1000, time_budget=None, threads=None, progress=None,
         seed=1, input_shapes=None, precision="fp32", dims=None, histogram=None):
    """Tunes the model's heavy kernels on this machine into the database `db`.

    onnx_path: a path or a list of paths (one task list). trials: configs to measure.
    precision: the kernels of compile(..., precision=...) to tune ("fp32" or "bf16").
    dims: the bounds of the dynamic axes, as compile takes them: every size bucket is tuned.
    histogram: {"sequence": {length: count, ...}} (or a list of the served lengths): each size
    bucket's kernels weigh as the share of the runs in their bucket (`tune --histogram`).
    time_budget: seconds. progress: called with a dict after every batch (trials, budget, task,
    best_gflops, kernels_ms, elapsed_s); if it raises, the job stops and the exception
    propagates. Ctrl-C stops after the running candidate with everything measured saved and
    raises KeyboardInterrupt; running the same call again resumes. Returns a summary dict.
    """
    models = [_path(onnx_path)] if isinstance(onnx_path, (str, os.PathLike)) else \
        [_path(p) for p in onnx_path]
    return _tunec.tune(models, _path(db), trials, _seconds(time_budget, "time_budget"), threads,
                       progress, seed,
                       _shapes(input_shapes), _worker(), precision, _dims(dims),
                       _buckets(dims), _histogram(histogram))


class Database:
    """A tuning database (SQLite): the records `tune` writes and `compile` reads.

    Database(path, create=True): opens it (creates it unless create=False); a file that is not a
    tunec database raises tunec.Error and is left as it is.
    """

    def __init__(self, path, create=True):
        self._db = _tunec.Database(_path(path), create)

    @property
    def path(self):
        return self._db.path

    def stats(self):
        """{"workloads", "records", "targets", "per_workload": [{"key", "template", "records",
        "best_gflops"}]}"""
        return self._db.stats()

    def best(self, workload_key, compatible=False):
        """The best record of a workload for this machine, as a dict, or None; compatible: also
        records of other machines with the same ISA features."""
        return self._db.best(workload_key, compatible)

    def export(self, path, best_only=False, target=""):
        """Writes one JSON record per line (written whole or not at all); returns the count."""
        return self._db.export(_path(path), best_only, target)

    def import_(self, path):
        """Validates and imports a JSONL file: {"imported", "duplicates", "rejected", "lines"};
        each rejected line is "line N: reason"."""
        return self._db.import_(_path(path))

    def merge(self, inputs):
        """Merges other databases into this one (the fastest time per config is kept); returns
        one dict per input."""
        return self._db.merge([_path(p) for p in inputs])

    def verify(self):
        """Integrity, schema and every record's config: a list of problems (empty: sound)."""
        return self._db.verify()

    def __repr__(self):
        return f"<tunec.Database {self.path}>"


def _path(path):
    """os.fspath, refusing a NUL (the native layer would cut the path there: another file)."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\0" in text:
        raise ValueError(f"path {text!r} contains a NUL character")
    return text


def _seconds(value, name):
    """A positive finite number of seconds, or None, as the CLI takes it."""
    if value is None:
        return None
    seconds = float(value)
    if not (seconds > 0 and seconds < float("inf")):
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return seconds


def _dims(dims):
    out = {}
    for name, bounds in (dims or {}).items():
        if len(bounds) not in (2, 3):
            raise ValueError(f"dims['{name}'] must be (min, max) or (min, max, [bucket edges])")
        out[str(name)] = (int(bounds[0]), int(bounds[1]))
    return out


def _buckets(dims):
    """The size buckets of dims={"sequence": (1, 512, [16, 32, 64, 128, 256, 512])}."""
    return {str(name): [int(e) for e in bounds[2]] for name, bounds in (dims or {}).items()
            if len(bounds) == 3}


def _histogram(histogram):
    out = {}
    for name, lengths in (histogram or {}).items():
        if isinstance(lengths, dict):
            out[str(name)] = {int(k): float(v) for k, v in lengths.items()}
        else:
            counts = {}
            for length in lengths:
                counts[int(length)] = counts.get(int(length), 0.0) + 1.0
            out[str(name)] = counts
    return out


def _shapes(input_shapes):
    return {name: [int(d) for d in dims] for name, dims in (input_shapes or {}).items()}


def _worker():
    """The tunec binary that runs candidates in a separate process ($TUNEC_BINARY, then the
    build's or install's own, then tunec on PATH)."""
    for candidate in (os.environ.get("TUNEC_BINARY"), _BUILT_BINARY, shutil.which("tunec")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise Error("cannot find the tunec binary for the tuner's measurement worker: set "
                "TUNEC_BINARY to its path")
