#!/usr/bin/env bash
# bench/profile.sh — CPU profiles of sendonce under the loads of
# bench/compare.sh, for the rows that miss their targets. One MODE a run:
#
#   api    serve --role api on SQLite, wrk -t2 -c50 bench/wrk/accept.lua;
#          an 8 s profile inside a 10 s round after a 3 s warm-up
#   drain  a backlog made by --role api in 8 s, then serve relaying it to
#          smtp-sink; a 6 s profile from the start of the drain
#   e2e    serve with the submission listener and a relay to smtp-sink,
#          sendonce-bench --mode smtp (20 sessions, 30,000 messages of
#          1.5 KiB); a 6 s profile
#   pg     3 --role api + 1 --role worker on a fresh PostgreSQL database
#          (the postgres row's shape); 8 s profiles of one API process and
#          of the worker, and pg_stat_activity's wait events sampled every
#          100 ms meanwhile (pg-waits.txt: time, wait:state, backends)
#
# Usage: bench/profile.sh MODE [OUT]   (OUT: a directory, default
# ./profiles). It builds both binaries from this tree unless SENDONCE_BIN
# and SENDONCE_BENCH_BIN name them; PGURL (default
# postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable) for pg.
# Read a profile with `go tool pprof -top -cum OUT/MODE.pprof`. Needs wrk,
# curl, smtp-sink (postfix) and, for pg, psql. Everything on 127.0.0.1;
# every wait bounded; what it starts is stopped on exit. Measure on a
# quiet machine: a profile taken beside other work shows that work's
# contention, not sendonce's.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:?usage: bench/profile.sh api|drain|e2e|pg [OUT]}
OUT=$(mkdir -p "${2:-profiles}" && cd "${2:-profiles}" && pwd)
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
work=$(mktemp -d)
pids=()
cleanup() {
	((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

if [[ -n ${SENDONCE_BIN:-} ]]; then
	BIN=$SENDONCE_BIN BENCH=${SENDONCE_BENCH_BIN:?SENDONCE_BENCH_BIN too}
else
	go build -o "$work/sendonce" ./cmd/sendonce
	go build -o "$work/sendonce-bench" ./cmd/sendonce-bench
	BIN=$work/sendonce BENCH=$work/sendonce-bench
fi

PP=127.0.0.1:16060 API=18201 SMTP=18225 SINK=18299
run() { # run LOG CMD...: in the background, remembered for the cleanup
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	pids+=($!)
}
wait_http() { for _ in $(seq 200); do curl -sf "$1" >/dev/null && return 0; sleep 0.05; done; echo "no answer from $1" >&2; exit 1; }
profile() { curl -sf "http://$1/debug/pprof/profile?seconds=$2" -o "$3"; }
accepts() { wrk -t"$3" -c"$4" -d"$5" -s bench/wrk/accept.lua "http://127.0.0.1:$1/v1/send" -- "$2"; }
depth() { curl -s "http://127.0.0.1:$API/metrics" | awk '/^sendonce_queue_depth /{print $2}'; }
sink() {
	run "$work/sink.log" smtp-sink -u nobody -m 1000 127.0.0.1:$SINK 1000
	sleep 0.3
}
db=sqlite:$work/db.sqlite

case $MODE in
api)
	run "$work/api.log" "$BIN" serve --role api --db "$db" --addr 127.0.0.1:$API --pprof $PP
	wait_http http://127.0.0.1:$API/healthz
	key=$("$BIN" keys create --db "$db" --name bench --scopes send,read)
	accepts $API "$key" 2 50 3s >/dev/null
	accepts $API "$key" 2 50 10s | grep RESULT &
	load=$!
	sleep 1
	profile $PP 8 "$OUT/api.pprof"
	wait $load
	;;
drain)
	sink
	run "$work/backlog.log" "$BIN" serve --role api --db "$db" --addr 127.0.0.1:$API
	wait_http http://127.0.0.1:$API/healthz
	key=$("$BIN" keys create --db "$db" --name bench --scopes send,read)
	accepts $API "$key" 2 50 8s | grep RESULT
	kill "${pids[-1]}" && wait "${pids[-1]}" || true
	run "$work/drain.log" "$BIN" serve --db "$db" --addr 127.0.0.1:$API \
		--transport "smtp://127.0.0.1:$SINK?tls=none" --pprof $PP
	wait_http http://127.0.0.1:$API/healthz
	profile $PP 6 "$OUT/drain.pprof"
	for _ in $(seq 1200); do [[ $(depth) == 0 ]] && break; sleep 0.1; done
	echo "queue depth after the profile's 6 s and the rest of the drain: $(depth)"
	;;
e2e)
	sink
	run "$work/e2e.log" "$BIN" serve --db "$db" --addr 127.0.0.1:$API --smtp-addr 127.0.0.1:$SMTP \
		--transport "smtp://127.0.0.1:$SINK?tls=none" --pprof $PP
	wait_http http://127.0.0.1:$API/healthz
	key=$("$BIN" keys create --db "$db" --name bench --scopes send,read)
	"$BENCH" --mode smtp --smtp-addr 127.0.0.1:$SMTP --key "$key" --messages 30000 --sessions 20 --msg-size 1500 | grep RESULT &
	load=$!
	sleep 1
	profile $PP 6 "$OUT/e2e.pprof"
	wait $load
	;;
pg)
	name=sendonce_prof_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
	psql "$PGURL" -qAtX -c "CREATE DATABASE $name" >/dev/null
	url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$PGURL" "$name")
	trap 'cleanup; psql "$PGURL" -qAtX -c "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null' EXIT
	run "$work/worker.log" "$BIN" serve --role worker --db "$url" --transport capture --pprof 127.0.0.1:16061
	for _ in $(seq 300); do grep -q 'worker started' "$work/worker.log" && break; sleep 0.1; done
	key=$("$BIN" keys create --db "$url" --name bench --scopes send,read)
	ports=(18101 18102 18103)
	for p in "${ports[@]}"; do
		extra=()
		[[ $p == 18101 ]] && extra=(--pprof $PP)
		run "$work/api$p.log" "$BIN" serve --role api --db "$url" --addr 127.0.0.1:$p "${extra[@]}"
	done
	for p in "${ports[@]}"; do wait_http http://127.0.0.1:$p/healthz; done
	warm=()
	for p in "${ports[@]}"; do
		accepts $p "$key" 1 17 3s >/dev/null &
		warm+=($!)
	done
	wait "${warm[@]}"
	loads=()
	for p in "${ports[@]}"; do
		accepts $p "$key" 1 17 10s | grep RESULT &
		loads+=($!)
	done
	sleep 1
	profile $PP 8 "$OUT/pg-api.pprof" &
	profs=($!)
	profile 127.0.0.1:16061 8 "$OUT/pg-worker.pprof" &
	profs+=($!)
	end=$((SECONDS + 8))
	while ((SECONDS < end)); do
		psql "$PGURL" -qAtX -F' ' -c "SELECT to_char(clock_timestamp(), 'HH24:MI:SS.MS'),
			coalesce(wait_event_type, '-') || ':' || coalesce(wait_event, '-') || ':' || state, count(*)
			FROM pg_stat_activity WHERE datname = '$name' AND state <> 'idle' GROUP BY 2 ORDER BY 3 DESC"
		sleep 0.1
	done >"$OUT/pg-waits.txt"
	wait "${loads[@]}" "${profs[@]}"
	;;
*)
	echo "unknown mode $MODE: api, drain, e2e or pg" >&2
	exit 2
	;;
esac
echo "profiles in $OUT"
