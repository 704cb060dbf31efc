#!/usr/bin/env bash
# `tunec db` and `tunec target` end to end: import (with rejected lines), idempotence, stats,
# best, export, merge, and a corrupt database file.
set -uo pipefail
tunec="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/../check.sh"
cd "$tmp"

target=$("$tunec" target --json)
check "target has a key" grep -q '"key"' <<<"$target"
target_json=$(/usr/bin/python3 -c "import json,sys; t=json.loads(sys.argv[1]); t.pop('key'); print(json.dumps(t))" "$target")
record() { # record M MR MEDIAN
  echo "{\"format\":\"tunec-record\",\"version\":1,\"workload\":{\"template\":\"matmul\",\"dtype\":\"f32\",\"batch\":1,\"m\":$1,\"n\":64,\"k\":64,\"trans_a\":false,\"trans_b\":false,\"constant_b\":true,\"broadcast_b\":true,\"threads\":1},\"template_version\":1,\"target\":$target_json,\"config\":{\"isa\":\"avx2\",\"mr\":$2,\"nr\":16,\"mc\":$2,\"nc\":64,\"kc\":64,\"loop_order\":\"nkm\",\"parallel\":\"none\",\"pack_a\":false},\"result\":{\"status\":\"ok\",\"error\":\"\",\"median_us\":$3,\"min_us\":$3,\"gflops\":1.0,\"repeats\":5},\"tunec_version\":\"0.1.0\",\"host\":\"h\",\"created_at\":\"2026-11-30T00:00:00Z\"}"
}
{ record 64 4 10; record 64 6 8; echo '{"broken'; record 64 40 5; record 32 2 3; } > records.jsonl
out=$("$tunec" db import records.jsonl 2>&1); rc=$?
check "import exits 1 when lines are rejected" test "$rc" -eq 1
check "import reports the bad JSON line" grep -q "line 3: not valid JSON" <<<"$out"
check "import reports the config outside the knob space" grep -q "line 4: config does not fit template 'matmul'" <<<"$out"
check "import imports the rest into tuning.db" grep -q "imported 3 records into tuning.db" <<<"$out"
out=$("$tunec" db import records.jsonl 2>&1)
check "import is idempotent" grep -q "imported 0 records into tuning.db (3 already present" <<<"$out"
record 64 4 0.001 > fast.jsonl
out=$("$tunec" db import --db fast.db fast.jsonl 2>&1)
check "a time faster than the target's FMA peak is rejected" grep -q "line 1: implausible time" <<<"$out"
record 64 4 10 | sed 's/"dtype":"f32"/"dtype":"f16"/' > bf16.jsonl
out=$("$tunec" db import --db bf16.db bf16.jsonl 2>&1)
check "a record with an unsupported dtype is rejected with its line and that reason" \
  grep -q "line 1: .*dtype 'f16' is not supported" <<<"$out"
out=$("$tunec" db stats)
check "stats counts" grep -q "2 workloads, 3 records, 1 targets" <<<"$out"
key=$(/usr/bin/python3 - <<'PY'
import hashlib, json
w = {"template":"matmul","dtype":"f32","batch":1,"m":64,"n":64,"k":64,"trans_a":False,"trans_b":False,"constant_b":True,"broadcast_b":True,"threads":1}
text = json.dumps(w, sort_keys=True, separators=(",", ":")).encode()
h = 14695981039346656037
for c in text:
    h = ((h ^ c) * 1099511628211) % 2**64
print(f"{h:016x}")
PY
)
out=$("$tunec" db best "$key")
check "best picks the fastest config" grep -q '"mr": 6' <<<"$out"
check "export --best-only writes one line per workload" test "$("$tunec" db export --best-only | wc -l)" -eq 2
"$tunec" db export --out all.jsonl
check "export writes every record" test "$(wc -l < all.jsonl)" -eq 3
"$tunec" db import --db other.db all.jsonl >/dev/null
check "merge" "$tunec" db merge tuning.db other.db -o merged.db
check "merged stats" grep -q "3 records" <<<"$("$tunec" db stats --db merged.db)"
before=$("$tunec" db export --db merged.db | sort)
out=$("$tunec" db merge merged.db other.db tuning.db merged.db 2>&1)
check "merge again adds nothing" grep -q "other.db: 0 records added or improved, 3 already there" <<<"$out"
check "merge skips its output" grep -q "merged.db: skipped (it is the output)" <<<"$out"
check "merge again leaves the records as they were" test "$before" = "$("$tunec" db export --db merged.db | sort)"
out=$("$tunec" db merge merged.db nothere.db 2>&1); rc=$?
check "merge of a missing input exits 1" test "$rc" -eq 1
check "merge names the missing input" grep -q "nothere.db: no such tuning database" <<<"$out"
out=$("$tunec" db merge merged.db 2>&1)
check "merge needs an input" grep -q "expected OUT.db IN.db" <<<"$out"
# verify: a sound database, then one with a record edited behind tunec's back.
check "verify a sound database" grep -q "merged.db: 3 records, 2 workloads, 1 targets: ok" <<<"$("$tunec" db verify --db merged.db)"
cp merged.db edited.db
python3 - <<'PY'
import sqlite3
c = sqlite3.connect("edited.db")
c.execute("""UPDATE records SET config = '{"mr": 1000, "nr": 16, "kc": 64, "mc": 64, "nc": 64}' WHERE id = 1""")
c.commit()
PY
out=$("$tunec" db verify --db edited.db); rc=$?
check "verify of an edited record exits 1" test "$rc" -eq 1
check "verify names the record" grep -q "edited.db: record 1 (workload [0-9a-f]*): config does not fit template" <<<"$out"
check "verify counts the problems" grep -q "1 problems" <<<"$out"
head -c 3000 /dev/urandom > corrupt.db
out=$("$tunec" db stats --db corrupt.db 2>&1); rc=$?
check "corrupt db exits 1" test "$rc" -eq 1
check "corrupt db message" grep -q "corrupt.db: not a tunec tuning database" <<<"$out"
out=$("$tunec" db stats --db missing.db 2>&1)
check "missing db message" grep -q "missing.db: no such tuning database" <<<"$out"
for sub in export import merge verify stats best; do
  check "db $sub --help" grep -q "^usage: tunec db $sub" <<<"$("$tunec" db "$sub" --help)"
done
check "db --help" grep -q "^usage: tunec db <command>" <<<"$("$tunec" db --help)"
check "target --help" grep -q "^usage: tunec target" <<<"$("$tunec" target --help)"
echo "cli db: $failures failed"
[ "$failures" -eq 0 ]
