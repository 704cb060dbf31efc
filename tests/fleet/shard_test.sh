#!/usr/bin/env bash
# `tunec tune --shard` without a scheduler: the shards split the task list (disjoint, covering
# it), several models share one list, bad --shard values are clear errors, and a shard killed
# with SIGKILL mid-job resumes from its database, measuring only what it has left.
# usage: shard_test.sh TUNEC SOURCE_DIR
set -uo pipefail
tunec=$(realpath "$1")
src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
source "$src/tests/check.sh"
model=$src/examples/tiny_cnn/model.onnx

"$tunec" tune "$model" --list-tasks 2>/dev/null | sort > all.txt
for i in 0 1 2; do "$tunec" tune "$model" --shard $i/3 --list-tasks 2>/dev/null; done | sort > shards.txt
check "the shards cover the task list, each task once" diff all.txt shards.txt
check "the split is the same on every run" test "$("$tunec" tune "$model" --shard 1/3 --list-tasks 2>/dev/null)" = "$("$tunec" tune "$model" --shard 1/3 --list-tasks 2>/dev/null)"
out=$("$tunec" tune "$model" "$model" --list-tasks 2>/dev/null)
check "two models share one task list (the same workloads twice: weight 2)" test "$(awk '$2 == 2' <<<"$out" | wc -l)" -eq "$(wc -l < all.txt)"
for bad in 2/2 x/2 1/0 1 -1/2; do
  out=$("$tunec" tune "$model" --shard "$bad" --list-tasks 2>&1); rc=$?
  check "--shard $bad is an error" test "$rc" -eq 1
  check "--shard $bad says what is wrong" grep -Eq "out of range|must be I/N" <<<"$out"
done

# Kill a shard hard, then run it again.
"$tunec" tune "$model" --shard 0/1 --db shard.db --trials 20 --batch 2 --min-seconds 0.3 --quiet \
  > first.txt 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  [ -f shard.db ] && [ "$(db_records shard.db 2>/dev/null)" -ge 4 ] 2>/dev/null && break
  sleep 0.25
done
kill -KILL $pid
wait $pid 2>/dev/null
before=$(db_records shard.db)
check "the killed shard kept its committed batches ($before records)" test "${before:-0}" -ge 4 -a "${before:-0}" -lt 20
"$tunec" tune "$model" --shard 0/1 --db shard.db --trials 20 --batch 2 --min-seconds 0.05 > second.txt 2>&1
cat second.txt
check "the re-run says it resumed" grep -q "resumed: $before configs of these tasks were already measured" second.txt
measured=$(sed -n 's/^\([0-9]*\) trials (.*/\1/p' second.txt)
check "it measured only what was left ($before + $measured = 20)" test "$((before + measured))" -eq 20
check "the database holds the job's 20 trials" test "$(db_records shard.db)" -eq 20
"$tunec" tune "$model" --shard 0/1 --db shard.db --trials 20 > third.txt 2>&1
check "a finished shard measures nothing" grep -q "^0 trials" third.txt

echo "fleet shards: $failures failed"
[ "$failures" -eq 0 ]
