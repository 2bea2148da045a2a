#!/usr/bin/env bash
# sublet — the report page's style and scripts (src/views/report/, compiled into
# the CLI by cmake/embed.cmake) are sound before they reach a browser: every
# script parses (`node --check`, and as a classic <script>, where a top-level
# `return` is an error that --check lets pass), the style sheet is not empty
# and its braces and comments balance, and no file holds `</script` or
# `</style`, which would end its inline element early.  Each check is also
# run on a broken copy, which it must reject.  Node.js comes from Debian's
# `nodejs` (installed with apt-get when missing; exit 77 = skipped when it
# cannot be).  $1 is the CLI (unused: the files are checked at the source).
set -u
here=$(cd "$(dirname "$0")" && pwd)
assets=$here/../src/views/report
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

if ! command -v node >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing nodejs (apt-get) ..." >&2
        (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs) \
            >"$tmp/apt.log" 2>&1 || true
    fi
    command -v node >/dev/null 2>&1 || { echo "SKIP: no node and it could not be installed" >&2; exit 77; }
fi

shopt -s nullglob
scripts=("$assets"/*.js)
sheets=("$assets"/*.css)
[ ${#scripts[@]} -gt 0 ] || { echo "no scripts in $assets" >&2; exit 1; }
[ ${#sheets[@]} -gt 0 ] || { echo "no style sheets in $assets" >&2; exit 1; }

# parses FILE: as node reads it and as a browser's classic script does
parses() {
    node --check "$1" >"$tmp/err" 2>&1 &&
        node -e 'new (require("vm").Script)(require("fs").readFileSync(process.argv[1], "utf8"),
                                              {filename: process.argv[1]});' "$1" >"$tmp/err" 2>&1
}

# balanced FILE: not empty, no '{' or '}' unmatched, no comment left open
balanced() {
    node -e '
const s = require("fs").readFileSync(process.argv[1], "utf8");
if (!/\S/.test(s)) { console.log("empty"); process.exit(1); }
const t = s.replace(/\/\*[\s\S]*?\*\//g, "");
if (t.includes("/*")) { console.log("a comment is not closed"); process.exit(1); }
let depth = 0, line = 1;
for (const c of t) {
  if (c === "\n") line++;
  if (c === "{") depth++;
  if (c === "}" && --depth < 0) { console.log("line " + line + ": } without {"); process.exit(1); }
}
if (depth) { console.log(depth + " { not closed"); process.exit(1); }' "$1" >"$tmp/err" 2>&1
}

# inline_safe FILE: nothing that ends the <script> or <style> it is written into
inline_safe() { ! grep -qiE '</(script|style)' "$1"; }

for f in "${scripts[@]}"; do
    n=${f#"$here"/../}
    ok=1
    parses "$f" || { fail "$n does not parse: $(head -5 "$tmp/err")"; ok=0; }
    inline_safe "$f" || { fail "$n holds </script or </style"; ok=0; }
    [ $ok = 0 ] || echo "ok: $n ($(stat -c %s "$f") bytes)"
done
for f in "${sheets[@]}"; do
    n=${f#"$here"/../}
    ok=1
    balanced "$f" || { fail "$n: $(cat "$tmp/err")"; ok=0; }
    inline_safe "$f" || { fail "$n holds </script or </style"; ok=0; }
    [ $ok = 0 ] || echo "ok: $n ($(stat -c %s "$f") bytes)"
done

# the checks reject what they are there to reject
js=${scripts[0]}
sed '$d' "$js" >"$tmp/cut.js"               # its last line gone
parses "$tmp/cut.js" && fail "a script without its last line parses"
{ echo 'return 1;'; cat "$js"; } >"$tmp/ret.js"
parses "$tmp/ret.js" && fail "a top-level return passes as a classic script"
{ cat "$js"; echo "var s = '</script>';"; } >"$tmp/end.js"
parses "$tmp/end.js" || fail "the unsafe copy should still parse: $(head -3 "$tmp/err")"
inline_safe "$tmp/end.js" && fail "a script with </script> passes"
css=${sheets[0]}
{ cat "$css"; echo 'p { color: red;'; } >"$tmp/open.css"
balanced "$tmp/open.css" && fail "a style sheet with an unclosed { passes"
{ echo '} p { color: red; }'; cat "$css"; } >"$tmp/close.css"
balanced "$tmp/close.css" && fail "a style sheet with a stray } passes"
{ echo '/* x'; cat "$css"; } >"$tmp/comment.css"
balanced "$tmp/comment.css" && fail "a style sheet with an open comment passes"
: >"$tmp/empty.css"
balanced "$tmp/empty.css" && fail "an empty style sheet passes"
{ echo '/* { */'; cat "$css"; } >"$tmp/commented.css"
balanced "$tmp/commented.css" || fail "a brace inside a comment counts: $(cat "$tmp/err")"

[ $fails = 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "all asset checks passed"
