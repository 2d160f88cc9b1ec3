#!/usr/bin/env bash
# bench/compare.sh — sendonce against its yardsticks, on this machine, in one
# run. Every row is a ratio against a yardstick measured in the same run:
# RUNS rounds (default 3) alternate sendonce and the yardstick, each round
# gives a ratio, and the row is the median of those ratios.
#
#   accept    new-key accepts, sendonce on its embedded defaults (one process,
#             SQLite, delivery to the capture inbox running) vs the
#             Redis-lock design (bench/redislock: Express + node-redis with a
#             redis-server of its own, no persistence). wrk -t2 -c50 with
#             bench/wrk/accept.lua (a fresh Idempotency-Key per request), a
#             WARMUP before every measured round, the side not measured is
#             paused (SIGSTOP). Only 200 answers count (ok_rps).
#   api       the same, sendonce as `serve --role api` (no delivery in the
#             process), against the same yardstick in the same rounds.
#   replay    replays of 200 keys per wrk thread (bench/wrk/send.lua,
#             WRK_KEYS=200) vs bare net/http decoding the JSON POST and
#             answering JSON (sendonce-bench --baseline). 2xx answers/s.
#   delivery  a backlog of BACKLOG accepted sends (made by `serve --role api`,
#             which does not deliver), then `serve` started on the same
#             database relaying to smtp-sink, timed from its start until its
#             sendonce_queue_depth gauge reads 0; vs smtp-source pushing
#             BACKLOG messages into the same smtp-sink (20 sessions, reused).
#   postgres  3 `serve --role api` + 1 `--role worker` on a fresh database,
#             3 wrk (-t1 -c17 each, accept.lua) summed, vs pgbench inserting
#             one row per transaction (-c 32 -j 2) into a fresh table.
#             PG_ACCEPT_SQL=1 adds pgbench running bench/pgbench/accept.sql
#             (one accept's statements, PostgreSQL alone) — the statements
#             follow the schema, so check them after a schema change.
#             Skipped when pg_isready fails.
#   postfix   SMTP in: one load client (sendonce-bench --mode smtp, 20
#             sessions kept open, MSGS messages of ~1.5 KiB) into sendonce's
#             submission listener (AUTH with an API key) vs a private
#             Postfix (own configuration and queue under the work
#             directory), both relaying to smtp-sink: accept into the
#             durable queue with delivery held, the drain of that backlog,
#             and end to end. bench/compare_postfix.sh says how each is
#             held, released and timed. Run as root (Postfix needs it).
#   storm     sendonce-bench --mode storm (1,000 keys × 8 concurrent
#             duplicates, then every key looked up): p99 and duplicates.
#             No yardstick; the contract is 0 duplicates.
#
# Each measured leg also prints "others N% CPU": the share of the machine
# that processes outside this script used meanwhile; the last line flags a
# run where that passed 10% (a shared machine: rerun when it is quiet).
#
# The accept and api, postgres and postfix sections are functions in
# bench/compare_accept.sh, compare_postgres.sh and compare_postfix.sh,
# which this script sources (they use its helpers).
#
# The summary at the end has one line per row, and the peak resident memory
# (VmHWM) of the largest sendonce process the script started itself.
#
# Usage (from anywhere; it builds both binaries from this tree first):
#
#   bench/compare.sh                                   # everything, RUNS=3
#   RUNS=1 DURATION=3s BACKLOG=3000 bench/compare.sh   # a quick check
#   ONLY="accept replay" bench/compare.sh              # some sections
#   RUNS=1 MSGS=2000 ONLY=postfix bench/compare.sh     # a quick SMTP check
#
# Environment (defaults): ONLY ("accept api replay delivery postgres postfix storm"),
# RUNS (3), DURATION (10s, per measured round; seconds or minutes), WARMUP
# (5s), CONNS (64: replay and storm concurrency), BACKLOG (20000),
# DRAIN_TIMEOUT (300 s), PGURL (postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable;
# the script creates and drops databases named sendonce_bench_*),
# PG_ACCEPT_SQL (0), MSGS (20000), MSG_SIZE (1536 bytes) and SMTP_SESSIONS
# (20) for the postfix section, SENDONCE_BIN and SENDONCE_BENCH_BIN (prebuilt binaries
# instead of building this tree, e.g. while it does not build).
#
# Needs: go, wrk, curl, python3; node + npm and redis-server (accept; the
# first run does `npm ci` in bench/redislock, from the npm registry);
# smtp-sink and smtp-source (postfix; delivery); postfix, postconf and
# postqueue (postfix); psql, pgbench, pg_isready
# (postgres). Everything listens on, and talks to, 127.0.0.1 only; every
# wait is bounded; every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

