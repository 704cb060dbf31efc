#!/usr/bin/env bash
# The Python package's tests (pytest, Debian's /usr/bin/python3); skipped (77, saying why)
# without pytest or numpy.
# usage: run_tests.sh TUNEC BUILD_DIR SOURCE_DIR
set -uo pipefail
python=/usr/bin/python3
"$python" -c 'import pytest, numpy' 2>/dev/null ||
  { echo "SKIP: the Python tests did not run: they need python3-pytest and python3-numpy (scripts/setup.sh --test installs them)"; exit 77; }
export TUNEC_BINARY=$1 PYTHONPATH=$2/python TUNEC_SOURCE_DIR=$3
exec "$python" -m pytest -q -p no:cacheprovider "$3/tests/python"
