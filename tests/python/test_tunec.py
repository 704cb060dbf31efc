"""The Python package against the CLI and the reference outputs, on the bundled example."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tunec

SOURCE = Path(os.environ["TUNEC_SOURCE_DIR"])
TUNEC = os.environ["TUNEC_BINARY"]
EXAMPLE = SOURCE / "examples" / "tiny_cnn"
MODEL = str(EXAMPLE / "model.onnx")


@pytest.fixture(scope="module")
def model():
    return tunec.compile(MODEL, threads=2)


@pytest.fixture
def x():
    return np.load(EXAMPLE / "x.npy")


def test_compile_run_matches_pytorch_and_the_cli(model, x, tmp_path):
    y = model.run({"x": x})["y"]
    assert y.dtype == np.float32 and y.shape == (1, 10)
    expected = np.load(EXAMPLE / "expected_y.npy")
    assert np.linalg.norm(y - expected) / np.linalg.norm(expected) < 1e-5
    # The CLI on the same input: the same bytes.
    np.save(tmp_path / "x.npy", x)
    subprocess.run([TUNEC, "run", MODEL, "--input", f"x={tmp_path / 'x.npy'}", "--output",
                    str(tmp_path / "out"), "--threads", "2"], check=True, capture_output=True)
    assert np.array_equal(np.load(tmp_path / "out" / "y.npy"), y)


def test_inputs_and_outputs(model):
    assert model.inputs == [{"name": "x", "shape": (1, 3, 32, 32), "bounds": (1, 3, 32, 32),
                             "dtype": "float32"}]
    assert model.outputs == [{"name": "y", "shape": (1, 10), "bounds": (1, 10),
                              "dtype": "float32"}]
    assert "steps" in repr(model)


def test_one_model_runs_every_shape_within_its_dims(tmp_path):
    dynamic = SOURCE / "tests" / "fixtures" / "mlp_dynamic.onnx"  # x: [batch, sequence, 16]
    model = tunec.compile(dynamic, threads=1, dims={"batch": (1, 4), "sequence": (1, 64)},
                          output=tmp_path / "dynamic.so")
    assert model.inputs == [{"name": "x", "shape": ("batch", "sequence", 16),
                             "bounds": (4, 64, 16), "dtype": "float32"}]
    rng = np.random.default_rng(5)
    for batch, sequence in [(1, 1), (2, 17), (4, 64), (3, 33)]:
        x = rng.standard_normal((batch, sequence, 16)).astype(np.float32)
        y = model.run({"x": x})["y"]
        assert y.shape == (batch, sequence, 32)
        static = tunec.compile(dynamic, threads=1, input_shapes={"x": (batch, sequence, 16)})
        want = static.run({"x": x})["y"]
        assert np.linalg.norm(y - want) / np.linalg.norm(want) < 1e-5
    # Loaded from the model.so: the same.
    loaded = tunec.load(tmp_path / "dynamic.so", threads=1)
    assert np.array_equal(loaded.run({"x": x})["y"], y)
    with pytest.raises(tunec.Error, match=r"dimension 1 of input 'x' is 65, outside the bounds "
                                          r"of 'sequence' \(1..64\)"):
        model.run({"x": np.zeros((1, 65, 16), np.float32)})
    with pytest.raises(ValueError, match=r"shape \(1, 16\), expected \(4, 64, 16\)"):
        model.run({"x": np.zeros((1, 16), np.float32)})
    with pytest.raises(ValueError, match="the bounds must satisfy 0 <= min <= max"):
        tunec.compile(dynamic, dims={"batch": (5, 4), "sequence": (1, 64)})


def test_a_dynamic_bert_compiles_in_process_and_its_memory_stays_flat():
    """The BERT fixture's matmuls end in a LayerNorm that their kernels call into the runtime
    for (the JIT binds it: a Python process exports no symbols); PyTorch's output at two shapes;
    then 2,000 runs of random shapes, the resident set flat (the arena is the bounds' plan)."""
    bert = SOURCE / "tests" / "fixtures" / "bert_dynamic"
    model = tunec.compile(bert / "model.onnx", threads=1, dims={"batch": (1, 4), "sequence": (1, 32)})
    for tag in ("1x5", "3x29"):
        feeds = {name: np.load(bert / f"{short}_{tag}.npy") for name, short in
                 [("input_ids", "ids"), ("attention_mask", "mask"), ("token_type_ids", "types")]}
        got = model.run(feeds)["last_hidden_state"]
        want = np.load(bert / f"expected_{tag}.npy")
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-4

    def resident_mb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))

    rng = np.random.default_rng(1)
    for run in range(2000):
        b, s = int(rng.integers(1, 5)), int(rng.integers(1, 33))
        mask = (np.arange(s)[None, :] < rng.integers(1, s + 1, (b, 1))).astype(np.int64)
        model.run({"input_ids": rng.integers(0, 50, (b, s)), "attention_mask": mask,
                   "token_type_ids": rng.integers(0, 2, (b, s))})
        if run == 199:
            base = resident_mb()
    assert resident_mb() - base < 4.0


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    with pytest.raises(tunec.Error, match="not a regular file"):
        tunec.compile(fifo)
    so = tmp_path / "model.so"
    os.mkfifo(so)
    with pytest.raises(tunec.Error, match="not a regular file"):
        tunec.load(so)


