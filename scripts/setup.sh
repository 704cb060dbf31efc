#!/usr/bin/env bash
# Installs tunec's Debian packages (idempotent, non-interactive), builds it in build/, and
# optionally runs the bundled example or the whole test suite.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/setup.sh [--example] [--test] [--sanitize] [--build-dir DIR]

  (no flag)     install the build dependencies and build tunec in build/
  --example     then run the main job on the bundled example (examples/tiny_cnn): tune it
                (records in ./tuning.db), compile it to build/tiny_cnn.so, run it
  --test        then install the test-only packages (PyTorch for the model exporter) and run
                every test with ctest
  --sanitize    build with AddressSanitizer and UndefinedBehaviorSanitizer
  --build-dir   build directory (default: build)
USAGE
}

example=0 test=0 sanitize=OFF build_dir=build
while [ $# -gt 0 ]; do
  case "$1" in
    --example) example=1 ;;
    --test) test=1 ;;
    --sanitize) sanitize=ON ;;
    --build-dir) build_dir="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

cd "$(dirname "$0")/.."

build_packages=(build-essential cmake ninja-build lld llvm-16-dev libsqlite3-dev libxgboost-dev
  nlohmann-json3-dev libtbb-dev libgtest-dev libonnx-dev libprotobuf-dev protobuf-compiler
  libonnx-testdata pybind11-dev python3-dev)
# The model exporter (scripts/export_models.py) and output comparison need PyTorch and numpy;
# the fleet test starts a one-node Slurm (slurm-wlm, munge); the page tests render in Chromium.
test_packages=(python3-numpy python3-pytest python3-torch python3-torchvision slurm-wlm munge chromium)

install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q \
    --no-install-recommends "${missing[@]}"
}

install_packages "${build_packages[@]}"
[ $test -eq 1 ] && install_packages "${test_packages[@]}"

werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTUNEC_WERROR=$werror \
  -DTUNEC_SANITIZE=$sanitize
cmake --build "$build_dir"

if [ $example -eq 1 ]; then
  # The main job: tune on this machine (records in the default database, ./tuning.db), compile
  # with the tuned records into a shared library, run it.
  echo "setup: tuning the bundled example (examples/tiny_cnn) into ./tuning.db"
  "$build_dir/src/tunec" tune examples/tiny_cnn/model.onnx --trials 48
  echo "setup: compiling it with the tuned records"
  "$build_dir/src/tunec" compile examples/tiny_cnn/model.onnx -o "$build_dir/tiny_cnn.so"
  # tunec checks its output against PyTorch's (examples/tiny_cnn/expected_y.npy, saved when
  # the example was exported) itself: no Python needed; a mismatch fails the job.
  echo "setup: running the compiled model and checking its output against PyTorch's"
  "$build_dir/src/tunec" run "$build_dir/tiny_cnn.so" --input x=examples/tiny_cnn/x.npy \
    --output "$build_dir/example_out" --expect y=examples/tiny_cnn/expected_y.npy
  echo "setup: the example's output matches PyTorch's"
fi

if [ $test -eq 1 ]; then
  ctest --test-dir "$build_dir" --output-on-failure -j 2 --timeout 1500
fi
