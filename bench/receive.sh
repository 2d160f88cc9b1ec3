#!/usr/bin/env bash
# bench/receive.sh — receiving, measured against a yardstick in the same
# run: postfix's smtp-source pushes MSGS messages (SESSIONS sessions,
# MSGLEN bytes each) into sendonce's inbound listener (every message
# stored durably, parsed, threaded, before its 250), then the same load
# into postfix's smtp-sink (which keeps nothing). RUNS rounds alternate the
# two; the line printed is each round's rates and the median ratio.
#
# smtp-source sends the same bytes every time; -N numbers each recipient
# (1bench@…, 2bench@…), so the receiving domain's catch-all takes them and
# every message is a distinct one (its envelope differs), not a duplicate.
# -d keeps each session open for its next message, as an MTA does.
#
# Usage: bench/receive.sh   (RUNS=3 MSGS=5000 SESSIONS=10 MSGLEN=4096; 10
# sessions: the listener takes at most 10 connections from one address)
# Needs: go, smtp-source and smtp-sink (postfix), curl. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3} MSGS=${MSGS:-5000} SESSIONS=${SESSIONS:-10} MSGLEN=${MSGLEN:-4096}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/sendonce" ./cmd/sendonce
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

db="sqlite:$work/recv.db"
key=$("$work/sendonce" keys create --db "$db" --name bench --scopes send,read,admin)
api=$(free_port) in=$(free_port) sink=$(free_port)
"$work/sendonce" serve --db "$db" --addr "127.0.0.1:$api" --inbound-addr "127.0.0.1:$in" \
  --rate-limit 0 >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$api/healthz" >/dev/null && break; sleep 0.1; done
post() { curl -sf -X POST "http://127.0.0.1:$api$1" -H "Authorization: Bearer $key" \
  -H 'Content-Type: application/json' -H "Idempotency-Key: $RANDOM$RANDOM" -d "$2" >/dev/null; }
post /v1/mailboxes '{"id":"bench","address":"bench@recv.test"}'
post /v1/domains '{"domain":"recv.test","receiving":true,"catch_all":"bench"}'
# -u nobody: smtp-sink refuses to run as root without it.
smtp-sink -u nobody -m 1000 "127.0.0.1:$sink" 1000 >"$work/sink.log" 2>&1 &
pids+=($!)
sleep 0.3

rate() { # host:port → messages per second
  local t0 t1
  t0=$(date +%s.%N)
  smtp-source -d -N -s "$SESSIONS" -l "$MSGLEN" -m "$MSGS" -f a@sender.test -t bench@recv.test "$1" >/dev/null \
    || { echo "smtp-source failed against $1" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print(round($MSGS/($t1-$t0)))"
}
ratios=()
for r in $(seq 1 "$RUNS"); do
  s=$(rate "127.0.0.1:$in")
  y=$(rate "127.0.0.1:$sink")
  ratio=$(python3 -c "print(round($s/$y, 3))")
  ratios+=("$ratio")
  echo "round $r: sendonce inbound $s msg/s, smtp-sink $y msg/s, ratio $ratio"
done
stored=$(curl -sf "http://127.0.0.1:$api/v1/received?limit=1" -H "Authorization: Bearer $key" | head -c 80)
echo "median ratio: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (RUNS+1)/2 ))p")  (stored, e.g.: $stored…)"
