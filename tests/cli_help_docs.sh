#!/usr/bin/env bash
# sublet — `sublet --help` and `sublet CMD --help` list the same commands,
# options, arguments and defaults as docs/cli.md, the reference.  For every
# command in `sublet --help` (its "commands:" list, whatever commands it
# names) the options are parsed from `sublet CMD --help` (lines "  [-x, ]--opt
# [ARG]  what", the what continued on more indented lines; the default is what
# follows the word "default", up to the first '(', ')', ';' or ':') and from the
# table under "## sublet CMD" in docs/cli.md (columns option, argument,
# default, what; "—" for none), and every difference is named: a command with
# no section or a section with no command, an option in one and not the
# other, another argument, another default.  And each option that takes a
# value, given none (`sublet CMD --opt`), must be a usage error (exit 2) whose
# first line names the option.  Then the check is shown to
# catch a planted difference of each kind.  $1 is the CLI.
set -u
cli=${1:?usage: cli_help_docs.sh PATH_TO_SUBLET}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/check.py" <<'EOF'
import re, subprocess, sys

cli, doc = sys.argv[1], sys.argv[2]
NONE = '—'

def norm(s):
    s = re.sub(r'\s+', ' ', s.replace('`', '')).strip().strip('.').strip()
    return s.strip('"\'') or NONE

def default_of(what):
    m = re.search(r'\bdefault\b:?\s*([^();:]*)', what)
    return norm(m.group(1)) if m else NONE

OPT = re.compile(r'^(\s+)(?:(-[A-Za-z]), )?(--[a-z][a-z0-9-]*)(?: ([A-Z][A-Za-z.]*))?(?:\s{2,}(.*))?$')

def help_options(text):
    """{--long: (short, ARG, default)} from a command's --help."""
    opts, cur, lines = {}, None, text.split('\n')
    for line in lines + ['']:
        m = OPT.match(line)
        if m:
            if cur:
                opts[cur[0]] = (cur[1], cur[2], default_of(' '.join(cur[4])))
            cur = [m.group(3), m.group(2) or '', m.group(4) or '', len(m.group(1)), [m.group(5) or '']]
        elif cur and line.strip() and len(line) - len(line.lstrip()) > cur[3] + 2:
            cur[4].append(line.strip())
        elif cur:
            opts[cur[0]] = (cur[1], cur[2], default_of(' '.join(cur[4])))
            cur = None
    return opts

