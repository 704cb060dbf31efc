#!/usr/bin/env bash
# The pages of `tunec profile --html` and `tunec report`, in a real browser: headless Chromium
# renders each to a PNG (checked non-blank), its DOM after the scripts ran has one table row per
# step and per task (and a sort by a column, through the page's #sort= link, orders the rows), and
# the network log of the load shows nothing but the page's own file.
# Skipped (exit 77, saying why) where Chromium is not installed.
# usage: pages_test.sh TUNEC SOURCE_DIR [--screenshots DIR] [--model M.onnx] [--trials N]
#   --screenshots: also keep the PNGs in DIR (docs/ has the ones of MobileNetV2, 400 trials)
set -uo pipefail
tunec=$(realpath "$1")
src=$(realpath "$2")
shift 2
shots="" model=$src/examples/tiny_cnn/model.onnx trials=24
while [ $# -gt 0 ]; do
  case "$1" in
    --screenshots) shots=$(realpath "$2"); shift ;;
    --model) model=$(realpath "$2"); shift ;;
    --trials) trials=$2; shift ;;
    *) echo "pages_test.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
source "$src/tests/check.sh"
chromium=$(command -v chromium || command -v chromium-browser) ||
  { echo "SKIP: the page tests did not run: chromium is not installed (scripts/setup.sh --test installs Debian's chromium)"; exit 77; }

# The pages of a small tuning job of the model (the bundled example), the compiled model and its
# profile.
"$tunec" tune "$model" --db tuning.db --trials "$trials" --min-seconds 0.02 --quiet > /dev/null 2>&1
check "tune made a database" test -s tuning.db
"$tunec" compile "$model" --db tuning.db -o model.so > /dev/null
"$tunec" profile model.so --runs 10 --html profile.html --json > profile.json 2> /dev/null
check "profile --html wrote a page" test -s profile.html
"$tunec" report tuning.db --model "$model" -o report.html > /dev/null
check "report wrote a page" test -s report.html
steps=$(python3 -c 'import json,sys; print(len(json.load(open("profile.json"))["steps"]))')
tasks=$("$tunec" tune "$model" --list-tasks 2>/dev/null | wc -l)

browse() { # browse OUTPUT-FLAG URL: one headless load, with its network log
  "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$tmp/profile-dir" --log-net-log="$tmp/net.json" --window-size=1280,1600 \
    "$1" "$2" 2>/dev/null
}

# The requests the page made, from Chromium's network log: Chromium's own (update checks and the
# like, "initiator": "not an origin") are left out; a page's have its origin ("null" for file:).
page_requests() {
  python3 - "$1" <<'PY'
import json, sys
log = json.load(open(sys.argv[1]))
start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
for e in log["events"]:
    p = e.get("params") or {}
    if e["type"] == start and p.get("url") and p.get("initiator") != "not an origin":
        print(p["url"])
PY
}

for page in profile report; do
  check "$page: nothing on the page names a network address" test "$(grep -c '://' $page.html)" -eq 0
  browse --screenshot="$tmp/$page.png" "file://$tmp/$page.html" > /dev/null
  check "$page: rendered to a PNG" test -s "$page.png"
  python3 - "$page.png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, width, height = 8, b"", 0, 0
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height = struct.unpack(">II", body[:8])
    if kind == b"IDAT":
        idat += body
    pos += 12 + length
pixels = zlib.decompress(idat)
distinct = len(set(pixels))
print(f"  {sys.argv[1]}: {width}x{height}, {distinct} distinct byte values")
sys.exit(0 if width > 0 and distinct > 32 else 1)
PY
  check "$page: the PNG is not blank" test $? -eq 0
  loaded=$(page_requests net.json)
  check "$page: the page requested nothing from the network${loaded:+ (it did: $loaded)}" test -z "$loaded"
done
# The check can fail: a page with one image from a server is caught.
echo '<html><body><img src="http://127.0.0.1:9/x.png">control</body></html>' > control.html
browse --dump-dom "file://$tmp/control.html" > /dev/null
check "the network check sees a page's request (control page)" grep -q "127.0.0.1:9/x.png" <<<"$(page_requests net.json)"

