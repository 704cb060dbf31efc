# Shared by the CLI tests (sourced): `expect` runs tunec ("$tunec") and counts checks/failures.
checks=0 failures=0

# expect EXIT_CODE PATTERN -- ARGS...: runs tunec, checks the exit code and that the output matches.
expect() {
  local code="$1" pattern="$2"
  shift 3
  local out rc
  out=$("$tunec" "$@" 2>&1)
  rc=$?
  checks=$((checks + 1))
  if [ "$rc" -ne "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: tunec $* -> exit $rc (want $code), output:"
    echo "$out" | sed 's/^/    /'
    echo "    (wanted a match for: $pattern)"
    failures=$((failures + 1))
  fi
}

# compare EXPECTED.npy ACTUAL.npy [--max-rel-l2 B]: scripts/compare_outputs.py as a counted check
# (needs $src, the source tree, and $tmp, a scratch folder).
compare() {
  checks=$((checks + 1))
  /usr/bin/python3 "$src/scripts/compare_outputs.py" "$@" >"$tmp/cmp" 2>&1 || {
    echo "FAIL: compare $*"; sed 's/^/    /' "$tmp/cmp"; failures=$((failures + 1)); }
}
