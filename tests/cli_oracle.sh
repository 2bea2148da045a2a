#!/usr/bin/env bash
# sublet — the differential test against PyTorch's own allocator (tests/oracle/README.md):
# every events CSV in tests/data and ../shared/traces/pytorch_snapshot through `sublet replay`
# (pytorch_version:2.6) and through PyTorch 2.6's c10 caching allocator built on the CPU
# (replay_torch), under 14 settings, at the default device size and at four tight sizes around
# the smallest device that runs the trace: every figure must be equal.  $1 is the CLI.
#   SUBLET_ORACLE=DIR    the oracle's build folder (default: oracle/ beside the CLI); built
#                        there by tests/oracle/build.sh when it holds no replay_torch
#   SUBLET_NO_ORACLE=1   skip this test (exit 77); without it an oracle that cannot be built
#                        fails the test
set -u
cli=${1:?usage: cli_oracle.sh PATH_TO_SUBLET}
here=$(cd "$(dirname "$0")" && pwd)
data=${SUBLET_TESTDATA:-$here/data}
shared=${SUBLET_SHARED:-$here/../../shared}
if [ "${SUBLET_NO_ORACLE:-0}" = 1 ]; then
    echo "SUBLET_NO_ORACLE=1: the differential test against PyTorch is skipped"
    exit 77
fi
[ -x "$cli" ] || { echo "FAIL: no CLI at $cli" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 is needed" >&2; exit 1; }
oracle=${SUBLET_ORACLE:-$(cd "$(dirname "$cli")" && pwd)/oracle}
if [ ! -x "$oracle/replay_torch" ]; then
    echo "building the oracle into $oracle (tests/oracle/build.sh)"
    "$here/oracle/build.sh" "$oracle" ||
        { echo "FAIL: PyTorch's allocator (the oracle) cannot be built: see above;" \
               "SUBLET_NO_ORACLE=1 skips this test" >&2; exit 1; }
fi
traces=()
for t in "$data"/*.events.csv; do [ -f "$t" ] && traces+=("$t"); done
if [ -d "$shared/traces/pytorch_snapshot" ]; then
    for t in "$shared"/traces/pytorch_snapshot/*.events.csv; do
        # one copy of a trace that tests/data also holds
        [ -f "$t" ] && [ ! -f "$data/$(basename "$t")" ] && traces+=("$t")
    done
else
    echo "no $shared/traces/pytorch_snapshot: only tests/data's traces"
fi
[ ${#traces[@]} -gt 0 ] || { echo "FAIL: no events CSV in $data" >&2; exit 1; }
python3 "$here/oracle/differential.py" "$cli" "$oracle/replay_torch" "${traces[@]}"