ONLY=${ONLY:-accept api replay delivery postgres postfix storm}
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-5s}
CONNS=${CONNS:-64}
BACKLOG=${BACKLOG:-20000}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-300}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
PG_ACCEPT_SQL=${PG_ACCEPT_SQL:-0}

# Ports, all on 127.0.0.1.
P_SENDONCE=18787 P_BASELINE=18788 P_YARD=18790 P_REDIS=6390
P_PGAPI=(18791 18792 18793) P_BACKLOG=18794 P_SINK=2526

want() { [[ " $ONLY " == *" $1 "* ]]; }
die() {
	echo "compare.sh: $*" >&2
	exit 1
}
need() { for t in "$@"; do command -v "$t" >/dev/null || die "$t is needed"; done; }

# secs D: "10s", "2m" or "7" → whole seconds.
secs() {
	case $1 in
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}
DUR_S=$(secs "$DURATION")
WARM_S=$(secs "$WARMUP")
[[ $RUNS =~ ^[1-9][0-9]*$ && $DUR_S =~ ^[1-9][0-9]*$ && $WARM_S =~ ^[0-9]+$ && $BACKLOG =~ ^[1-9][0-9]*$ ]] ||
	die "RUNS, DURATION, WARMUP and BACKLOG must be positive whole numbers (DURATION/WARMUP: Ns or Nm)"

for w in $ONLY; do
	[[ " accept api replay delivery postgres postfix storm " == *" $w "* ]] ||
		die "ONLY: unknown section $w (accept api replay delivery postgres postfix storm)"
done
need wrk curl python3
work=$(mktemp -d)
pids=()     # every long-running process started here
pgdbs=()    # every scratch database created here

