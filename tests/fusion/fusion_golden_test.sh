#!/usr/bin/env bash
# The fusion golden tests: one small ONNX graph per fusion rule (tests/fusion/make_graphs.py,
# exported with PyTorch), each compiled in memory: `tunec inspect --fusion` (the kernels, the
# steps compile builds and every boundary's reason) must equal tests/fusion/golden/NAME.txt, and
# the compiled graph must match the reference executor on random inputs (`tunec accuracy`,
# relative L2 < 1e-5). With --update the goldens are rewritten from this build instead.
#
# usage: fusion_golden_test.sh TUNEC SOURCE_DIR WORK_DIR [--update]
set -uo pipefail
tunec="$1" src="$2" work="$3" update="${4:-}"
mkdir -p "$work"
/usr/bin/python3 "$src/tests/fusion/make_graphs.py" --out "$work" 2>&1 | grep -v -i warn
golden="$src/tests/fusion/golden"
mkdir -p "$golden"
status=0 checked=0
for model in "$work"/*.onnx; do
  name=$(basename "$model" .onnx)
  got=$("$tunec" inspect "$model" --fusion | sed -n '/^fusion:/,$p')
  if [ "$update" = "--update" ]; then
    echo "$got" > "$golden/$name.txt"
    echo "updated $golden/$name.txt"
  elif ! diff -u "$golden/$name.txt" <(echo "$got") > "$work/$name.diff"; then
    echo "FAIL: $name: inspect --fusion differs from tests/fusion/golden/$name.txt" \
         "(regenerate with --update if the change is intended):"
    cat "$work/$name.diff"
    status=1
  fi
  acc=$("$tunec" accuracy "$model" --random 2 --threads 2)
  l2=$(sed -nE 's/.*relative L2 ([0-9.e+-]+).*/\1/p' <<<"$acc" | head -1)
  if ! /usr/bin/python3 -c "import sys; sys.exit(0 if float('$l2') < 1e-5 else 1)" 2>/dev/null; then
    echo "FAIL: $name: compiled against the reference: $acc"
    status=1
  fi
  checked=$((checked + 1))
done
echo "fusion goldens: $checked graphs checked"
[ "$checked" -gt 0 ] || status=1
exit $status
