#!/usr/bin/env bash
# Benchmarks the tuning database (1,000,000 records over 10,000 workloads) and appends the
# result to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
result=$(build/tests/tunec_db_bench "$tmp")
echo "$result"
/usr/bin/python3 - "$result" <<'PY'
import datetime, json, sys
r = json.loads(sys.argv[1])
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
block = f"""
## Tuning database ({now})

Command: `bash scripts/bench_tuning_db.sh`. {r['records']:,} records over {r['workloads']:,} workloads, one target.

| what | result | bound |
| --- | --- | --- |
| insert 1,000,000 records (batches of 10,000) | {r['insert_s']:.2f} s | |
| best-record lookup, median of 2,000 random workloads | {r['lookup_median_us']:.1f} µs (p99 {r['lookup_p99_us']:.1f} µs) | < 100 µs |
| export 1,000,000 records to JSONL | {r['export_1m_s']:.2f} s | |
| import 100,000 JSONL records into a new database | {r['import_100k_s']:.2f} s | < 5 s |
"""
with open("docs/benchmarks.md", "a") as f:
    f.write(block)
print(block)
PY
