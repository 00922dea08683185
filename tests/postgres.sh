#!/usr/bin/env bash
# A throwaway PostgreSQL for the state-store tests: installed from Debian's packages if missing, run as
# the unprivileged `postgres` user in a temporary directory, listening on 127.0.0.1 only, with its own
# password-protected role and database.
#
#   url=$(bash tests/postgres.sh start)     # prints only the URL on stdout (progress goes to stderr)
#   FLINK_AUTOSCALER_TEST_POSTGRES_URL=$url .venv/bin/pytest tests/unit/state/test_store.py
#   bash tests/postgres.sh stop             # stops the cluster started last and deletes its directory
#
#   bash tests/postgres.sh run CMD ARGS...  # start, run CMD with FLINK_AUTOSCALER_TEST_POSTGRES_URL set, stop
#
# Why not the Debian cluster the package sets up: it needs a service manager and root-owned paths, and
# it outlives the test run. This one lives in its directory and is gone after `stop`.
set -euo pipefail

LAST=${TMPDIR:-/tmp}/flink-autoscaler-postgres.last # the directory of the cluster started last
DB=flink_autoscaler_test
ROLE=autoscaler

say() { echo "postgres.sh: $*" >&2; }

pg_bin() {
	local dir
	for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		[[ -x $dir/initdb && -x $dir/pg_ctl ]] && { echo "$dir"; return 0; }
	done
	return 1
}

ensure_installed() {
	pg_bin >/dev/null && return 0
	say "installing PostgreSQL from Debian's packages"
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
	pg_bin >/dev/null || { say "no initdb/pg_ctl under /usr/lib/postgresql after install"; exit 1; }
}

# Run a command as the unprivileged postgres user (PostgreSQL refuses to run as root).
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
	ensure_installed
	local bin dir port password
	bin=$(pg_bin)
	dir=$(mktemp -d "${TMPDIR:-/tmp}/flink-autoscaler-pg.XXXXXX")
	chmod 700 "$dir"
	[[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
	port=$(free_port)
	password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
	printf '%s\n' "$password" >"$dir/superuser.pw"
	[[ $(id -u) -eq 0 ]] && chown postgres: "$dir/superuser.pw"
	say "initdb in $dir ($("$bin/postgres" --version))"
	as_pg "$bin/initdb" -D "$dir/data" -U postgres --pwfile="$dir/superuser.pw" \
		--auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=50" >&2 ||
		{ cat "$dir/server.log" >&2; exit 1; }
	as_pg "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q >&2 <<-SQL
		CREATE ROLE $ROLE LOGIN PASSWORD '$password';
		CREATE DATABASE $DB OWNER $ROLE;
	SQL
	echo "$dir" >"$LAST"
	echo "$port" >"$dir/port"
	say "running on 127.0.0.1:$port (stop with: bash $0 stop $dir)"
	echo "postgresql+psycopg://$ROLE:$password@127.0.0.1:$port/$DB"
}

stop() {
	local dir=${1:-}
	[[ -z $dir && -f $LAST ]] && dir=$(cat "$LAST")
	[[ -n $dir && -d $dir ]] || { say "nothing to stop"; return 0; }
	local bin
	bin=$(pg_bin)
	as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
	rm -rf "$dir"
	[[ -f $LAST && $(cat "$LAST") == "$dir" ]] && rm -f "$LAST"
	say "stopped and removed $dir"
}

case ${1:-} in
start) start ;;
stop) stop "${2:-}" ;;
run)
	shift
	[[ $# -gt 0 ]] || { say "usage: $0 run CMD [ARGS...]"; exit 2; }
	url=$(start)
	dir=$(cat "$LAST")
	trap 'stop "$dir"' EXIT
	FLINK_AUTOSCALER_TEST_POSTGRES_URL=$url "$@"
	;;
*)
	echo "usage: $0 start | stop [DIR] | run CMD [ARGS...]" >&2
	exit 2
	;;
esac
