#!/usr/bin/env bash
# sublet — `sublet report` pages opened in headless Chromium.  $1 is the built
# CLI.  For the committed attention trace (also on a device small enough to
# OOM), every trace in $SUBLET_SHARED/traces/pytorch_snapshot/ when it exists,
# and a synthetic 10^6-event trace (tests/gen_trace.py): write the report,
# and with --tune (the tuning section and its Pareto chart) for the attention
# trace and one shared snapshot,
# open it in Chromium (Debian's `chromium`, installed with apt-get when
# missing; exit 77 = skipped when it cannot be), and check that the page
# reported no error (window errors and console.error are counted into
# data-errors by the page, and the page logs nothing, so any console line in
# Chromium's log fails the check),
# that every chart drew (data-rendered == data-charts), that every text drawn
# on a chart (the tick labels: the last x label of a 10^6-event trace is
# "1000000") lies inside its canvas (a script put before the page's records
# the box of every fillText from measureText), and save a PNG screenshot next
# to the build (report_screenshots/).  Every page carries the style and
# scripts of src/views/report/ verbatim, inline.  The 10^6-event page must stay
# under 5 MB and finish drawing within 2 s of navigation start
# (data-render-ms, the page's performance.now() once it has drawn).
set -u
cli=${1:?usage: cli_report.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
shared=${SUBLET_SHARED:-$here/../../shared}
shots=${SUBLET_REPORT_SHOTS:-$PWD/report_screenshots}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

[ -x "$cli" ] || { echo "no CLI at $cli" >&2; exit 1; }

browser=""
for b in chromium chromium-browser; do
    command -v "$b" >/dev/null 2>&1 && { browser=$b; break; }
done
if [ -z "$browser" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing chromium (apt-get) ..." >&2
        (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) \
            >"$tmp/apt.log" 2>&1 || true
    fi
    command -v chromium >/dev/null 2>&1 && browser=chromium
fi
if [ -z "$browser" ]; then
    echo "SKIP: no chromium and it could not be installed" >&2
    exit 77
fi
mkdir -p "$shots"

# Put before the page's scripts by open_page: the extent of the text drawn on
# each canvas, as data-text-ID="LEFT RIGHT WIDTH RIGHTMOST-TEXT" on <body>
# (CSS pixels; textBaseline and y are not checked).
cat >"$tmp/hook.html" <<'EOF'
<script>
(function () {
  var fill = CanvasRenderingContext2D.prototype.fillText, box = {};
  CanvasRenderingContext2D.prototype.fillText = function (s, x) {
    var w = this.measureText(s).width, a = this.textAlign, c = this.canvas;
    var l = a === 'right' || a === 'end' ? x - w : a === 'center' ? x - w / 2 : x;
    var b = box[c.id] || (box[c.id] = {l: Infinity, r: -Infinity, last: ''});
    if (l < b.l) b.l = l;
    if (l + w > b.r) { b.r = l + w; b.last = String(s); }
    document.body.setAttribute('data-text-' + c.id, Math.floor(b.l) + ' ' + Math.ceil(b.r) + ' ' +
                               Math.round(parseFloat(c.style.width)) + ' ' + b.last);
    if (c.id === 'c-map') /* the segment map's labels (private pools), each with its box */
      document.body.setAttribute('data-map-labels', (document.body.getAttribute('data-map-labels') || '') +
                                 '|' + String(s) + '@' + Math.floor(l) + '..' + Math.ceil(l + w));
    return fill.apply(this, arguments);
  };
})();
</script>
EOF

# the page's style and scripts: the files of src/views/report/, verbatim and inline
assets=$here/../src/views/report
css=$(<"$assets/page.css") && js=$(<"$assets/page.js") && tune_js=$(<"$assets/tune.js") ||
    { echo "no assets at $assets" >&2; exit 1; }
[ -n "$css" ] && [ -n "$js" ] && [ -n "$tune_js" ] || { echo "empty assets in $assets" >&2; exit 1; }
# embedded PAGE NAME [tune]
embedded() {
    local page name=$2
    page=$(<"$1")
    [[ $page == *"<style>"$'\n'"$css"$'\n\n'"</style>"* ]] ||
        fail "$name: src/views/report/page.css is not the page's <style>"
    [[ $page == *"<script>"$'\n'"$js"$'\n\n'"</script>"* ]] ||
        fail "$name: src/views/report/page.js is not in the page"
    if [ "${3:-}" = tune ]; then
        [[ $page == *"<script>"$'\n'"$tune_js"$'\n'"</script>"* ]] ||
            fail "$name: src/views/report/tune.js is not in the page"
    elif [[ $page == *"$tune_js"* ]]; then
        fail "$name: the tuning script without --tune"
    fi
}

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --disable-extensions --hide-scrollbars --enable-logging=stderr --v=0)

# open PAGE NAME [MAX_MS]: load it (with the hook), check the DOM marks, the
# text boxes and the log, screenshot (without the hook).
open_page() {
    local page=$1 name=$2 max_ms=${3:-}
    local prof="$tmp/profile-$name"
    rm -rf "$prof"
    sed "/<meta charset=\"utf-8\">/r $tmp/hook.html" "$page" >"$tmp/$name.hooked.html"
    grep -q 'CanvasRenderingContext2D.prototype.fillText = ' "$tmp/$name.hooked.html" ||
        fail "$name: the text hook could not be put in the page"
    timeout 120 "$browser" "${flags[@]}" --user-data-dir="$prof" --window-size=1280,1800 \
        --dump-dom "file://$tmp/$name.hooked.html" >"$tmp/$name.dom" 2>"$tmp/$name.log"
    local rc=$?
    [ $rc = 0 ] || { fail "$name: chromium exited with $rc: $(tail -3 "$tmp/$name.log")"; return; }
    local body
    body=$(grep -o '<body[^>]*>' "$tmp/$name.dom" | head -1)
    local charts rendered ms errors
    charts=$(sed -n 's/.*data-charts="\([0-9]*\)".*/\1/p' <<<"$body")
    rendered=$(sed -n 's/.*data-rendered="\([0-9]*\)".*/\1/p' <<<"$body")
    ms=$(sed -n 's/.*data-render-ms="\([0-9]*\)".*/\1/p' <<<"$body")
    errors=$(sed -n 's/.*data-errors="\([0-9]*\)".*/\1/p' <<<"$body")
    [ -n "$charts" ] && [ "$charts" -gt 0 ] || fail "$name: no data-charts on <body>: $body"
    [ "${rendered:-0}" = "${charts:-x}" ] || fail "$name: $rendered of $charts charts drew: $body"
    [ -z "$errors" ] || fail "$name: the page reported $errors errors: $body"
    # the page writes nothing to the console: any console line is an error
    if grep -E ':CONSOLE|Uncaught ' "$tmp/$name.log" >/dev/null; then
        fail "$name: console errors: $(grep -E 'CONSOLE|Uncaught' "$tmp/$name.log" | head -3)"
    fi
    # every text drawn on a chart lies inside its canvas (the time charts and,
    # with --tune, the Pareto chart must have drawn some)
    local want="c-mem c-frag c-hist" id l r w last
    [ "$charts" = 5 ] && want="$want c-tune"
    [ "$charts" = 2 ] && want="c-map c-hist" # a snapshot's segments: no series
    for id in $want; do
        grep -q "data-text-$id=" <<<"$body" || fail "$name: no text drawn on $id: $body"
    done
    while read -r id l r w last; do
        if [ "$l" -lt 0 ] || [ "$r" -gt "$w" ]; then
            fail "$name: text on $id spans $l..$r px, outside the canvas (0..$w px): '$last'"
        fi
    done < <(sed 's/ data-/\n/g' <<<"$body" | sed -n 's/^text-\([a-z-]*\)="\(.*\)".*/\1 \2/p')
    if [ -n "$max_ms" ] && { [ -z "$ms" ] || [ "$ms" -ge "$max_ms" ]; }; then
        fail "$name: drawn after ${ms:-?} ms (limit $max_ms)"
    fi
    rm -rf "$prof"
    timeout 120 "$browser" "${flags[@]}" --user-data-dir="$prof" --window-size=1280,1800 \
        --screenshot="$shots/$name.png" "file://$page" >/dev/null 2>&1 ||
        fail "$name: screenshot failed"
    [ -s "$shots/$name.png" ] || fail "$name: no screenshot"
    echo "ok: $name ($(stat -c %s "$page") bytes, $rendered/$charts charts, ${ms:-?} ms)"
}

report() { # report INPUT NAME [extra args...]
    local in=$1 name=$2
    shift 2
    "$cli" report "$in" -o "$tmp/$name.html" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { fail "report $name: $(cat "$tmp/$name.err")"; return 1; }
    grep -q "^report: $tmp/$name.html" "$tmp/$name.out" || fail "report $name: $(cat "$tmp/$name.out")"
    local a t=""
    for a in "$@"; do [ "$a" = --tune ] && t=tune; done
    embedded "$tmp/$name.html" "$name" $t
}

# ---- the committed trace, as recorded and on a device that OOMs -------------------------------
if report "$data/cs336_attention_microbench.events.csv" attention; then
    open_page "$tmp/attention.html" attention
fi
if report "$data/cs336_attention_microbench.pickle.gz" attention_oom --device-memory 3.6GB; then
    grep -q 'OOM diagnosis' "$tmp/attention_oom.html" || fail "attention_oom: no OOM diagnosis"
    grep -q 'avoided' "$tmp/attention_oom.html" || fail "attention_oom: no candidate avoids the OOM"
    grep -q 'at OOM 1 (event 52)' "$tmp/attention_oom.html" || fail "attention_oom: no OOM map"
    open_page "$tmp/attention_oom.html" attention_oom
fi
# --tune: the tuning result, its Pareto chart (a fifth chart) and the warm-up plan
if report "$data/cs336_attention_microbench.events.csv" attention_tune --tune; then
    page=$tmp/attention_tune.html
    grep -q 'data-charts="5"' "$page" || fail "attention_tune: the Pareto chart is not counted"
    grep -q '<h2>Settings: <code>sublet tune</code></h2>' "$page" || fail "attention_tune: no section"
    grep -q '<code>PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512</code>' "$page" ||
        fail "attention_tune: the PyTorch answer"
    grep -q 'a cached 512 MiB block split by a 2 MiB request at event 35' "$page" ||
        fail "attention_tune: what the answer fixes"
    grep -q '<th>min capacity (smallest device that runs it)</th><td>3606 MiB</td><td>3114 MiB</td>' "$page" ||
        fail "attention_tune: the evidence table"
    grep -q 'policy:stitch,max_split_size_mb:512' "$page" || fail "attention_tune: the Pareto table"
    grep -qF 'SUBLET_ALLOC_CONF=max_split_size_mb:512,warmup:[large:512MiB*6,large:20MiB*2,small:2MiB]' "$page" ||
        fail "attention_tune: the warm-up plan"
    grep -q '9 &rarr; 0 (checked by replay)' "$page" || fail "attention_tune: the plan's effect"
    open_page "$page" attention_tune
fi
"$cli" report "$data/cs336_attention_microbench.events.csv" -o "$tmp/x.html" --threads 2 \
    >/dev/null 2>&1
[ $? = 2 ] || fail "a tuning option without --tune is not a usage error"
"$cli" report "$data/cs336_attention_microbench.events.csv" -o "$tmp/x.html" --tune \
    --cost-model bogus=1 >/dev/null 2>"$tmp/err"
[ $? = 1 ] || fail "a bad cost model is not an error"
grep -q 'bogus' "$tmp/err" || fail "the bad cost model is not named: $(cat "$tmp/err")"

# ---- private pools: a snapshot whose trace cannot be replayed ------------------------------------
# (fuzz/seeds/fuzz_trace_snapshot/private_pools.json, written by tests/test_snapshot_pools.c:
# the default pools, a graph pool (1,0) and a MemPool (0,1), with its trace dropped: a recording
# begun mid-run, whose prelude in private pools cannot be adopted): the page of its segments, each
# pool its own group in the segment map (a label drawn inside the canvas) and in the metrics
pools_full=$here/../fuzz/seeds/fuzz_trace_snapshot/private_pools.json
pools_snap=$tmp/pools_midrun.json
python3 - "$pools_full" "$pools_snap" <<'PY' || fail "pools: cannot write the mid-run copy"
import json, sys
d = json.load(open(sys.argv[1]))
for t in d["device_traces"]:
    t.clear()
json.dump(d, open(sys.argv[2], "w"))
PY
if report "$pools_snap" pools; then
    page=$tmp/pools.html
    grep -q 'data-charts="2"' "$page" || fail "pools: the charts counted are not the map and the sizes"
    grep -q 'the trace could not be replayed (prelude row ' "$page" || fail "pools: no word on the replay"
    grep -q 'the page shows the snapshot.s segments' "$tmp/pools.err" || fail "pools: no note"
    for p in "default pools (0,0)" "private pool (0,1)" "private pool (1,0)"; do
        grep -q "\"$p\"" "$page" || fail "pools: $p is not in the page's data"
    done
    if open_page "$page" pools && body=$(grep -o '<body[^>]*>' "$tmp/pools.dom" | head -1); then
        labels=$(sed -n 's/.*data-map-labels="\([^"]*\)".*/\1/p' <<<"$body")
        w=$(sed -n 's/.*data-text-c-map="[-0-9]* [0-9]* \([0-9]*\) .*/\1/p' <<<"$body")
        n=0
        for p in "default pools (0,0)" "private pool (0,1)" "private pool (1,0)"; do
            grep -qF "|$p: " <<<"$labels" || fail "pools: no label for $p in the segment map: $labels"
        done
        while IFS=@ read -r text box; do
            [ -n "$text" ] || continue
            n=$((n + 1))
            l=${box%..*} r=${box#*..}
            { [ "$l" -ge 0 ] && [ "$r" -le "${w:-0}" ]; } || fail "pools: label '$text' at $box outside 0..$w"
        done < <(tr '|' '\n' <<<"$labels")
        [ $n = 3 ] || fail "pools: $n map labels, not 3: $labels"
        tbl=$(grep -o '<table id="metrics">.*</table>' "$tmp/pools.dom" | head -1)
        grep -q '<th>private pool (1,0)</th><td>22.00 MiB reserved, ' <<<"$tbl" ||
            fail "pools: no metrics row for the graph pool"
        grep -q '<th>default pools (0,0)</th>' <<<"$tbl" || fail "pools: no metrics row for the default pools"
    fi
fi
# the whole snapshot replays pool by pool (docs/replay.md): the full page, every pool in its data
if report "$pools_full" pools_full; then
    grep -q 'could not be replayed' "$tmp/pools_full.html" && fail "pools_full: the replay was refused"
    grep -q 'data-charts="2"' "$tmp/pools_full.html" && fail "pools_full: the page of the segments only"
    for p in "default pools (0,0)" "private pool (0,1)" "private pool (1,0)"; do
        grep -q "\"$p\"" "$tmp/pools_full.html" || fail "pools_full: $p is not in the page's data"
    done
fi

# the page is self-contained: nothing it loads comes from elsewhere
if grep -Eo '(src|href)="[^"#]+' "$tmp/attention_oom.html" | grep -v '^$' >/dev/null; then
    fail "the page refers to outside resources: $(grep -Eo '(src|href)="[^"#]+' "$tmp/attention_oom.html" | head -3)"
fi
# the write is atomic: a failed write leaves the old page
cp "$tmp/attention.html" "$tmp/keep.html"
SUBLET_TEST_FAIL_WRITE_AFTER=100 "$cli" report "$data/cs336_attention_microbench.events.csv" \
    -o "$tmp/keep.html" >/dev/null 2>"$tmp/err" && fail "a failing write reported success"
cmp -s "$tmp/attention.html" "$tmp/keep.html" || fail "a failed write changed the old page"
"$cli" report "$data/cs336_attention_microbench.events.csv" >/dev/null 2>&1 &&
    fail "report without -o succeeded"

# ---- every shared trace ----------------------------------------------------------------------------
if [ -d "$shared/traces/pytorch_snapshot" ]; then
    for f in "$shared"/traces/pytorch_snapshot/*; do
        [ -f "$f" ] || continue
        name=$(basename "$f")
        name=${name//./_}
        if report "$f" "$name"; then
            open_page "$tmp/$name.html" "$name"
        fi
    done
    # with the tuning result: an answer that is policy:stitch, and a plan with
    # expandable segments for the PyTorch answer
    f=$shared/traces/pytorch_snapshot/small_cnn_counterfactual.pickle.gz
    if [ -f "$f" ] && report "$f" small_cnn_tune --tune; then
        grep -q '<code>SUBLET_ALLOC_CONF=policy:stitch</code>' "$tmp/small_cnn_tune.html" ||
            fail "small_cnn_tune: the sublet answer"
        grep -q 'for the PyTorch answer: policy:stitch has none' "$tmp/small_cnn_tune.html" ||
            fail "small_cnn_tune: whose plan"
        grep -qF 'expandable_segments:True,warmup:[large:' "$tmp/small_cnn_tune.html" ||
            fail "small_cnn_tune: the plan"
        open_page "$tmp/small_cnn_tune.html" small_cnn_tune
    fi
else
    echo "note: no shared traces at $shared/traces/pytorch_snapshot" >&2
fi

# ---- 10^6 events: small and fast -------------------------------------------------------------------
if command -v python3 >/dev/null 2>&1; then
    python3 "$here/gen_trace.py" 1000000 "$tmp/million.csv" || fail "gen_trace.py"
    start=$(date +%s%N)
    if report "$tmp/million.csv" million; then
        secs=$(( ($(date +%s%N) - start) / 1000000 ))
        size=$(stat -c %s "$tmp/million.html")
        echo "million: report written in $secs ms, $size bytes"
        [ "$size" -lt 5000000 ] || fail "million: the report is $size bytes (limit 5 MB)"
        open_page "$tmp/million.html" million 2000
    fi
else
    echo "note: no python3: the 10^6-event check is skipped" >&2
fi

[ $fails = 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "all report checks passed"
