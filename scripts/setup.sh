#!/usr/bin/env bash
# Install what anker needs (Debian packages, cargo-pgrx) and build and install
# the extension into the system PostgreSQL 15. Skips what is already there.
#
#   scripts/setup.sh            release build (what tests and demos use)
#   ANKER_PROFILE=debug scripts/setup.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
PGRX_VERSION=0.18.1

log() { printf '[setup] %s\n' "$*"; }

# ---- Debian packages -------------------------------------------------------
# postgresql-15 and its server headers must come from the same upload, so they
# are always installed together.
pkgs=(postgresql-15 postgresql-server-dev-15 postgresql-contrib sudo clang libclang-dev pkg-config
      build-essential libssl-dev libreadline-dev zlib1g-dev flex bison python3-matplotlib curl)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    for p in "${missing[@]}"; do
        if [ "$p" = postgresql-15 ] || [ "$p" = postgresql-server-dev-15 ]; then
            missing+=(postgresql-15 postgresql-server-dev-15)
            break
        fi
    done
    log "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
else
    log "Debian packages present"
fi
# Debian creates a default cluster on install; we never use it.
if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q '^15 *main .*online'; then
    pg_ctlcluster 15 main stop || true
fi

# ---- Rust and cargo-pgrx -------------------------------------------------------
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
if cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
    log "cargo-pgrx $PGRX_VERSION present"
else
    log "installing cargo-pgrx $PGRX_VERSION (about 9 minutes)"
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi
# Re-running `cargo pgrx init` forces a bindgen rebuild: only when needed.
if grep -qs "pg15 = \"$PG_CONFIG\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
    log "pgrx already initialised for $PG_CONFIG"
else
    log "cargo pgrx init --pg15 $PG_CONFIG"
    cargo pgrx init --pg15 "$PG_CONFIG"
fi

# ---- DuckDB (the analytics engine, docs/analytics.md) -------------------------------
# Prebuilt static archives from a package registry, cached under /var/tmp.
log "DuckDB library: $("$ROOT/scripts/duckdb-prebuilt.sh")"

# ---- build and install -----------------------------------------------------------
profile_flag=--release
[ "${ANKER_PROFILE:-release}" = debug ] && profile_flag=
log "building and installing the extension (${ANKER_PROFILE:-release})"
(cd "$ROOT/extension" && cargo pgrx install $profile_flag --pg-config "$PG_CONFIG" 2>&1 \
    | grep -Ev '^\s*(Compiling|Checking|Fresh)' | tail -n 5)
test -f "$($PG_CONFIG --pkglibdir)/anker.so" || { echo "anker.so was not installed" >&2; exit 1; }
log "done"
