#!/usr/bin/env bash
# bench/mx.sh — delivery per destination (--transport mx) against the
# single-relay drain, in the same run, on the same backlog:
#
#   drain     a backlog of BACKLOG sends spread over DOMAINS recipient
#             domains (each its own destination: its own MX host name, all
#             resolving to 127.0.0.1 through a local DNS server), made once
#             per round by `serve --role api` and copied; then drained by
#             `serve --transport smtp://` to smtp-sink (one relay: today's
#             delivery row of bench/compare.sh) and by `serve --transport
#             mx` to the same smtp-sink, under a shaping file generous
#             enough not to be the limit. Each is timed from its start to
#             queue depth 0; the round's ratio is mx over relay.
#   rss       RSS_BACKLOG sends over RSS_DOMAINS domains drained by mx: the
#             draining process's peak RSS (VmHWM) and its rate.
#
# Usage: bench/mx.sh  (RUNS=3 BACKLOG=20000 DOMAINS=20 RSS_BACKLOG=100000
# RSS_DOMAINS=1000 ONLY="drain rss" DRAIN_TIMEOUT=600). Needs go, wrk,
# smtp-sink (postfix), curl, python3. Everything on 127.0.0.1; every wait
# bounded; every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3} BACKLOG=${BACKLOG:-20000} DOMAINS=${DOMAINS:-20}
RSS_BACKLOG=${RSS_BACKLOG:-100000} RSS_DOMAINS=${RSS_DOMAINS:-1000}
ONLY=${ONLY:-drain rss} DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-600}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
die() { echo "mx.sh: $*" >&2; exit 1; }
for t in go wrk smtp-sink curl python3; do command -v "$t" >/dev/null || die "$t is needed"; done
go build -o "$work/sendonce" ./cmd/sendonce
go build -o "$work/dnsd" ./bench/dnsd
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
metric() { { curl -s --max-time 5 "http://$1/metrics" || true; } | awk -v n="$2" '$1 == n {print $2}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
wait_up() { # wait_up ADDR PID
	for _ in $(seq 300); do
		kill -0 "$2" 2>/dev/null || return 1
		curl -sf --max-time 2 "http://$1/healthz" >/dev/null && return 0
		sleep 0.1
	done
	return 1
}

sink=$(free_port)
smtp-sink -u nobody -m 2000 "127.0.0.1:$sink" 2000 >"$work/sink.log" 2>&1 &
pids+=($!)
# Generous shaping: the sink takes what comes; the limits must not be what
# is measured (the shipped default caps each destination at 100 msg/s).
echo '{"default": {"max_connections": 10, "max_messages_per_connection": 1000, "max_messages_per_second": 1000000}}' >"$work/shaping.json"

# dns N: a DNS server for d1.test … dN.test, each with its own MX host.
dns() {
	local recs=() i
	for i in $(seq "$1"); do recs+=("d$i.test. 300 IN MX 10 mx$i.d$i.test." "mx$i.d$i.test. 300 IN A 127.0.0.1"); done
	"$work/dnsd" "${recs[@]}" >"$work/dns.addr" 2>"$work/dns.log" &
	pids+=($!)
	dns_pid=$!
	for _ in $(seq 50); do [ -s "$work/dns.addr" ] && return; sleep 0.1; done
	die "dnsd did not start"
}

# backlog DIR N DOMAINS: N sends over DOMAINS domains, accepted into
# DIR/s.db by an API-only process (which does not deliver).
backlog() {
	mkdir -p "$1"
	local db="sqlite:$1/s.db" api key depth=0
	key=$("$work/sendonce" keys create --db "$db" --name bench --scopes send,read)
	api=$(free_port)
	"$work/sendonce" serve --role api --db "$db" --addr "127.0.0.1:$api" --rate-limit 0 >"$1/api.log" 2>&1 &
	local pid=$!
	wait_up "127.0.0.1:$api" "$pid" || die "serve --role api did not start"
	for _ in $(seq 120); do
		depth=$(metric "127.0.0.1:$api" sendonce_queue_depth)
		depth=${depth%.*}
		((${depth:-0} >= $2)) && break
		wrk -t2 -c50 -d2s -s bench/wrk/accept.lua "http://127.0.0.1:$api/v1/send" -- "$key" "$3" >/dev/null 2>&1 || true
	done
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	((${depth:-0} >= $2)) || die "made a backlog of only ${depth:-0} sends"
	echo "$depth"
}

# drain DIR TRANSPORT-FLAGS...: serve on DIR's database until its queue is
# empty; prints "msg/s seconds peak-RSS-KiB".
drain() {
	local dir=$1 port pid t0 t1 left n hwm
	shift
	port=$(free_port)
	n=$(cat "$dir/n")
	t0=$(date +%s.%N)
	"$work/sendonce" serve --db "sqlite:$dir/s.db" --addr "127.0.0.1:$port" --rate-limit 0 ${SERVE_FLAGS:-} "$@" >"$dir/drain.log" 2>&1 &
	pid=$!
	while :; do
		left=$(metric "127.0.0.1:$port" sendonce_queue_depth)
		[[ $left == 0 ]] && break
		kill -0 "$pid" 2>/dev/null || die "sendonce died while draining: $(tail -3 "$dir/drain.log")"
		python3 -c "import sys; sys.exit(0 if $(date +%s.%N) - $t0 < $DRAIN_TIMEOUT else 1)" ||
			die "not drained after $DRAIN_TIMEOUT s (left ${left:-?})"
		sleep 0.05
	done
	t1=$(date +%s.%N)
	hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	python3 -c "print(round($n/($t1-$t0)), round($t1-$t0, 2), $hwm)"
}

if [[ " $ONLY " == *" drain "* ]]; then
	dns "$DOMAINS"
	ratios=()
	for r in $(seq "$RUNS"); do
		mkdir -p "$work/b$r"
		backlog "$work/b$r" "$BACKLOG" "$DOMAINS" >"$work/b$r/n"
		cp -r "$work/b$r" "$work/m$r"
		read -r rs rt _ <<<"$(drain "$work/b$r" --transport "smtp://127.0.0.1:$sink?tls=none")"
		read -r ms mt _ <<<"$(drain "$work/m$r" --transport mx --mx-port "$sink" --dns-resolver "$(cat "$work/dns.addr")" \
			--outbound-allow 127.0.0.0/8 --shaping "$work/shaping.json")"
		ratio=$(python3 -c "print(round($ms/$rs, 3))")
		ratios+=("$ratio")
		echo "round $r: backlog $(cat "$work/b$r/n") over $DOMAINS domains; one relay $rs msg/s ($rt s), mx per destination $ms msg/s ($mt s), ratio $ratio"
		rm -rf "$work/b$r" "$work/m$r"
	done
	echo "median ratio mx/relay: $(printf '%s\n' "${ratios[@]}" | median)"
	kill "$dns_pid" 2>/dev/null || true
fi

if [[ " $ONLY " == *" rss "* ]]; then
	dns "$RSS_DOMAINS"
	mkdir -p "$work/rss"
	backlog "$work/rss" "$RSS_BACKLOG" "$RSS_DOMAINS" >"$work/rss/n"
	read -r s t hwm <<<"$(drain "$work/rss" --transport mx --mx-port "$sink" --dns-resolver "$(cat "$work/dns.addr")" \
		--outbound-allow 127.0.0.0/8 --shaping "$work/shaping.json")"
	echo "rss: $(cat "$work/rss/n") queued sends over $RSS_DOMAINS destinations drained by mx at $s msg/s ($t s); peak RSS $((hwm / 1024)) MiB"
fi
