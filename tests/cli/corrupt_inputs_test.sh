#!/usr/bin/env bash
# A corpus of damaged inputs, as a careless or hostile user would bring them: truncations and
# byte flips of the example's model.onnx (500), of its input tensor (100), of its compiled
# model.so (100) and of a tuning-record line (100). Each must end with exit 0 (a flip that left
# a valid file, e.g. in a weight) or exit 1 with a "tunec: " message; never a signal, an
# internal error (exit 2) or a hang. A damaged model.so must always be refused (exit 1).
set -uo pipefail
tunec="$1" src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ex="$src/examples/tiny_cnn"
export TUNEC_DB="$tmp/none.db"
"$tunec" compile "$ex/model.onnx" -o "$tmp/good.so" >/dev/null || { echo "FAIL: compile"; exit 1; }
"$tunec" tune "$ex/model.onnx" --db "$tmp/t.db" --trials 4 --quiet >/dev/null 2>&1
"$tunec" db export --db "$tmp/t.db" --out "$tmp/records.jsonl" || { echo "FAIL: export"; exit 1; }

/usr/bin/python3 - "$tmp" "$ex/model.onnx" "$ex/x.npy" "$tmp/good.so" "$tmp/records.jsonl" <<'PY'
import os, random, sys
out, model, tensor, lib, records = sys.argv[1:6]
rng = random.Random(20261201)
def variants(data, count, name, ext):
    os.makedirs(f"{out}/{name}", exist_ok=True)
    for i in range(count):
        b = bytearray(data)
        kind = i % 3
        if kind == 0:  # truncated
            b = b[: rng.randrange(len(b))]
        else:  # one to four bytes flipped (XOR with a non-zero byte: always a change)
            for _ in range(rng.randrange(1, 5)):
                at = rng.randrange(len(b)) if kind == 1 else rng.randrange(min(len(b), 512))
                b[at] ^= rng.randrange(1, 256)
        open(f"{out}/{name}/{i:03d}{ext}", "wb").write(bytes(b))
variants(open(model, "rb").read(), 500, "onnx", ".onnx")
variants(open(tensor, "rb").read(), 100, "npy", ".npy")
variants(open(lib, "rb").read(), 100, "so", ".so")
line = open(records, "rb").read().split(b"\n")[0] + b"\n"
variants(line, 100, "jsonl", ".jsonl")
PY

# judge KIND FILE COMMAND...: runs one case with a time limit and classifies its ending.
judge() {
  local kind="$1" file="$2"
  shift 2
  local out rc
  out=$(timeout 60 "$@" 2>&1 >/dev/null)
  rc=$?
  out=${out//$'\n'/ }
  if [ "$rc" -eq 124 ]; then echo "HANG $kind $file"
  elif [ "$rc" -ge 128 ]; then echo "SIGNAL $((rc - 128)) $kind $file"
  elif [ "$rc" -eq 2 ]; then echo "INTERNAL $kind $file: $out"
  elif [ "$rc" -eq 1 ] && ! grep -q "^tunec: " <<<"$out"; then echo "SILENT $kind $file"
  elif [ "$kind" = so ] && [ "$rc" -ne 1 ]; then echo "ACCEPTED $kind $file"
  elif [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then echo "EXIT $rc $kind $file"
  fi
}
export -f judge
export tunec ex tmp
{
  ls "$tmp"/onnx/*.onnx | xargs -P 2 -I{} bash -c 'judge onnx "$1" "$tunec" compile "$1" -o "$1.so"' _ {}
  ls "$tmp"/npy/*.npy | xargs -P 2 -I{} bash -c 'judge npy "$1" "$tunec" run "$tmp/good.so" --input x="$1"' _ {}
  ls "$tmp"/so/*.so | xargs -P 2 -I{} bash -c 'judge so "$1" "$tunec" run "$1" --input x="$ex/x.npy"' _ {}
  ls "$tmp"/jsonl/*.jsonl | xargs -P 2 -I{} bash -c 'judge jsonl "$1" "$tunec" db import --db "$1.db" "$1"' _ {}
} >"$tmp/findings"
total=800
bad=$(grep -c "" "$tmp/findings")
sed 's/^/FAIL: /' "$tmp/findings" | head -40
echo "corrupt inputs: $((total - bad)) passed, $bad failed"
[ "$bad" -eq 0 ]
