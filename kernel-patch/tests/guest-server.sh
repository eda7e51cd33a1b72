# Sourced by the guest's PostgreSQL scripts (guest-stress.sh, guest-htap.sh,
# guest-pg-bench.sh): a throwaway server with anker preloaded.
#
#   start_server WORKDIR MEMORY_LIMIT [CONF_LINE...]   initdb WORKDIR/data, start
#                                                      it on a socket in WORKDIR
#   stop_server                                        and report PANICs, signals

server_logs() {
	for f in "$server_work/initdb.log" "$server_work/server.log"; do
		[ -f "$f" ] && tail -n 20 "$f" | sed 's/^/#   /'
	done
}

start_server() {
	server_work=$1
	limit=$2
	shift 2
	initdb -D "$server_work/data" -A trust --no-sync --no-locale -E UTF8 \
		> "$server_work/initdb.log" 2>&1 || { server_logs; return 1; }
	{
		cat <<CONF
shared_preload_libraries = 'anker'
anker.memory_limit = '$limit'
listen_addresses = ''
unix_socket_directories = '$server_work'
max_parallel_workers_per_gather = 0
fsync = off
jit = off
lc_messages = 'C'
CONF
		for line in "$@"; do
			echo "$line"
		done
	} >> "$server_work/data/postgresql.conf"
	pg_ctl -D "$server_work/data" -l "$server_work/server.log" -w -t 600 start \
		> /dev/null || { server_logs; return 1; }
}

stop_server() {
	pg_ctl -D "$server_work/data" -m fast stop > /dev/null
	grep -E 'PANIC|terminated by signal' "$server_work/server.log" | sed 's/^/#   /'
}
