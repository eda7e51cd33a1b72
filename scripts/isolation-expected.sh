#!/usr/bin/env bash
# Make expected/<spec>.out for every spec in specs/ from a run on heap
# tables: anker must give exactly the output heap gives.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
for s in specs/*.spec; do
    n=$(basename "$s" .spec)
    [ -f "expected/$n.out" ] || : > "expected/$n.out"
done
ANKER_KEEP_WORK=1 ANKER_ISOLATION_AM=heap ANKER_SKIP=engine,regress,server,kernel,bench ./test.sh | tail -n 3 || true
work=$(ls -dt /tmp/anker-test.* | head -n 1)
for s in specs/*.spec; do
    n=$(basename "$s" .spec)
    cp "$work/isolation/results/$n.out" "expected/$n.out"
    echo "expected/$n.out (from heap)"
done
rm -rf "$work"
