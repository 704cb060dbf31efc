#!/usr/bin/env bash
# scripts/tune_slurm.sh against a real one-node Slurm: munged, slurmctld and slurmd configured
# and started in a temporary directory by scripts/slurm_local.sh, a 2-shard job of the
# bundled example, a shard cancelled mid-job and re-submitted (it resumes, re-measuring
# nothing), the merge, and a compile with the merged database that reports every kernel tuned.
# Skipped (exit 77, with the reason) where the daemons are not installed or cannot start.
# usage: slurm_test.sh TUNEC SOURCE_DIR
set -uo pipefail
tunec=$(realpath "$1")
src=$(realpath "$2")
tmp=$(mktemp -d)
skip() {
  echo "SKIP: the Slurm test did not run: $*"
  exit 77
}
source "$src/tests/check.sh"

cleanup() {
  "$src/scripts/slurm_local.sh" stop "$tmp/slurm"
  sleep 1
  rm -rf "$tmp"
}
trap cleanup EXIT
up=$("$src/scripts/slurm_local.sh" start "$tmp/slurm" 2>&1)
rc=$?
[ $rc -eq 77 ] && skip "${up#slurm_local.sh: }"
[ $rc -eq 0 ] || { echo "FAIL: scripts/slurm_local.sh start: $up"; exit 1; }
echo "$up"
export SLURM_CONF=$tmp/slurm/slurm.conf
PATH=/usr/sbin:$PATH

wait_jobs() { # until none of the given jobs is pending or running, at most $1 seconds
  local limit=$1
  shift
  for _ in $(seq 1 "$limit"); do
    [ -z "$(squeue --noheader --jobs="$(IFS=,; echo "$*")" 2>/dev/null)" ] && return 0
    sleep 1
  done
  echo "jobs $* still in the queue after $limit s:"
  squeue
  return 1
}

model=$src/examples/tiny_cnn/model.onnx
job=$tmp/job
"$tunec" target --json > "$tmp/target.json"
# A target file of another machine: a shard must refuse it.
python3 - "$tmp/target.json" "$tmp/other.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["model"] = "Another CPU"
t.pop("key", None)
json.dump(t, open(sys.argv[2], "w"))
PY

# The 2-shard job; shard 1 measures slowly (a long --min-seconds) so that it can be cancelled
# mid-job.
out=$("$src/scripts/tune_slurm.sh" --shards 2 --out "$job" --target "$tmp/target.json" \
  --trials 24 --tunec "$tunec" --shared --tune-args "--min-seconds 0.3 --batch 2 --quiet" \
  "$model" 2>&1)
echo "$out"
shards=$(cat "$job/shard.jobid" 2>/dev/null)
merge=$(cat "$job/merge.jobid" 2>/dev/null)
check "tune_slurm.sh submitted the shards and the merge" test -n "$shards" -a -n "$merge"

# Cancel shard 1 once it has committed a batch, before it is done.
for _ in $(seq 1 120); do
  [ -f "$job/shard-1.db" ] && [ "$(db_records "$job/shard-1.db" 2>/dev/null)" -ge 2 ] 2>/dev/null && break
  sleep 0.5
done
scancel --signal=TERM --full "${shards}_1"
wait_jobs 60 "$shards"
before=$(db_records "$job/shard-1.db")
check "shard 1 was cancelled mid-job with some records" test "${before:-0}" -ge 2
# The merge's dependency (afterok) can no longer be met: Slurm removes it.
wait_jobs 30 "$merge"

# Re-submit shard 1, then the merge.
resub=$(sbatch --parsable --array=1 "$job/shard.sbatch")
resub=${resub%%;*}
merge2=$(sbatch --parsable --dependency=afterok:"$resub" "$job/merge.sbatch")
merge2=${merge2%%;*}
wait_jobs 300 "$resub" "$merge2"
log=$(cat "$job/shard-1.$resub.log" 2>/dev/null)
echo "$log" | tail -8
check "the re-submitted shard resumed from its database" grep -q "resumed: $before configs of these tasks were already measured" <<<"$log"
total=$(grep -o "shard 1/2: [0-9]* of [0-9]* distinct tasks" <<<"$log")
after=$(db_records "$job/shard-1.db")
measured=$(sed -n 's/^\([0-9]*\) trials (.*/\1/p' <<<"$log")
check "it measured only what was left ($before before + $measured now = $after records)" \
  test "$((before + measured))" -eq "${after:-0}"
check "shard 0 finished" grep -q "trials (.*recorded in" "$job"/shard-0.*.log
merge_log=$(cat "$job/merge.$merge2.log" 2>/dev/null)
echo "$merge_log"
check "the merge job merged and verified the shards" grep -q "merged.db: .* records, .* workloads, 1 targets: ok" <<<"$merge_log"
s0=$(db_records "$job/shard-0.db")
m=$(db_records "$job/merged.db")
check "the merged database holds every record of both shards ($s0 + $after = $m)" test "$((s0 + after))" -eq "${m:-0}"
report=$("$tunec" compile "$model" --db "$job/merged.db" -o "$tmp/model.so" 2>&1)
echo "$report" | head -3
check "compile with the merged database: every kernel tuned" grep -q "4 heavy kernels: 4 tuned, 0 with the analytical default" <<<"$report"

# A shard on a machine of another target refuses to run.
out=$("$tunec" tune "$model" --shard 0/2 --db "$tmp/refused.db" --target "$tmp/other.json" --trials 4 2>&1)
check "a shard refuses another target" grep -q "describes another machine" <<<"$out"

echo "slurm test: ran on a one-node Slurm, $failures failed"
[ "$failures" -eq 0 ]