rows() { # rows HTML-FILE TABLE-ID: the rows of the table's body, and its column COL's values
  python3 - "$@" <<'PY'
import sys
from html.parser import HTMLParser
class Rows(HTMLParser):
    def __init__(self, table, col):
        super().__init__()
        self.table, self.col, self.depth, self.rows, self.cell, self.text = table, col, 0, [], -1, ""
        self.inside = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id") == self.table:
            self.inside = True
        if self.inside and tag == "tbody":
            self.depth = 1
        if self.depth and tag == "tr":
            self.rows.append(None)
            self.cell = -1
        if self.depth and tag == "td":
            self.cell += 1
            if self.cell == self.col:
                self.rows[-1] = float(a.get("data-v", "nan"))
    def handle_endtag(self, tag):
        if tag == "tbody" and self.depth:
            self.depth = 0
            self.inside = False
p = Rows(sys.argv[2], int(sys.argv[3]))
p.feed(open(sys.argv[1]).read())
print(len(p.rows), " ".join(str(v) for v in p.rows))
PY
}
# The DOM after the scripts ran, sorted by time (column 1) descending through the #sort= link.
browse --dump-dom "file://$tmp/profile.html#sort=steps:1:desc" > profile.dom
read -r n values <<<"$(rows profile.dom steps 1)"
check "profile: one table row per step ($n of $steps)" test "$n" -eq "$steps"
check "profile: sorting by time orders the rows" python3 -c "v=[float(x) for x in '$values'.split()]; exit(v != sorted(v, reverse=True))"
browse --dump-dom "file://$tmp/report.html#sort=tasks:8" > report.dom
read -r n values <<<"$(rows report.dom tasks 8)"
check "report: one table row per task ($n of $tasks)" test "$n" -eq "$tasks"
check "report: sorting by best GFLOP/s orders the rows" python3 -c "v=[float(x) for x in '$values'.split()]; exit(v != sorted(v))"
check "report: a convergence curve per task" test "$(grep -o '<svg class="task"' report.dom | wc -l)" -eq "$tasks"
check "profile: the roofline is drawn" grep -q '<svg id="roofline"' profile.dom
# The policy runs only the page's own script and style (their SHA-256, no 'unsafe-inline'): the
# sort above ran, and a script or style that markup escaping missed would not. A copy of the page
# with an injected script (setting an attribute) and style attribute shows both blocked.
for page in profile report; do
  check "$page: the CSP allows no unsafe-inline" test "$(grep -c "unsafe-inline" $page.html)" -eq 0
  check "$page: the CSP names the script's and the style's SHA-256" \
    grep -q "style-src 'sha256-[A-Za-z0-9+/=]*'; script-src 'sha256-[A-Za-z0-9+/=]*'" $page.html
done
sed 's|<h1>|<h1 style="display:none" id="hidden"><script>document.body.setAttribute("data-injected","1")</script>|' \
  profile.html > injected.html
browse --dump-dom "file://$tmp/injected.html#sort=steps:1:desc" > injected.dom
check "an injected inline script does not run" test "$(grep -c 'data-injected="1"' injected.dom)" -eq 0
# The check can fail: without the policy the same script runs.
sed 's|<meta http-equiv="Content-Security-Policy"[^>]*>||' injected.html > unguarded.html
browse --dump-dom "file://$tmp/unguarded.html" > unguarded.dom
check "the injection check sees a script run on a page without the policy (control)" \
  grep -q 'data-injected="1"' unguarded.dom
check "the page's own script still runs beside it" test "$(rows injected.dom steps 1 | cut -d' ' -f1)" -eq "$steps"

if [ -n "$shots" ]; then
  cp profile.png "$shots/profile.png"
  cp report.png "$shots/report.png"
  echo "screenshots: $shots/profile.png, $shots/report.png"
fi
echo "pages: $failures failed"
[ "$failures" -eq 0 ]