def test_a_path_with_a_nul_and_a_time_budget_out_of_range_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="contains a NUL character"):
        tunec.compile(MODEL + "\0.ignored")
    with pytest.raises(ValueError, match="contains a NUL character"):
        tunec.load("model.so\0")
    for budget in (float("nan"), -1, float("inf"), 0):
        with pytest.raises(ValueError, match="time_budget must be a positive number of seconds"):
            tunec.tune(MODEL, db=tmp_path / "t.db", trials=1, time_budget=budget)


def test_load_a_compiled_library(model, x, tmp_path):
    so = tmp_path / "m.so"
    report = tunec.compile_to_file(MODEL, so, threads=2)
    assert "heavy kernels" in report
    loaded = tunec.load(so, threads=2)
    assert np.array_equal(loaded.run({"x": x})["y"], model.run({"x": x})["y"])
    with pytest.raises(ValueError, match="takes a compiled model.so"):
        tunec.load(MODEL)
    (tmp_path / "bad.so").write_bytes(b"not an elf")
    with pytest.raises(tunec.Error, match="bad.so"):
        tunec.load(tmp_path / "bad.so")


@pytest.mark.parametrize("make, error, message", [
    (lambda x: {"x": x.astype(np.float64)}, TypeError,
     r"input 'x': dtype float64, expected float32 \(convert it with x.astype\(numpy.float32\)\)"),
    (lambda x: {"x": x[:, :, :16]}, ValueError,
     r"input 'x': shape \(1, 3, 16, 32\), expected \(1, 3, 32, 32\)"),
    (lambda x: {"x": np.asfortranarray(x)}, ValueError,
     r"input 'x': not C-contiguous .* numpy.ascontiguousarray"),
    (lambda x: {"x": x.transpose(0, 1, 3, 2)}, ValueError, r"input 'x': not C-contiguous"),
    (lambda x: {}, KeyError, r"missing input 'x' \(float32, shape \(1, 3, 32, 32\)\)"),
    (lambda x: {"x": x, "z": x}, KeyError, r"unknown input 'z'; the model's inputs are 'x'"),
    (lambda x: {"x": x.tolist()}, TypeError, r"input 'x': expected a numpy.ndarray of float32"),
])
def test_wrong_inputs_raise_naming_the_input(model, x, make, error, message):
    with pytest.raises(error, match=message):
        model.run(make(x))


def test_unaligned_input_raises(model, x):
    raw = np.zeros(x.nbytes + 1, dtype=np.uint8)
    unaligned = raw[1:].view(np.float32).reshape(x.shape)
    assert not unaligned.flags.aligned
    with pytest.raises(ValueError, match="not aligned"):
        model.run({"x": unaligned})


def test_four_threads_at_once_give_identical_results(model):
    rng = np.random.default_rng(3)
    inputs = [rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32) for _ in range(8)]
    alone = [model.run({"x": a})["y"] for a in inputs]

    def work(i):
        return [model.run({"x": inputs[(i + j) % 8]})["y"] for j in range(40)]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, range(4)))
    for i, got in enumerate(results):
        for j, y in enumerate(got):
            assert np.array_equal(y, alone[(i + j) % 8])


