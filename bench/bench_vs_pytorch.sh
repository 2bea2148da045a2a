#!/usr/bin/env bash
# bench_vs_pytorch.sh — sublet's cached malloc+free pair against PyTorch's own allocator, on
# exactly the same call sequences, in the same run.
#
# PyTorch's side is PyTorch 2.6's real c10 CUDA caching allocator, built on the CPU by the test
# oracle (libc10.a and the fake runtime libcuda.so.1: see the oracle's README) and driven by
# bench/torch_pairs.cpp; sublet's side is bench/bench_pairs.c on the sim backend.  Both generate
# their calls from bench/pairs_seq.h (the same seeds, the same sizes file):
#   trace  bench_hotpath's sequence: N live blocks and N cached ones of a real trace's sizes,
#          2^20 timed pairs of the same sizes;
#   split  512 B x 1..64 pairs beside N live and N cached larger blocks: a split and a merge on
#          (nearly) every pair (the split column: checked pairs that split, from sublet's walk).
# For each sequence and N in {10, 10^3, 10^5, 10^6}: ROUNDS runs of each side, alternating
# (which side goes first alternates too); each run reports the median of 5 timed passes of 2^20
# pairs after a warm-up pass; the table shows the median over the rounds.  Each run checks that
# no device allocation happened in its timed passes, and an untimed pass hashes every returned
# address (as an offset from the setup's lowest): "same" means both sides handed out the same
# block for every pair, i.e. made the same decisions and did the same work.
# Both sides are compiled -O2: sublet in a RelWithDebInfo build (-O2 -g), libc10.a by the
# oracle's CMakeLists.txt (-O2), torch_pairs.cpp here (-O2).  The bar: sublet/PyTorch <= 0.5
# on every row.
#
# Usage: bench/bench_vs_pytorch.sh [--oracle DIR] [--build DIR] [--rounds R] [--live "N ..."]
#   --oracle  the oracle's build folder (default $SUBLET_ORACLE_DIR, else /tmp/torch-oracle):
#             it holds build/libc10.a, build/libcuda.so.1 and build/CMakeCache.txt
#   --build   sublet's build folder (default build/; configured RelWithDebInfo when new)
#   --rounds  runs per side and point (default 3)
#   --live    the live-block counts (default "10 1000 100000 1000000")
# Runtime: about 4 minutes of CPU (12 minutes of wall time on a loaded 2-core machine), mostly
# the 10^6 setups (PyTorch's takes about 14 s there); --rounds and --live shorten it.
# Exit status: 0 when every run succeeded and every row's blocks were the same (whether the bar
# is met is printed, not the exit status: timings are never asserted); 1 otherwise; 2 on a
# usage or build problem.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ORACLE=${SUBLET_ORACLE_DIR:-/tmp/torch-oracle}
BUILD=$ROOT/build
ROUNDS=3
LIVE="10 1000 100000 1000000"
while [ $# -gt 0 ]; do
  case $1 in
    --oracle) ORACLE=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --live) LIVE=$2; shift 2 ;;
    *) echo "usage: $0 [--oracle DIR] [--build DIR] [--rounds R] [--live \"N ...\"]" >&2; exit 2 ;;
  esac
done

OB=$ORACLE/build
for f in "$OB/libc10.a" "$OB/libcuda.so.1" "$OB/CMakeCache.txt"; do
  if [ ! -f "$f" ]; then
    echo "bench_vs_pytorch: no $f: build the PyTorch oracle first (its build.sh, OUT=$ORACLE)," \
         "or pass its folder with --oracle / SUBLET_ORACLE_DIR" >&2
    exit 2
  fi
done
cache() { sed -n "s/^$1:[A-Z]*=//p" "$OB/CMakeCache.txt" | head -1; }
PT=$(cache PT)
OSRC=$(cache CMAKE_HOME_DIRECTORY)

# sublet's side
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target bench_pairs >/dev/null
CFLAGS_USED=$(sed -n 's/^C_FLAGS = //p' "$BUILD/CMakeFiles/bench_pairs.dir/flags.make" 2>/dev/null || true)

