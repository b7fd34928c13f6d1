#!/usr/bin/env bash
# The tree keeps its shape (scripts/code_shape.py --check): no "../"
# includes, no folder that includes one above it, no function over 80 lines.
# The check itself must fail on a copy of the tree with each rule broken.
# And the build's include views: a layers/ file that includes a core stage's
# header does not compile, while one naming its own folder's does.
# Usage: code_shape.sh BURSTPOOL_BINARY SOURCE_DIR
set -u
source "$(dirname "$0")/lib/harness.sh" "$@"

python3 "$src/scripts/code_shape.py" --check >"$work/shape.out" 2>&1 ||
  fail "the tree breaks its rules: $(grep PROBLEM "$work/shape.out" | head -5)"
grep -q "^levels: " "$work/shape.out" || fail "no include graph printed: $(head -3 "$work/shape.out")"

# Each rule broken once in a copy.
mkdir -p "$work/tree/scripts"
cp -r "$src/src" "$src/layers" "$src/comm" "$src/cuda" "$src/include" "$work/tree/"
cp "$src/scripts/code_shape.py" "$work/tree/scripts/"
printf '#include "../comm/wait.hpp"\n' >>"$work/tree/layers/pool.cpp"
printf '#include "sync/learners.hpp"\n' >>"$work/tree/layers/merge.cpp"
printf '#include "job/job_schema.hpp"\n' >>"$work/tree/src/io/data.cpp"
{
  echo "namespace burstpool { int too_long() {"
  for i in $(seq 1 90); do echo "  int v$i = $i;"; done
  echo "  return 0; } }"
} >>"$work/tree/src/base/files.cpp"
python3 "$work/tree/scripts/code_shape.py" --check >"$work/broken.out" 2>&1 && fail "--check passed a broken tree"
for want in 'layers/pool.cpp: includes "../comm/wait.hpp"' "folder 'layers' may not include 'sync'" \
            '"job/job_schema.hpp" does not exist' 'too_long is 92 lines'; do
  grep -qF "$want" "$work/broken.out" || fail "--check did not say: $want"
done

# The views: compile a probe with layers/activation.cpp's own command line.
build=$(dirname "$bin")
if [[ -f "$build/compile_commands.json" ]]; then
  probe() {  # probe INCLUDE: compiles a file holding that include as layers/ would
    printf '#include "%s"\nint main() { return 0; }\n' "$1" >"$work/probe.cpp"
    python3 - "$build/compile_commands.json" "$src/layers/activation.cpp" "$work/probe.cpp" <<'PY'
import json, shlex, subprocess, sys
db, source, probe = sys.argv[1:]
entry = next(e for e in json.load(open(db)) if e["file"] == source)
args = shlex.split(entry["command"])
args = [probe if a == source else a for a in args]
if "-o" in args:
    args[args.index("-o") + 1] = probe + ".o"
sys.exit(subprocess.run(args, cwd=entry["directory"], capture_output=True).returncode)
PY
  }
  probe "layers/kernels.hpp" || fail "a layers/ file cannot include its own folder's header"
  probe "sync/learners.hpp" && fail "a layers/ file compiled with a core stage's header: the views leak"
  probe "comm/wait.hpp" && fail "a layers/ file compiled with comm's header, which it does not link"
else
  fail "no compile_commands.json in $build"
fi
finish code_shape