# stop PID...: continue (it may be paused), TERM, wait at most 30 s, KILL.
stop() {
	local p i
	for p in "$@"; do
		kill -CONT "$p" 2>/dev/null || true
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "$@"; do
		for i in $(seq 300); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
cleanup() {
	set +e
	declare -F pf_stop >/dev/null && pf_stop
	((${#pids[@]})) && stop "${pids[@]}"
	for d in "${pgdbs[@]}"; do
		psql "$PGURL" -qAtX -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null 2>&1
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'echo "compare.sh: line $LINENO: a command failed (exit $?)" >&2' ERR

# start LOG CMD...: CMD in the background, its output to LOG; sets $started.
start() {
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	started=$!
	pids+=("$started")
}
forget() { # forget PID...: drop stopped processes from $pids
	local p q keep=()
	for p in "${pids[@]}"; do
		for q in "$@"; do [[ $p == "$q" ]] && continue 2; done
		keep+=("$p")
	done
	pids=("${keep[@]}")
}
halt() { stop "$@" && forget "$@"; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# wait_http URL PID: until URL answers any HTTP status (at most 30 s) while PID lives.
wait_http() {
	local i
	for i in $(seq 300); do
		kill -0 "$2" 2>/dev/null || return 1
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1") != 000 ]] && return 0
		sleep 0.1
	done
	return 1
}
# metric ADDR NAME: one sample of sendonce's /metrics ("" if absent).
metric() { { curl -s --max-time 5 "http://$1/metrics" || true; } | awk -v n="$2" '$1 == n {print $2}'; }

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# field KEY LINE: KEY=VALUE out of a RESULT line.
field() { tr ' ' '\n' <<<"$2" | awk -F= -v k="$1" '$1 == k {print $2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "nan"}'; }
row() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$work/summary.tsv"; } # what, sendonce, yardstick, ratio
# peak_rss WHAT PID: note the process's peak resident memory (VmHWM, from
# /proc: it must still be running) for the summary's peak RSS row.
peak_rss() {
	local kib
	kib=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$2/status" 2>/dev/null || true)
	[[ -n $kib ]] && printf '%s\t%s\n' "$kib" "$1" >>"$work/rss.tsv"
	return 0
}

# accept URL SECRET CONNS THREADS DUR: one wrk run of accept.lua; prints its RESULT line.
accept() {
	local out
	out=$(timeout $(($(secs "$5") + 60)) wrk -t"$4" -c"$3" -d"$5" -s bench/wrk/accept.lua "$1" -- "$2" 2>&1) || true
	grep '^RESULT ' <<<"$out" || echo "RESULT rps=0 ok_rps=0 requests=0 ok200=0 non200=0 first_non200=0 sock_errors=0 secs=0 p50_ms=0 p99_ms=0 wrk_failed=1"
}
describe() { # describe RESULT: the figures of one round
	printf 'ok_rps %8.0f  p50 %7.2f ms  p99 %7.2f ms  non-200 %s (first %s)  socket errors %s' \
		"$(field ok_rps "$1")" "$(field p50_ms "$1")" "$(field p99_ms "$1")" \
		"$(field non200 "$1")" "$(field first_non200 "$1")" "$(field sock_errors "$1")"
}

# The machine may be shared (another engineer's go test, say): `mark` takes a
# snapshot and `others` prints the share of all CPUs that processes outside
# this script's tree used since, in percent, and records it for the summary.
# Busy = user + nice + system of /proc/stat (interrupt time left out: the
# loopback traffic's softirq belongs to no process). The processes named in
# $ours (the postgres section sets "postgres": the server's backends) count
# as this script's.
ours=""
cpu_snap() {
	python3 - "$$" "$ours" <<-'EOF'
		import os, sys, time
		root, ours = int(sys.argv[1]), set(sys.argv[2].split())
		busy = sum(int(x) for x in open("/proc/stat").readline().split()[1:4])
		procs, named = {}, set()
		for d in os.listdir("/proc"):
		    if d.isdigit():
		        try:
		            st = open(f"/proc/{d}/stat").read()
		        except OSError:
		            continue
		        f = st[st.rfind(")") + 2:].split()
		        procs[int(d)] = (int(f[1]), sum(int(x) for x in f[11:15]))  # ppid; utime stime cutime cstime
		        if st[st.find("(") + 1:st.rfind(")")] in ours:
		            named.add(int(d))
		tree, grew = {root} | named, True
		while grew:
		    grew = False
		    for pid, (ppid, _) in procs.items():
		        if ppid in tree and pid not in tree:
		            tree.add(pid)
		            grew = True
		mine = sum(procs[p][1] for p in tree if p in procs)
		print(busy, mine, time.monotonic(), os.sysconf("SC_CLK_TCK"), os.cpu_count())
	EOF
}
mark() { snap=$(cpu_snap); }
others() {
	local pct
	pct=$(awk -v a="$snap" -v b="$(cpu_snap)" 'BEGIN {split(a, x); split(b, y)
		w = (y[3] - x[3]) * y[4] * y[5]; o = (y[1] - x[1]) - (y[2] - x[2])
		printf "%.0f", (w > 0 && o > 0) ? 100 * o / w : 0}')
	echo "$pct" >>"$work/others.txt"
	echo "$pct"
}

# newdb DIR: a fresh SQLite database under $work/DIR with an API key; sets $db and $key.
newdb() {
	rm -rf "${work:?}/$1"
	mkdir -p "$work/$1"
	db="sqlite:$work/$1/s.db"
	key=$("$work/sendonce" keys create --db "$db" --name bench --scopes send,read)
}

# The sections kept in files of their own (functions, and the postfix
# section's ports).
. bench/compare_accept.sh
. bench/compare_postgres.sh
. bench/postfix_master.sh
. bench/compare_postfix.sh
for p in $P_SENDONCE $P_BASELINE $P_YARD $P_REDIS "${P_PGAPI[@]}" $P_BACKLOG $P_SINK $P_SMTP $P_PFX $P_PFSINK; do
	port_free "$p" || die "127.0.0.1:$p is in use; this script needs it"
done

if [[ -n ${SENDONCE_BIN:-} || -n ${SENDONCE_BENCH_BIN:-} ]]; then
	[[ -x ${SENDONCE_BIN:-} && -x ${SENDONCE_BENCH_BIN:-} ]] || die "SENDONCE_BIN and SENDONCE_BENCH_BIN must both name executables"
	echo "using prebuilt $SENDONCE_BIN and $SENDONCE_BENCH_BIN (not this tree)"
	cp "$SENDONCE_BIN" "$work/sendonce"
	cp "$SENDONCE_BENCH_BIN" "$work/sendonce-bench"
else
	need go
	echo "building sendonce and sendonce-bench from $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- . ':!bench' 2>/dev/null || echo ' (with uncommitted changes)')"
	go build -o "$work/sendonce" ./cmd/sendonce
	go build -o "$work/sendonce-bench" ./cmd/sendonce-bench
fi
echo "machine: $(nproc) cores, $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "RUNS=$RUNS DURATION=$DURATION WARMUP=$WARMUP ONLY=\"$ONLY\""
: >"$work/summary.tsv"

# ---------------------------------------------------------------- accept, api
if want accept; then
	accept_vs_redislock accept "SQLite, one process, capture delivery" \
		"new-key accepts, SQLite, one process (ok/s, p99)" --transport capture
fi
if want api; then
	# No delivery in the process: what the HTTP path and the queue write
	# cost alone, without the workers' share of the two cores.
	accept_vs_redislock api "SQLite, serve --role api, no delivery in the process" \
		"new-key accepts, SQLite, serve --role api (ok/s, p99)" --role api
fi

# ---------------------------------------------------------------- replay
# wrk_send URL: one wrk run of send.lua (SENDONCE_API_KEY, WRK_KEYS from the
# environment); prints "2xx/s p99_ms".
wrk_send() {
	local out
	out=$(timeout $(($(secs "$2") + 60)) wrk -t2 -c"$CONNS" -d"$2" -s bench/wrk/send.lua "$1" 2>&1) || true
	awk '/ requests in / {n=$1; t=$4; sub(/s,$/, "", t); if (t ~ /ms$/) {sub(/ms$/, "", t); t/=1000}}
	     /Non-2xx or 3xx responses:/ {bad=$NF}
	     /Socket errors:/ {for (i=1; i<=NF; i++) if ($i ~ /^[0-9]+,?$/) {v=$i; sub(/,/, "", v); se+=v}}
	     /^p50 / {p=$4; sub(/ms$/, "", p)}
	     END {if (t > 0) printf "%.0f %s\n", (n-bad-se)/t, p; else print "0 0"}' <<<"$out"
}
if want replay; then
	echo
	echo "== replays: sendonce (SQLite, one process, 200 keys per wrk thread) vs bare net/http"
	start "$work/baseline.log" "$work/sendonce-bench" --baseline 127.0.0.1:$P_BASELINE
	base_pid=$started
	wait_http "http://127.0.0.1:$P_BASELINE/" "$base_pid" || die "the baseline did not start"
	newdb replay
	start "$work/replay-sendonce.log" "$work/sendonce" serve --db "$db" --transport capture --addr 127.0.0.1:$P_SENDONCE
	so_pid=$started
	wait_http "http://127.0.0.1:$P_SENDONCE/healthz" "$so_pid" || die "sendonce did not start"
	export SENDONCE_API_KEY=$key WRK_KEYS=200
	: >"$work/replay.txt"
	for i in $(seq "$RUNS"); do
		kill -STOP "$base_pid"
		kill -CONT "$so_pid"
		# The first warm-up also makes the 400 keys; from then on, all replays.
		wrk_send "http://127.0.0.1:$P_SENDONCE" "$(((WARM_S > 2) ? WARM_S : 2))s" >/dev/null
		mark
		read -r s sp <<<"$(wrk_send "http://127.0.0.1:$P_SENDONCE" "$DURATION")"
		os=$(others)
		kill -STOP "$so_pid"
		kill -CONT "$base_pid"
		((WARM_S)) && wrk_send "http://127.0.0.1:$P_BASELINE" "${WARM_S}s" >/dev/null
		mark
		read -r b bp <<<"$(wrk_send "http://127.0.0.1:$P_BASELINE" "$DURATION")"
		ob=$(others)
		r=$(ratio "$s" "$b")
		printf '  round %d  sendonce %8.0f 2xx/s (p99 %s ms)   net/http %8.0f 2xx/s (p99 %s ms)   ratio %s   others %s%%/%s%% CPU\n' \
			"$i" "$s" "$sp" "$b" "$bp" "$r" "$os" "$ob"
		echo "$s $sp $b $bp $r" >>"$work/replay.txt"
	done
	unset SENDONCE_API_KEY WRK_KEYS
	m() { cut -d' ' -f"$1" "$work/replay.txt" | median; }
	printf '  median: sendonce %.0f/s (p99 %.1f ms), net/http %.0f/s (p99 %.1f ms), ratio %s\n' "$(m 1)" "$(m 2)" "$(m 3)" "$(m 4)" "$(m 5)"
	row "replays, SQLite, one process (2xx/s, p99)" "$(printf '%.0f/s, p99 %.1f ms' "$(m 1)" "$(m 2)")" \
		"$(printf 'bare net/http %.0f/s, p99 %.1f ms' "$(m 3)" "$(m 4)")" "$(m 5)"
	halt "$so_pid" "$base_pid"
fi

# ---------------------------------------------------------------- delivery
if want delivery; then
	need smtp-sink smtp-source
	echo
	echo "== delivery of a backlog of $BACKLOG: sendonce (SQLite, one process) -> smtp-sink vs smtp-source -> smtp-sink"
	# -u nobody: smtp-sink refuses to run as root without it.
	start "$work/sink.log" smtp-sink -u nobody -m 1000 127.0.0.1:$P_SINK 1000
	sink_pid=$started
	for _ in $(seq 50); do
		(exec 3<>/dev/tcp/127.0.0.1/$P_SINK) 2>/dev/null && break
		sleep 0.1
	done
	kill -0 "$sink_pid" 2>/dev/null || die "smtp-sink did not start: $(cat "$work/sink.log")"
	: >"$work/delivery.txt"
	for i in $(seq "$RUNS"); do
		# The backlog: accepts into a fresh database by an API-only process.
		newdb "delivery$i"
		start "$work/backlog$i.log" "$work/sendonce" serve --role api --db "$db" --addr 127.0.0.1:$P_BACKLOG
		api_pid=$started
		wait_http "http://127.0.0.1:$P_BACKLOG/healthz" "$api_pid" || die "sendonce --role api did not start"
		# wrk for 1 s, then for as long as the rate so far says is missing.
		chunk=1 rate=0
		for _ in $(seq 30); do
			depth=$(metric 127.0.0.1:$P_BACKLOG sendonce_queue_depth)
			depth=${depth%.*}
			((${depth:-0} >= BACKLOG)) && break
			a=$(accept "http://127.0.0.1:$P_BACKLOG/v1/send" "$key" 50 2 "${chunk}s")
			rate=$(field ok_rps "$a")
			chunk=$(awk -v r="$rate" -v d="${depth:-0}" -v n="$BACKLOG" -v c="$chunk" \
				'BEGIN {m = (r > 0) ? (n - d - r * c) / r : 1; m = int(m + 0.999); print (m < 1) ? 1 : (m > 30) ? 30 : m}')
		done
		depth=$(metric 127.0.0.1:$P_BACKLOG sendonce_queue_depth)
		depth=${depth%.*}
		depth=${depth:-0}
		halt "$api_pid"
		((depth >= BACKLOG)) || die "made a backlog of only $depth sends"

		# sendonce delivers it: timed from the process start to queue depth 0.
		mark
		t0=$(date +%s.%N)
		start "$work/drain$i.log" "$work/sendonce" serve --db "$db" --addr 127.0.0.1:$P_BACKLOG \
			--transport "smtp://127.0.0.1:$P_SINK?tls=none"
		drain_pid=$started
		left=$depth
		while :; do
			left=$(metric 127.0.0.1:$P_BACKLOG sendonce_queue_depth)
			[[ $left == 0 ]] && break
			kill -0 "$drain_pid" 2>/dev/null || die "sendonce died while delivering: $(tail -5 "$work/drain$i.log")"
			awk -v t0="$t0" -v now="$(date +%s.%N)" -v max="$DRAIN_TIMEOUT" 'BEGIN {exit !(now - t0 > max)}' &&
				die "backlog not delivered after $DRAIN_TIMEOUT s (queue depth ${left:-?})"
			sleep 0.05
		done
		t1=$(date +%s.%N)
		os=$(others)
		sent=$(metric 127.0.0.1:$P_BACKLOG 'sendonce_delivery_attempts_total{outcome="sent"}')
		tempfail=$(metric 127.0.0.1:$P_BACKLOG 'sendonce_delivery_attempts_total{outcome="tempfail"}')
		peak_rss "delivery: serve (drain)" "$drain_pid"
		halt "$drain_pid"
		s=$(awk -v n="$depth" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", n / (b - a)}')
		st=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')

		# The yardstick: the same number of messages by smtp-source.
		mark
		t0=$(date +%s.%N)
		timeout "$DRAIN_TIMEOUT" smtp-source -s 20 -m "$depth" -d -M bench.localhost 127.0.0.1:$P_SINK ||
			die "smtp-source failed"
		t1=$(date +%s.%N)
		oy=$(others)
		y=$(awk -v n="$depth" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", n / (b - a)}')
		yt=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
		r=$(ratio "$s" "$y")
		printf '  round %d  backlog %d  sendonce %.0f msg/s (%s s, sent %s, tempfail %s)   smtp-source %.0f msg/s (%s s)   ratio %s   others %s%%/%s%% CPU\n' \
			"$i" "$depth" "$s" "$st" "$sent" "$tempfail" "$y" "$yt" "$r" "$os" "$oy"
		echo "$s $y $r" >>"$work/delivery.txt"
		rm -rf "${work:?}/delivery$i"
	done
	halt "$sink_pid"
	m() { cut -d' ' -f"$1" "$work/delivery.txt" | median; }
	printf '  median: sendonce %.0f msg/s, smtp-source %.0f msg/s, ratio %s\n' "$(m 1)" "$(m 2)" "$(m 3)"
	row "delivery of a backlog of >= $BACKLOG, SQLite, one process (msg/s)" "$(printf '%.0f/s' "$(m 1)")" \
		"$(printf 'smtp-source -> smtp-sink %.0f/s' "$(m 2)")" "$(m 3)"
fi

# ---------------------------------------------------------------- postgres
if want postgres; then
	postgres_section
fi

# ---------------------------------------------------------------- postfix
if want postfix; then
	postfix_section
fi

# ---------------------------------------------------------------- storm
if want storm; then
	echo
	echo "== retry storm: sendonce-bench --mode storm, SQLite, one process, $CONNS concurrent"
	for i in $(seq "$RUNS"); do
		rm -rf "${work:?}/storm"
		mkdir -p "$work/storm"
		mark
		timeout $((DUR_S + 300)) "$work/sendonce-bench" --spawn-api 1 --db "sqlite:$work/storm/s.db" --sendonce "$work/sendonce" \
			--mode storm --duration "$DURATION" --concurrency "$CONNS" --json "$work/storm$i.json" >"$work/storm$i.log" 2>&1 ||
			die "sendonce-bench storm failed: $(tail -5 "$work/storm$i.log")"
		o=$(others)
		python3 - "$work/storm$i.json" "$i" "$o" <<-'EOF'
			import json, sys
			r = json.load(open(sys.argv[1]))[0]
			print("  round %s  p50 %.1f ms  p99 %.1f ms  requests %d  duplicates %s  statuses %s  others %s%% CPU" % (
			    sys.argv[2], r["p50_ns"] / 1e6, r["p99_ns"] / 1e6, r["requests"], r.get("duplicates"), r.get("statuses"), sys.argv[3]))
		EOF
		# sendonce-bench started the process, and read its peak RSS for us.
		python3 -c 'import json, sys; k = json.load(open(sys.argv[1]))[0].get("peak_rss_kib"); k and print("%d\tstorm: serve (sendonce-bench --spawn-api 1)" % k)' \
			"$work/storm$i.json" >>"$work/rss.tsv"
	done
	python3 - "$work" "$RUNS" >>"$work/summary.tsv" <<-'EOF'
		import json, statistics, sys
		work, runs = sys.argv[1], int(sys.argv[2])
		rows = [json.load(open(f"{work}/storm{i}.json"))[0] for i in range(1, runs + 1)]
		dup = sum(r.get("duplicates") or 0 for r in rows)
		print("retry storm, 1,000 keys x 8 duplicates (p99, duplicates)\tp99 %.1f ms (p50 %.1f ms), %d duplicates\tnone (contract: 0 duplicates)\t-" % (
		    statistics.median(r["p99_ns"] for r in rows) / 1e6, statistics.median(r["p50_ns"] for r in rows) / 1e6, dup))
	EOF
	tail -1 "$work/summary.tsv" | cut -f2 | sed 's/^/  median: /'
fi

if [[ -s $work/rss.tsv ]]; then
	row "peak RSS of one sendonce process (VmHWM)" "$(sort -n "$work/rss.tsv" | tail -1 | awk -F'\t' '{printf "%.0f MiB (%s)", $1 / 1024, $2}')" \
		"-" "-"
fi
echo
echo "== summary: RUNS=$RUNS DURATION=$DURATION, ratio = median of the per-round ratios sendonce / yardstick"
python3 - "$work/summary.tsv" <<-'EOF'
	import sys
	rows = [("what", "sendonce", "yardstick, same run", "ratio")]
	rows += [tuple(l.rstrip("\n").split("\t")) for l in open(sys.argv[1]) if l.strip()]
	w = [max(len(r[i]) for r in rows) for i in range(4)]
	for n, r in enumerate(rows):
	    print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |")
	    if n == 0:
	        print("|" + "|".join("-" * (x + 2) for x in w) + "|")
EOF
if [[ -s $work/others.txt ]]; then
	worst=$(sort -n "$work/others.txt" | tail -1)
	note=""
	((worst > 10)) && note=" — disturbed: run again on a quiet machine"
	echo "CPU used outside this script during the measured rounds: at most ${worst}% of the machine$note"
fi
