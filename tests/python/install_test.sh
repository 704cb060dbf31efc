#!/usr/bin/env bash
# `cmake --install` into a temporary prefix: the installed tunec runs, and the installed Python
# package imports, finds the installed tunec for its tuner, compiles and runs the example.
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
"$prefix/bin/tunec" target > /dev/null
/usr/bin/python3 -c 'import numpy' 2>/dev/null ||
  { echo "SKIP: the installed package was not imported: it needs python3-numpy"; exit 77; }
cd "$prefix"
PYTHONPATH=$prefix/lib/python3/dist-packages /usr/bin/python3 - "$prefix" "$src" <<'PY'
import sys
import numpy as np
import tunec
prefix, src = sys.argv[1], sys.argv[2]
assert tunec.__file__.startswith(prefix), tunec.__file__
assert tunec._worker() == prefix + "/bin/tunec", tunec._worker()
model = tunec.compile(src + "/examples/tiny_cnn/model.onnx")
y = model.run({"x": np.load(src + "/examples/tiny_cnn/x.npy")})["y"]
expected = np.load(src + "/examples/tiny_cnn/expected_y.npy")
assert np.linalg.norm(y - expected) / np.linalg.norm(expected) < 1e-5
print("installed package: ok")
PY
