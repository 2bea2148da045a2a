#!/usr/bin/env bash
# Replay kept inputs through a fuzz target, each once, without fuzzing:
#   fuzz/replay.sh BUILD/fuzz/fuzz_x DIR...
# Directories that do not exist or are empty are skipped; with none left the
# replay passes.  Any crash, sanitizer report or failed check exits non-zero
# (libFuzzer's -runs=0 over the directories: every file is executed once).
set -euo pipefail
bin=$1
shift
dirs=()
for d in "$@"; do
  [ -d "$d" ] || continue
  if find "$d" -maxdepth 1 -type f ! -name '.*' ! -name 'README*' | grep -q .; then
    dirs+=("$d")
  fi
done
if [ ${#dirs[@]} -eq 0 ]; then
  echo "replay: $(basename "$bin"): no kept inputs"
  exit 0
fi
# Pass the files one by one (libFuzzer runs each file argument once), so that
# README files and dot-files in the directories are not fed as inputs.
files=()
for d in "${dirs[@]}"; do
  while IFS= read -r f; do files+=("$f"); done < <(find "$d" -maxdepth 1 -type f ! -name '.*' ! -name 'README*' | sort)
done
echo "replay: $(basename "$bin"): ${#files[@]} input(s) from ${dirs[*]}"
exec "$bin" -runs=1 "${files[@]}"
