# Shared set-up for scripts/demo and scripts/test (sourced, not run).
# Each step is idempotent and prints one line of progress.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$root/.venv

step() { printf '==> %s\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

apt_install() {
  [ "$(id -u)" = 0 ] || fail "missing system packages ($*); install them with: sudo apt-get install -y $*"
  command -v apt-get >/dev/null || fail "missing system packages ($*) and no apt-get to install them"
  if [ -z "${_apt_updated:-}" ]; then
    step "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || fail "apt-get update failed"
    _apt_updated=1
  fi
  step "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade "$@" >/dev/null \
    || fail "apt-get install $* failed"
}

# A PostgreSQL server, unless PGBUS_DATABASE_URL names one already.
ensure_postgres_packages() {
  [ -n "${PGBUS_DATABASE_URL:-}" ] && return 0
  "$root/scripts/pg" bindir >/dev/null 2>&1 || apt_install postgresql
}

ensure_pgtap() {
  local sharedir
  sharedir=$(pg_config --sharedir 2>/dev/null || true)
  if ! command -v pg_prove >/dev/null || [ ! -f "$sharedir/extension/pgtap.control" ]; then
    local major
    major=$(pg_config --version 2>/dev/null | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
    apt_install "postgresql-${major:-15}-pgtap" libtap-parser-sourcehandler-pgtap-perl
  fi
}

# Debian's chromium for the browser tests and the accessibility gate (never `playwright install`:
# it downloads a browser build, which this project does not do).
ensure_chromium() {
  [ -x "${PGBUS_CHROMIUM:-/usr/bin/chromium}" ] && return 0
  apt_install chromium
}

ensure_venv() {
  local py=${PYTHON:-python3}
  "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    || fail "pgbus needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)"
  [ -x "$venv/bin/python" ] || { step "creating virtualenv .venv"; "$py" -m venv "$venv"; }
  local stamp=$venv/.pgbus-installed want
  want=$(cat "$root/pyproject.toml" "$root/setup.py" | cksum)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    step "installing pgbus and its test tools into .venv"
    "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
    "$venv/bin/python" -m pip install -q -e "$root[test]" >"$venv/pip.log" 2>&1 \
      || { cat "$venv/pip.log" >&2; fail "installing the Python packages failed"; }
    echo "$want" >"$stamp"
  fi
}

# Sets ADMIN_URL: PGBUS_DATABASE_URL when given, else a local server this script starts
# (and stop_local_postgres stops).
start_postgres() {
  if [ -n "${PGBUS_DATABASE_URL:-}" ]; then
    ADMIN_URL=$PGBUS_DATABASE_URL
    step "using PGBUS_DATABASE_URL"
    return 0
  fi
  step "starting a local PostgreSQL"
  local out
  out=$("$root/scripts/pg" start) || fail "could not start PostgreSQL"
  ADMIN_URL=$(tail -n 1 <<<"$out")
  # Stop it at the end only when this run started it.
  grep -q '^PostgreSQL started' <<<"$out" && STARTED_POSTGRES=1
  return 0
}

stop_local_postgres() {
  [ -n "${STARTED_POSTGRES:-}" ] && "$root/scripts/pg" stop >/dev/null 2>&1
  return 0
}

# A URL for database NAME on the same server as ADMIN_URL.
database_url() {
  "$venv/bin/python" - "$ADMIN_URL" "$1" <<'PY'
import sys
from urllib.parse import urlsplit, urlunsplit
p = urlsplit(sys.argv[1])
print(urlunsplit(p._replace(path="/" + sys.argv[2])))
PY
}

# Drops and creates database NAME (the server's own; never PGBUS_DATABASE_URL's database).
fresh_database() {
  psql "$ADMIN_URL" -v ON_ERROR_STOP=1 -qc "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)" \
    -c "CREATE DATABASE \"$1\"" >/dev/null || fail "could not create database $1"
}