def test_run_releases_the_gil(model):
    # While one thread runs the model in C++, another Python thread keeps running.
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    t = threading.Thread(target=tick)
    t.start()
    model.bench(runs=400, warmup=0)
    done.set()
    t.join()
    assert len(ticks) > 5


def test_bench(model):
    stats = model.bench(runs=10, warmup=1)
    assert stats["runs"] == 10 and 0 < stats["min_ms"] <= stats["median_ms"] <= stats["p90_ms"]


def test_bf16_precision_runs_in_bf16_or_in_fp32_where_the_machine_has_no_bf16(tmp_path):
    x = np.random.default_rng(3).uniform(-1, 1, size=(1, 3, 32, 32)).astype(np.float32)
    want = tunec.compile(MODEL).run({"x": x})["y"]
    got = tunec.compile(MODEL, precision="bf16").run({"x": x})["y"]
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    with open("/proc/cpuinfo") as f:
        bf16 = " avx512_bf16" in f.read()
    if not bf16:  # every kernel in fp32 (the compile report says why): the fp32 result
        assert rel == 0
        pytest.skip("this machine has no avx512_bf16: --precision bf16 compiled in fp32")
    assert 0 < rel < 2e-2  # its Gemm ran in bf16: close to fp32, not equal
    db = str(tmp_path / "bf16.db")
    summary = tunec.tune(MODEL, db=db, trials=8, precision="bf16")
    assert summary["trials"] >= 4
    tuned = tunec.compile(MODEL, db=db, precision="bf16")
    assert np.linalg.norm(tuned.run({"x": x})["y"] - want) / np.linalg.norm(want) < 2e-2


def test_compile_errors():
    with pytest.raises(tunec.Error, match="nothere.onnx: cannot open file"):
        tunec.compile("nothere.onnx")
    with pytest.raises(ValueError, match="precision 'int8' is not one of fp32, bf16"):
        tunec.compile(MODEL, precision="int8")
    with pytest.raises(ValueError, match="threads must be at least 1"):
        tunec.compile(MODEL, threads=0)


def test_tune_progress_resume_and_database(tmp_path, x):
    db = tmp_path / "t.db"
    events = []
    summary = tunec.tune(MODEL, db=db, trials=10, progress=events.append)
    assert summary["trials"] == 10 and summary["recorded_before"] == 0
    assert events and events[-1]["trials"] == 10 and events[-1]["best_gflops"] > 0
    again = tunec.tune(MODEL, db=db, trials=4)
    assert again["recorded_before"] == 10
    d = tunec.Database(db)
    stats = d.stats()
    assert stats["records"] == 14 and stats["targets"] == 1
    assert d.verify() == []
    key = stats["per_workload"][0]["key"]
    assert d.best(key)["result"]["status"] == "ok"
    assert d.best("0000000000000000") is None
    assert d.export(tmp_path / "r.jsonl") == 14
    other = tunec.Database(tmp_path / "o.db")
    report = other.import_(tmp_path / "r.jsonl")
    assert report["imported"] == 14 and report["rejected"] == []
    merged = tunec.Database(tmp_path / "m.db")
    assert [m["imported"] for m in merged.merge([str(db), str(tmp_path / "o.db")])] == [14, 0]
    # A record edited to an impossible config is rejected with its line number.
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    bad = json.loads(lines[0])
    bad["config"] = {"nonsense": 1}
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    rejected = tunec.Database(tmp_path / "b.db").import_(tmp_path / "bad.jsonl")["rejected"]
    assert len(rejected) == 1 and rejected[0].startswith("line 1:")
    # The tuned database compiles a model that still matches.
    tuned = tunec.compile(MODEL, db=db, threads=2)
    expected = np.load(EXAMPLE / "expected_y.npy")
    y = tuned.run({"x": x})["y"]
    assert np.linalg.norm(y - expected) / np.linalg.norm(expected) < 1e-5
    with pytest.raises(tunec.Error, match="not a tunec tuning database"):
        (tmp_path / "junk.db").write_bytes(os.urandom(4096))
        tunec.Database(tmp_path / "junk.db")


def test_a_progress_callable_that_raises_stops_the_job(tmp_path):
    def stop(progress):
        raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        tunec.tune(MODEL, db=tmp_path / "s.db", trials=200, progress=stop)
    # The batch measured before the callable raised is kept.
    assert 0 < tunec.Database(tmp_path / "s.db").stats()["records"] < 200


