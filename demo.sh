#!/usr/bin/env bash
# The main job: set everything up, then run the TPC-C + OLAP (HTAP) demo on
# throwaway PostgreSQL clusters with anker preloaded: 2 warehouses, 30 s per
# phase (OLTP alone, OLAP alone, both), on heap and on anker with each
# snapshot provider. Prints the summary table and where the plots are; the
# clusters are shut down cleanly.
#
# ANKER_DEMO_ARGS overrides the benchmark's arguments (see bench/README.md).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$ROOT/scripts/setup.sh"
# shellcheck disable=SC2086
exec "$ROOT/bench/htap.sh" ${ANKER_DEMO_ARGS:---demo}