# PyTorch's side: the include paths and flags of the oracle's CMakeLists.txt
TP=$BUILD/torch_pairs
if [ ! -x "$TP" ] || [ "$ROOT/bench/torch_pairs.cpp" -nt "$TP" ] || [ "$ROOT/bench/pairs_seq.h" -nt "$TP" ] \
   || [ "$OB/libc10.a" -nt "$TP" ]; then
  g++ -std=c++17 -O2 -DPYTORCH_C10_DRIVER_API_SUPPORTED \
    -I"$OB/gen" -I"$PT" -I/usr/local/cuda/include -I"$OSRC" -I"$OSRC/include" -I"$ROOT/bench" \
    "$ROOT/bench/torch_pairs.cpp" -o "$TP" \
    "$OB/libc10.a" "$OB/libcuda.so.1" -Wl,-rpath,"$OB" -lfmt -lpthread -ldl
fi

LOG=$BUILD/bench_vs_pytorch.log
: > "$LOG"
echo "# sublet: $BUILD/bench_pairs (C flags: ${CFLAGS_USED:-unknown})"
echo "# PyTorch: $TP (g++ -O2) on $OB/libc10.a (-O2), PyTorch source $PT"
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start; raw lines in $LOG"

cd "$ROOT"   # the drivers find bench/data/decomfl_alloc_sizes.txt from here
run() {  # run SIDE SEQ N: the result line, or nothing on failure
  local bin=$BUILD/bench_pairs
  [ "$1" = pytorch ] && bin=$TP
  env -u PYTORCH_CUDA_ALLOC_CONF "$bin" "$2" "$3" 2>>"$LOG" | tee -a "$LOG" || true
}
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" | head -1; }
med() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

fail=0; bar=1; missed=""
printf '\n%-8s %9s %12s %12s %9s %6s %7s\n' sequence live "sublet ns" "PyTorch ns" "ratio" blocks split
for seq in trace split; do
  for n in $LIVE; do
    s_ns=""; t_ns=""; s_hash=""; t_hash=""; same=same; split=-
    for r in $(seq 1 "$ROUNDS"); do
      if [ $((r % 2)) = 1 ]; then order="sublet pytorch"; else order="pytorch sublet"; fi
      for side in $order; do
        out=$(run "$side" "$seq" "$n")
        line=$(echo "$out" | grep "^impl=" || true)
        if [ -z "$line" ]; then
          echo "bench_vs_pytorch: $side $seq live=$n failed (see $LOG)" >&2; fail=1; same=FAILED; continue
        fi
        ns=$(echo "$line" | field ns_per_pair); h=$(echo "$line" | field addr_hash)
        if [ "$side" = sublet ]; then
          s_ns="$s_ns $ns"; s_hash=$h
          sp=$(echo "$out" | field split_pairs); [ -n "$sp" ] && split=$sp
        else
          t_ns="$t_ns $ns"; t_hash=$h
        fi
      done
      if [ -n "$s_hash" ] && [ -n "$t_hash" ] && [ "$s_hash" != "$t_hash" ] && [ "$same" = same ]; then
        same=DIFFER; fail=1
      fi
    done
    sm=$(echo $s_ns | tr ' ' '\n' | grep . | med); tm=$(echo $t_ns | tr ' ' '\n' | grep . | med)
    ratio=$(awk -v a="$sm" -v b="$tm" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }')
    printf '%-8s %9s %12s %12s %9s %6s %7s\n' "$seq" "$n" "$sm" "$tm" "$ratio" "$same" "$split"
    if [ "$ratio" = nan ] || awk -v x="$ratio" 'BEGIN { exit !(x > 0.5) }'; then
      bar=0; missed="$missed $seq@$n"
    fi
  done
done
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) at end"
if [ $bar = 1 ]; then
  echo "bar (sublet/PyTorch <= 0.5 on every row): MET"
else
  echo "bar (sublet/PyTorch <= 0.5 on every row): MISSED on$missed"
fi
exit $fail