def run(args):
    p = subprocess.run([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    return p.returncode, p.stdout

def commands(text):
    out, inside = [], False
    for line in text.split('\n'):
        if line.startswith('commands:'):
            inside = True
        elif inside:
            if not line.startswith('  '):
                break
            m = re.match(r'^  ([a-z][a-z0-9-]*)\s', line)
            if m and m.group(1) != 'help':
                out.append(m.group(1))
    return out

def doc_sections(path):
    """{cmd: {--long: (short, ARG, default)}} from the tables of docs/cli.md."""
    secs, cur, table = {}, None, False
    for line in open(path, encoding='utf-8'):
        line = line.rstrip('\n')
        m = re.match(r'^## sublet ([a-z][a-z0-9-]*)\s*$', line)
        if m:
            cur, table = m.group(1), False
            secs[cur] = {}
            continue
        if line.startswith('## '):
            cur = None
            continue
        if cur is None:
            continue
        if re.match(r'^\|\s*option\s*\|', line):
            table = True
            continue
        if table and line.startswith('|'):
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            if set(cells[0]) <= set('-: '):
                continue
            names = re.findall(r'`(--?[A-Za-z][A-Za-z0-9-]*)`', cells[0])
            long = [n for n in names if n.startswith('--')]
            short = [n for n in names if not n.startswith('--')]
            if not long or len(cells) < 4:
                print('docs/cli.md: sublet %s: cannot read the row: %s' % (cur, line))
                secs[cur]['?' + line] = None
                continue
            arg = cells[1].replace('`', '').strip()
            secs[cur][long[0]] = (short[0] if short else '', '' if arg == NONE else arg,
                                  norm(cells[2]))
        elif table:
            table = False
    return secs

bad = 0
def diff(msg):
    global bad
    print(msg)
    bad += 1

rc, top = run(['--help'])
cmds = commands(top)
if rc != 0 or not cmds:
    diff('sublet --help: exit %d, %d commands read' % (rc, len(cmds)))
docs = doc_sections(doc)
for c in cmds:
    if c not in docs:
        diff('sublet %s: in `sublet --help`, no section "## sublet %s" in docs/cli.md' % (c, c))
for c in docs:
    if c not in cmds:
        diff('sublet %s: a section in docs/cli.md, not a command of `sublet --help`' % c)
for c in cmds:
    rc, text = run([c, '--help'])
    if rc != 0:
        diff('sublet %s --help: exit %d' % (c, rc))
        continue
    h, d = help_options(text), docs.get(c)
    # an option that takes a value, given none: a usage error naming it
    for o in h:
        if h[o][1]:
            p = subprocess.run([cli, c, o], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            first = p.stderr.split('\n')[0]
            if p.returncode != 2 or o not in first:
                diff('sublet %s %s (no value): exit %d, "%s": not a usage error naming %s' %
                     (c, o, p.returncode, first, o))
    if d is None:
        continue
    for o in h:
        if o not in d:
            diff('sublet %s: %s is in --help, not in docs/cli.md' % (c, o))
    for o in d:
        if o not in h:
            diff('sublet %s: %s is in docs/cli.md, not in --help' % (c, o))
    for o in h:
        if o in d and d[o] is not None:
            for k, name in enumerate(('short form', 'argument', 'default')):
                if h[o][k] != d[o][k]:
                    diff('sublet %s: %s: %s "%s" in --help, "%s" in docs/cli.md' %
                         (c, o, name, h[o][k], d[o][k]))
print('%d command(s) compared, %d difference(s)' % (len(cmds), bad))
sys.exit(1 if bad else 0)
EOF

fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
python3 "$tmp/check.py" "$cli" "$root/docs/cli.md" || fail "help and docs/cli.md differ (above)"

# The check itself, on a fake CLI and a planted docs page: each kind of
# difference is named, and a matching pair passes.
cat >"$tmp/fake" <<'EOF'
#!/usr/bin/env bash
case "$1 $2" in
"--help ") printf 'usage: fake COMMAND\ncommands:\n  one FILE [options]   the first\n                       command\n  two                  the second\n  help [COMMAND]       this\n  --version            v\nmore text\n  three    not a command\n' ;;
"one --help") printf 'usage: fake one FILE\noptions:\n  -o, --out FILE   where (default: next\n                   to FILE; or not)\n  --size SIZE      how big (default 8MiB)\n  --flag           a flag\n' ;;
"two --help") printf 'usage: fake two\n  --mode MODE  a or b (default a)\n' ;;
"one --out") echo "fake one: --out needs a value" >&2; exit 2 ;;
"one --size") echo "fake one: --size needs a value" >&2; exit 2 ;;
"two --mode") [ -n "${FAKE_BAD:-}" ] && exit 0; echo "fake two: --mode needs a value" >&2; exit 2 ;;
*) exit 2 ;;
esac
EOF
chmod +x "$tmp/fake"
good='# fake

## sublet one

| option | argument | default | what |
|---|---|---|---|
| `-o`, `--out` | `FILE` | next to FILE | where |
| `--size` | `SIZE` | `8MiB` | how big |
| `--flag` | — | — | a flag |

## sublet two

| option | argument | default | what |
|---|---|---|---|
| `--mode` | `MODE` | a | a or b |
'
printf '%s' "$good" >"$tmp/good.md"
python3 "$tmp/check.py" "$tmp/fake" "$tmp/good.md" >"$tmp/out" || { fail "a matching pair fails:"; cat "$tmp/out" >&2; }
bad=${good//'| `--size` | `SIZE` | `8MiB`'/'| `--size` | `N` | `4MiB`'}
bad=${bad//'| `--flag` | — | — | a flag |'/'| `--other` | — | — | another |'}
bad=${bad//'## sublet two'/'## sublet three'}
printf '%s' "$bad" >"$tmp/bad.md"
FAKE_BAD=1 python3 "$tmp/check.py" "$tmp/fake" "$tmp/bad.md" >"$tmp/out"
[ $? = 1 ] || fail "planted differences: exit not 1"
for want in 'sublet two: in `sublet --help`, no section' 'sublet three: a section in docs/cli.md, not a command' \
            'sublet one: --flag is in --help, not in docs/cli.md' 'sublet one: --other is in docs/cli.md, not in --help' \
            'sublet one: --size: argument "SIZE" in --help, "N" in docs/cli.md' \
            'sublet one: --size: default "8MiB" in --help, "4MiB" in docs/cli.md' \
            'sublet two --mode (no value): exit 0, "": not a usage error naming --mode' '7 difference(s)'; do
    grep -qF -- "$want" "$tmp/out" || { fail "planted: no line '$want' in:"; cat "$tmp/out" >&2; }
done

[ "$fails" = 0 ] && echo "cli_help_docs: PASS"
exit $((fails > 0))
