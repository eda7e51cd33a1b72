#!/usr/bin/env bash
# The main job: set everything up, start a throwaway PostgreSQL with anker
# preloaded, load the same 1M rows into an anker table and a heap table, run
# a few analytical queries on both, print a summary, and shut down cleanly.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$ROOT/scripts/setup.sh"
exec "$ROOT/bench/storage/compare.sh" --rows "${ANKER_DEMO_ROWS:-1000000}" --runs 3
