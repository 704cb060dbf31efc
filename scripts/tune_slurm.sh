#!/usr/bin/env bash
# Tunes models on a Slurm cluster: a job array with one `tunec tune --shard I/N` per array task,
# each into its own database, then a dependent job that merges and verifies them. The machines
# must share a file system (the models, the tunec binary and --out) and be of one target: every
# shard runs with the job's target file and refuses a machine whose target key differs.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/tune_slurm.sh --shards N --out DIR [flags] MODEL.onnx...

Submits N array tasks (sbatch --array=0-(N-1)), each tuning shard I/N of the models' task list
into DIR/shard-I.db, and a merge job that runs once all of them succeeded (afterok) and writes
DIR/merged.db ('tunec db merge', then 'tunec db verify'). Then, on any machine of that target:
  tunec compile MODEL.onnx --db DIR/merged.db -o model.so

flags:
  --shards N          number of shards (array tasks)
  --out DIR           job directory on the shared file system (created)
  --target FILE       the job's target file ('tunec target --json' on a machine of the fleet);
                      default: made by 'srun tunec target --json' on a node of the partition
  --trials T          the whole job's trials (default 1000); each shard takes its share
  --time-budget D     the whole job's budget (90s, 30m, 2h); each shard takes its share
  --tune-args "..."   more flags for every 'tunec tune' (e.g. "--min-seconds 0.05")
  --tunec PATH        the tunec binary (default: tunec on PATH)
  --partition P       Slurm partition (default: the cluster's default)
  --shared            do not ask for whole nodes (default: --exclusive, as measurements need)
  --sbatch-args "..." more flags for every sbatch (account, QoS, time limit)
  --dry-run           write the job scripts and print the sbatch commands, submit nothing

A shard that was killed (scancel, a node failure, a time limit) keeps what it measured;
re-submitting it resumes: sbatch --array=I DIR/shard.sbatch, then sbatch DIR/merge.sbatch.
USAGE
}

shards="" out="" target="" trials=1000 budget="" tune_args="" tunec="tunec" partition=""
exclusive="--exclusive" sbatch_args="" dry_run=0 models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --shards) shards="$2"; shift ;;
    --out) out="$2"; shift ;;
    --target) target="$2"; shift ;;
    --trials) trials="$2"; shift ;;
    --time-budget) budget="$2"; shift ;;
    --tune-args) tune_args="$2"; shift ;;
    --tunec) tunec="$2"; shift ;;
    --partition) partition="$2"; shift ;;
    --shared) exclusive="" ;;
    --sbatch-args) sbatch_args="$2"; shift ;;
    --dry-run) dry_run=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "tune_slurm.sh: unknown flag '$1'" >&2; usage >&2; exit 2 ;;
    *) models+=("$1") ;;
  esac
  shift
done

die() { echo "tune_slurm.sh: $*" >&2; exit 1; }
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || die "--shards N is required (a positive number), not '$shards'"
[ -n "$out" ] || die "--out DIR is required (a directory every node can write)"
[ ${#models[@]} -gt 0 ] || die "no MODEL.onnx given"
[[ "$trials" =~ ^[1-9][0-9]*$ ]] || die "--trials must be a positive number, not '$trials'"
command -v sbatch >/dev/null || [ $dry_run -eq 1 ] || die "sbatch not found: run this on a Slurm login node"
tunec_path=$(command -v "$tunec" 2>/dev/null) || die "tunec binary '$tunec' not found (--tunec PATH)"
tunec_path=$(realpath "$tunec_path")
abs_models=()
for m in "${models[@]}"; do
  [ -f "$m" ] || die "$m: no such model file"
  abs_models+=("$(realpath "$m")")
done
mkdir -p "$out"
out=$(realpath "$out")

part_flag=()
[ -n "$partition" ] && part_flag=(--partition="$partition")
if [ -n "$target" ]; then
  [ -r "$target" ] || die "$target: no such target file (make one with 'tunec target --json')"
  cat "$target" > "$out/target.json"
elif [ $dry_run -eq 0 ]; then
  echo "tune_slurm.sh: reading the target of a node of the partition (srun tunec target --json)"
  # shellcheck disable=SC2086
  srun "${part_flag[@]}" $sbatch_args --ntasks=1 "$tunec_path" target --json > "$out/target.json" ||
    die "srun tunec target --json failed; give the job's target with --target FILE"
fi

quoted_models=$(printf '%q ' "${abs_models[@]}")
budget_flag=""
[ -n "$budget" ] && budget_flag="--time-budget $(printf '%q' "$budget")"

cat > "$out/shard.sbatch" <<EOF
#!/usr/bin/env bash
#SBATCH --job-name=tunec-shard
#SBATCH --output=$out/shard-%a.%j.log
#SBATCH --nodes=1
#SBATCH --ntasks=1
# One shard of a tunec tuning job (scripts/tune_slurm.sh). Re-submit a killed shard with
# 'sbatch --array=I $out/shard.sbatch': it resumes from its database.
set -euo pipefail
i=\${SLURM_ARRAY_TASK_ID:?run this as an array task: sbatch --array=0-$((shards - 1)) $out/shard.sbatch}
echo "tunec shard \$i/$shards on \$(hostname) (job \${SLURM_JOB_ID:-?})"
exec $(printf '%q' "$tunec_path") tune $quoted_models --shard "\$i/$shards" \\
  --db "$out/shard-\$i.db" --target "$out/target.json" --trials $trials $budget_flag $tune_args
EOF

cat > "$out/merge.sbatch" <<EOF
#!/usr/bin/env bash
#SBATCH --job-name=tunec-merge
#SBATCH --output=$out/merge.%j.log
#SBATCH --nodes=1
#SBATCH --ntasks=1
# Merges the shards of a tunec tuning job (scripts/tune_slurm.sh) and verifies the result.
set -euo pipefail
dbs=()
for i in \$(seq 0 $((shards - 1))); do
  [ -f "$out/shard-\$i.db" ] || { echo "shard \$i has no database: $out/shard-\$i.db" >&2; exit 1; }
  dbs+=("$out/shard-\$i.db")
done
$(printf '%q' "$tunec_path") db merge "$out/merged.db" "\${dbs[@]}"
$(printf '%q' "$tunec_path") db verify --db "$out/merged.db"
echo "merged: $out/merged.db"
EOF
chmod +x "$out/shard.sbatch" "$out/merge.sbatch"

# shellcheck disable=SC2206
extra=(${sbatch_args})
shard_cmd=(sbatch --parsable --array=0-$((shards - 1)) $exclusive "${part_flag[@]}" "${extra[@]}"
  "$out/shard.sbatch")
if [ $dry_run -eq 1 ]; then
  echo "${shard_cmd[*]}"
  echo "sbatch --parsable --dependency=afterok:JOB --kill-on-invalid-dep=yes ${part_flag[*]} ${extra[*]} $out/merge.sbatch"
  exit 0
fi
job=$("${shard_cmd[@]}")
job=${job%%;*}
merge=$(sbatch --parsable --dependency=afterok:"$job" --kill-on-invalid-dep=yes "${part_flag[@]}" \
  "${extra[@]}" "$out/merge.sbatch")
merge=${merge%%;*}
echo "submitted shards: job $job (array 0-$((shards - 1))), logs $out/shard-I.JOB.log"
echo "submitted merge:  job $merge (after all shards succeed), log $out/merge.$merge.log"
echo "when it is done:  tunec compile MODEL.onnx --db $out/merged.db -o model.so"
echo "$job" > "$out/shard.jobid"
echo "$merge" > "$out/merge.jobid"
