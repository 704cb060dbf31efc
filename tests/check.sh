# Shared by the shell tests (sourced): `check` runs a condition and counts failures; `db_records`
# reads a tuning database's record count with "$tunec".
failures=0

# check DESCRIPTION COMMAND...: the command must succeed; prints ok or FAIL.
check() {
  local what="$1"
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# db_records DB: how many records `tunec db stats` counts in DB.
db_records() { "$tunec" db stats --db "$1" | sed -n 's/.*workloads, \([0-9]*\) records.*/\1/p'; }
