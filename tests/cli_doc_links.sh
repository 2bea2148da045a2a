#!/usr/bin/env bash
# sublet — every link of README.md and docs/*.md to a local file, and every
# #anchor, resolves: the file exists (relative to the page), and the anchor is
# a heading of the target page under GitHub's rule (lowercase; spaces to '-';
# punctuation other than '-' and '_' dropped; a repeated heading gets -1, -2,
# ...) or an explicit <a name="..."> / id="...".  Links inside code (fenced
# blocks, `spans`) and to other sites are not checked.  Then the check is shown
# to fail, naming page, line and link, on a copy with a broken file link and a
# broken anchor.  Usage: cli_doc_links.sh [SUBLET] (the argument is unused:
# ctest passes the CLI to every cli_*.sh).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/check.py" <<'EOF'
import os, re, sys

def strip_code(lines):
    """The lines with fenced blocks blanked and `code spans` removed."""
    out, fence = [], None
    for line in lines:
        m = re.match(r'^\s*(```+|~~~+)', line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append('')
            continue
        if m:
            fence = m.group(1)
            out.append('')
            continue
        out.append(re.sub(r'(`+)(?:(?!\1).)+?\1', '', line))
    return out

def slug(text):
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)   # links: their text
    text = re.sub(r'<[^>]+>', '', text)                       # inline HTML
    text = text.replace('`', '').strip().lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')

anchors_of = {}
def anchors(path):
    if path not in anchors_of:
        seen, found = {}, set()
        lines = open(path, encoding='utf-8').read().split('\n')
        fence = None
        for line in lines:
            m = re.match(r'^\s*(```+|~~~+)', line)
            if fence:
                if m and m.group(1)[0] == fence[0]:
                    fence = None
                continue
            if m:
                fence = m.group(1)
                continue
            h = re.match(r'^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$', line)
            if h:
                s = slug(h.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else '%s-%d' % (s, n))
            for a in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                found.add(a)
        anchors_of[path] = found
    return anchors_of[path]

link_re = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
ref_re = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$')
bad = 0
for page in sys.argv[1:]:
    here = os.path.dirname(page)
    text = open(page, encoding='utf-8').read().split('\n')
    for no, line in enumerate(strip_code(text), 1):
        targets = link_re.findall(line)
        m = ref_re.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if re.match(r'^[a-z][a-z0-9+.-]*:', t, re.I):   # http:, mailto:, ...
                continue
            file, _, anchor = t.partition('#')
            dest = os.path.normpath(os.path.join(here, file)) if file else page
            if not os.path.exists(dest):
                print('%s:%d: %s: no file %s' % (page, no, t, dest))
                bad += 1
                continue
            if anchor and dest.endswith('.md') and anchor not in anchors(dest):
                print('%s:%d: %s: no heading or anchor "%s" in %s' % (page, no, t, anchor, dest))
                bad += 1
print('%d page(s) checked, %d broken link(s)' % (len(sys.argv) - 1, bad))
sys.exit(1 if bad else 0)
EOF

fails=0
cd "$root" || exit 1
pages=(README.md docs/*.md)
if ! python3 "$tmp/check.py" "${pages[@]}"; then
    echo "FAIL: broken links above" >&2
    fails=$((fails + 1))
fi

# The check itself: a copy with a missing file and a missing anchor must fail,
# naming both; a repeated heading's -1 anchor and an explicit anchor must pass.
mkdir -p "$tmp/t/docs"
cat >"$tmp/t/docs/a.md" <<'EOF'
# Page A
## Twice
## Twice
## `sublet tune`: the (best) one, 2.6
<a name="here"></a>
[ok](#twice-1) [ok](#sublet-tune-the-best-one-26) [ok](#here) [ok](b.md#b-heading)
`[not a link](nowhere.md)`
[missing file](nowhere.md)
[missing anchor](b.md#no-such-heading)
EOF
printf '# B heading\n' >"$tmp/t/docs/b.md"
out=$(cd "$tmp/t" && python3 "$tmp/check.py" docs/a.md docs/b.md)
rc=$?
[ "$rc" = 1 ] || { echo "FAIL: planted broken links: exit $rc, not 1" >&2; fails=$((fails + 1)); }
for want in 'docs/a.md:8: nowhere.md: no file' 'docs/a.md:9: b.md#no-such-heading: no heading or anchor "no-such-heading"' '2 broken link(s)'; do
    grep -qF "$want" <<<"$out" || { echo "FAIL: planted: no line '$want' in:" >&2; echo "$out" >&2; fails=$((fails + 1)); }
done

[ "$fails" = 0 ] && echo "cli_doc_links: PASS"
exit $((fails > 0))
