#!/usr/bin/env bash
# Measures sendonce against the bare net/http yardstick on this machine, in
# one run, with wrk (apt-get install wrk) driving both the same way, and
# sendonce-bench for the storm and delivery. Prints every run and the
# medians. Everything listens on 127.0.0.1 only.
#
#   bench/compare.sh            # 3 runs of 8 s each
#   RUNS=5 DURATION=10s bench/compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
CONNS=${CONNS:-64}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/sendonce" ./cmd/sendonce
go build -o "$work/sendonce-bench" ./cmd/sendonce-bench
echo "machine: $(nproc) cores, $(uname -sr), $(date -u +%FT%TZ)"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# wrkrun URL [env...]: one wrk run, prints "req/s p99ms".
wrkrun() {
	local url=$1
	shift
	env "$@" wrk -t2 -c"$CONNS" -d"$DURATION" -s bench/wrk/send.lua "$url" |
		awk '/Requests\/sec/ {r=$2} /^p50/ {p=$4} END {printf "%d %s\n", r, p}'
}

# series NAME URL [env...]: RUNS runs, then the medians.
series() {
	local name=$1 url=$2
	shift 2
	local out="$work/$name.txt"
	: >"$out"
	for _ in $(seq "$RUNS"); do
		wrkrun "$url" "$@" | tee -a "$out" | sed "s/^/  $name: req\/s, p99 ms: /"
	done
	printf '%-10s median %8.0f req/s   p99 %6.2f ms\n' "$name" \
		"$(cut -d' ' -f1 "$out" | median)" "$(cut -d' ' -f2 "$out" | sed 's/ms//' | median)" | tee -a "$work/summary"
}

"$work/sendonce-bench" --baseline 127.0.0.1:18788 >/dev/null &
pids+=($!)
sleep 1
series baseline http://127.0.0.1:18788

# serve NAME: a fresh sendonce on the embedded defaults (one process, SQLite,
# the capture inbox), and an API key for it in SENDONCE_API_KEY.
serve() {
	local db="sqlite:$work/$1/sendonce.db"
	SENDONCE_API_KEY=$("$work/sendonce" keys create --db "$db" --name bench --scopes send,read)
	export SENDONCE_API_KEY
	"$work/sendonce" serve --db "$db" --addr 127.0.0.1:18787 2>"$work/$1.log" &
	pids+=($!)
	sleep 2
}
stop() {
	kill "${pids[-1]}"
	wait "${pids[-1]}" 2>/dev/null || true
}

serve new
series new http://127.0.0.1:18787
stop
# A server of its own: the new-key runs leave a delivery backlog behind.
serve replay
WRK_KEYS=200 wrkrun http://127.0.0.1:18787 >/dev/null # the replay keys exist from here on
series replay http://127.0.0.1:18787 WRK_KEYS=200
stop

for i in $(seq "$RUNS"); do
	rm -rf "$work/b"
	mkdir -p "$work/b"
	"$work/sendonce-bench" --spawn-api 1 --db "sqlite:$work/b/s.db" --sendonce "$work/sendonce" \
		--mode storm --duration "$DURATION" --concurrency "$CONNS" --json "$work/storm$i.json" >/dev/null
	rm -rf "$work/b"
	mkdir -p "$work/b"
	"$work/sendonce-bench" --spawn-api 1 --db "sqlite:$work/b/s.db" --sendonce "$work/sendonce" \
		--mode delivery --duration "$DURATION" --concurrency "$CONNS" --json "$work/delivery$i.json" >/dev/null
done
python3 - "$work" "$RUNS" <<'EOF'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
def rows(kind):
    return [r for i in range(1, runs + 1) for r in json.load(open(f"{work}/{kind}{i}.json"))]
storm, dl = rows("storm"), rows("delivery")
print("storm      median p99 %.1f ms (p50 %.1f ms), duplicates %d, peak RSS %d MiB" % (
    statistics.median(r["p99_ns"] for r in storm) / 1e6, statistics.median(r["p50_ns"] for r in storm) / 1e6,
    sum(r.get("duplicates") or 0 for r in storm), max(r.get("peak_rss_kib", 0) for r in storm + dl) // 1024))
print("delivery   median %.0f messages/s (accepted -> 250 at the sink), duplicates %d" % (
    statistics.median(r["delivered_per_second"] for r in dl), sum(r.get("duplicates") or 0 for r in dl)))
EOF
echo
cat "$work/summary"