def test_ctrl_c_stops_tuning_cleanly(tmp_path):
    script = textwrap.dedent(f"""
        import sys, tunec
        def progress(p):
            print("batch", p["trials"], flush=True)
        try:
            tunec.tune({MODEL!r}, db={str(tmp_path / "c.db")!r}, trials=5000, progress=progress)
        except KeyboardInterrupt as e:
            print("interrupted:", e, flush=True)
            sys.exit(3)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env=os.environ)
    first = proc.stdout.readline()
    assert first.startswith("batch")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 3, out
    assert "every measurement is in" in out
    records = tunec.Database(tmp_path / "c.db").stats()["records"]
    assert 0 < records < 5000


def test_the_example_in_docs_python_md_runs(tmp_path):
    text = (SOURCE / "docs" / "python.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "examples").symlink_to(SOURCE / "examples")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, env=os.environ, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "matches PyTorch" in result.stdout


def _decoder_feed(ids, past, past_len):
    n = ids.shape[1]
    feed = {"input_ids": ids.astype(np.int64),
            "attention_mask": np.ones((1, past_len + n), np.int64),
            "position_ids": np.arange(past_len, past_len + n, dtype=np.int64)[None, :]}
    feed.update(past)
    return feed


def test_a_llama_style_decoder_with_past_kv_generates_pytorchs_tokens():
    """tests/fixtures/decoder_tiny: RMSNorm, rotary embeddings, grouped-query attention over the
    past K/V, HuggingFace's causal mask built from the 2-d attention mask, SwiGLU; exported with
    dynamic sequence and past_sequence axes. One compile serves the prefill (past 0) and every
    decode step; total_sequence is found to be past_sequence + sequence."""
    fixture = SOURCE / "tests" / "fixtures" / "decoder_tiny"
    model = tunec.compile(fixture / "model.onnx", threads=1,
                          dims={"batch": (1, 1), "sequence": (1, 32), "past_sequence": (0, 64)})
    kv = [i for i in model.inputs if i["name"].startswith("past_key_values")]
    assert kv[0]["shape"] == (1, 2, "past_sequence", 16)
    past = {i["name"]: np.zeros((1, 2, 0, 16), np.float32) for i in kv}
    ids, past_len, tokens = np.load(fixture / "prompt.npy"), 0, []
    for step in range(8):
        y = model.run(_decoder_feed(ids, past, past_len))
        if step == 0:
            want = np.load(fixture / "logits_prefill.npy")
            assert np.linalg.norm(y["logits"] - want) / np.linalg.norm(want) < 1e-4
        past = {k: y[k.replace("past_key_values", "present")] for k in past}
        past_len += ids.shape[1]
        ids = y["logits"][:, -1:, :].argmax(-1)
        tokens.append(int(ids[0, 0]))
    assert tokens == list(np.load(fixture / "tokens.npy"))
    # At, between and across the matmuls' bucket edges (16, 24, 32) and with a past: as a static
    # compile of that shape computes it.
    rng = np.random.default_rng(3)
    for n, p in [(16, 0), (17, 15), (1, 33), (24, 40), (32, 64)]:
        ids = rng.integers(0, 256, (1, n))
        past = {i["name"]: rng.standard_normal((1, 2, p, 16)).astype(np.float32) for i in kv}
        feed = _decoder_feed(ids, past, p)
        static = tunec.compile(fixture / "model.onnx", threads=1,
                               input_shapes={k: v.shape for k, v in feed.items()})
        got, want = model.run(feed), static.run(feed)
        assert got["logits"].shape == (1, n, 256)
        assert got["present.1.value"].shape == (1, 2, p + n, 16)
        for name in want:
            err = np.linalg.norm(got[name] - want[name]) / np.linalg.norm(want[name])
            assert err < 1e-5, (n, p, name, err)
    feed["attention_mask"] = np.ones((1, 3), np.int64)
    with pytest.raises(tunec.Error, match="dimension 1 of input 'attention_mask' is 3, the model "
                                          "takes 96"):
        model.run(feed)


def test_the_generator_keeps_the_k_v_caches_in_place_and_generates_pytorchs_tokens(tmp_path):
    """tunec.Generator on the decoder fixture, compiled in this process and as a model.so: one
    buffer per K/V cache (in_place), the 5-token prompt prefilled in runs of at most the sequence
    bound (4), PyTorch's greedy tokens; each token's logits as Model.run computes them on the same
    context with dense pasts; a context past the bound is an error and the generator stays usable.
    """
    fixture = SOURCE / "tests" / "fixtures" / "decoder_tiny"
    dims = {"batch": (1, 1), "sequence": (1, 4), "past_sequence": (0, 24)}
    model = tunec.compile(fixture / "model.onnx", threads=1, dims=dims)
    assert "K/V caches kept in place: 4 (capacity 28 positions" in model.report
    report = tunec.compile_to_file(fixture / "model.onnx", tmp_path / "dec.so", threads=1,
                                   dims=dims)
    assert "K/V caches kept in place: 4" in report
    prompt = np.load(fixture / "prompt.npy")[0]
    want = [int(t) for t in np.load(fixture / "tokens.npy")]
    for m in (model, tunec.load(tmp_path / "dec.so", threads=1)):
        gen = tunec.Generator(m)
        assert gen.in_place and gen.vocab == 256 and gen.capacity == 25
        assert gen.greedy(prompt, 8) == want
        assert gen.length == 5 + 7
        # Token by token against dense runs of the model (the past as arrays, the presents read
        # back): the prompt in runs of 4 and 1, then each token chosen.
        gen.reset()
        kv = [i["name"] for i in m.inputs if i["name"].startswith("past_key_values")]
        past, past_len = {k: np.zeros((1, 2, 0, 16), np.float32) for k in kv}, 0
        chunks = [prompt[:4], prompt[4:]] + [np.array([t]) for t in want[:6]]
        for i, chunk in enumerate(chunks):
            y = m.run(_decoder_feed(chunk[None, :], past, past_len))
            past = {k: y[k.replace("past_key_values", "present")] for k in past}
            past_len += len(chunk)
            dense = y["logits"][0, -1]
            if i >= 1:  # the generator's first append is the whole prompt
                got = gen.append(prompt if i == 1 else chunk)
                assert got.shape == (256,) and got.dtype == np.float32
                err = np.linalg.norm(got - dense) / np.linalg.norm(dense)
                assert err < 1e-5, (i, err)
        ref = np.load(fixture / "logits_prefill.npy")[0, -1]
        gen.reset()
        first = gen.append(prompt)
        assert np.linalg.norm(first - ref) / np.linalg.norm(ref) < 1e-4
        while gen.length < gen.capacity:
            gen.append([int(first.argmax())])
        with pytest.raises(tunec.Error, match="the context holds 25 tokens and 1 more do not fit: "
                                              "the model was compiled for a past of at most 24"):
            gen.append([1])
        assert gen.length == 25
        gen.reset()
        assert gen.greedy(prompt, 3) == want[:3]
    with pytest.raises(TypeError, match="token ids must be"):
        tunec.Generator(model).append(["a"])
    with pytest.raises(tunec.Error, match="no int64 \\[batch, sequence\\] input 'input_ids'"):
        tunec.Generator(tunec.compile(SOURCE / "examples" / "tiny_cnn" / "model.onnx"))


def test_dims_take_size_buckets():
    """dims={"sequence": (1, 16, [4, 8])} gives the buckets as --buckets does; edges that do not
    ascend are a ValueError naming them."""
    fixture = SOURCE / "tests" / "fixtures" / "decoder_tiny" / "model.onnx"
    dims = {"batch": (1, 1), "sequence": (1, 16, [4, 8]), "past_sequence": (0, 32)}
    model = tunec.compile(fixture, threads=1, dims=dims)
    for bucket in ("1..4", "5..8", "9..16"):
        assert f"'/lm_head/MatMul' 1x(sequence in {bucket})x256x64" in model.report
    dims["sequence"] = (1, 16, [8, 4])
    with pytest.raises(ValueError, match="the edges must ascend"):
        tunec.compile(fixture, threads=1, dims=dims)
    with pytest.raises(ValueError, match="must be \\(min, max\\) or \\(min, max, \\[bucket edges\\]\\)"):
        tunec.compile(fixture, threads=1, dims={"sequence": (1,)})
