#!/usr/bin/env bash
# The README's and docs' commands against the code (tests/docs_commands.py):
# no flag a subcommand or script lacks, no --set key `burstpool keys` does not
# list, no input file that does not exist; the checker itself catches each
# kind in a planted page; and the README's claims table is docs/results.md's.
# Usage: docs_commands.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

python3 "$src/tests/docs_commands.py" "$bin" "$src" >"$work/real.out" 2>&1 || fail "docs: $(cat "$work/real.out")"
tail -1 "$work/real.out"

cat >"$work/planted.md" <<'MD'
Text.

    build/burstpool train JOB.ini --bogus --set job.nokey=1 --set job.device=cuda
    bash scripts/nothing.sh
    python3 perf/shaped_study.py --rounds 3 --nonsense
    sbatch slurm/train.sbatch JOB.ini --plan auto --wrong

```
mpirun -np 2 build/burstpool plan MODEL --ranks 2 --nosuch
```
MD
python3 "$src/tests/docs_commands.py" "$bin" "$src" "$work/planted.md" >"$work/planted.out" 2>&1 &&
  fail "a planted page passed"
for expected in "burstpool train has no flag --bogus" "--set job.nokey: not a key" "scripts/nothing.sh does not exist" \
  "perf/shaped_study.py has no flag --nonsense" "slurm/train.sbatch (burstpool train) has no flag --wrong" \
  "burstpool plan has no flag --nosuch"; do
  grep -qF -- "$expected" "$work/planted.out" || fail "planted: not caught: $expected"
done
grep -q "job.device" "$work/planted.out" && fail "planted: a real key reported: $(cat "$work/planted.out")"

table() { awk '/^\| claim \| figure/ {on = 1} on && /^\|/ {print} on && !/^\|/ {exit}' "$1"; }
[[ -n $(table "$src/docs/results.md") ]] || fail "docs/results.md has no claims table"
[[ $(table "$src/README.md") == "$(table "$src/docs/results.md")" ]] ||
  fail "the README's claims table is not docs/results.md's: $(diff <(table "$src/README.md") <(table "$src/docs/results.md") | head -5)"
finish docs_commands
