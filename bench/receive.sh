#!/usr/bin/env bash
# bench/receive.sh — receiving, measured against yardsticks in the same
# run: postfix's smtp-source pushes MSGS messages (SESSIONS sessions,
# MSGLEN bytes each) into sendonce's inbound listener (every message
# checked — SPF, DKIM, DMARC — stored durably, parsed and threaded before
# its 250), then the same load into postfix's smtp-sink (which keeps
# nothing), then into a private Postfix instance of its own (its smtpd
# writes each message to its queue before the 250, as sendonce does; the
# queue manager hands it to the discard transport). RUNS rounds alternate
# the three; each round prints its rates, the last line the median ratios.
#
# smtp-source sends the same bytes every time; -N numbers each recipient
# (1bench@…, 2bench@…), so the receiving domain's catch-all takes them and
# every message is a distinct one (its envelope differs), not a duplicate.
# -d keeps each session open for its next message, as an MTA does.
#
# Usage: bench/receive.sh   (RUNS=3 MSGS=5000 SESSIONS=10 MSGLEN=4096; 10
# sessions: the listener takes at most 10 connections from one address;
# SERVE_FLAGS adds flags to `sendonce serve`, e.g. "--pprof 127.0.0.1:6060")
# Needs: go, postfix (smtp-source, smtp-sink and postfix itself; run as
# root, since Postfix's own processes run as its user), curl. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/postfix_master.sh
RUNS=${RUNS:-3} MSGS=${MSGS:-5000} SESSIONS=${SESSIONS:-10} MSGLEN=${MSGLEN:-4096}
work=$(mktemp -d)
pids=()
stop_postfix=0
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ "$stop_postfix" = 1 ] && postfix -c "$work/postfix/etc" stop >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/sendonce" ./cmd/sendonce
go build -o "$work/dnsd" ./bench/dnsd
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

db="sqlite:$work/recv.db"
key=$("$work/sendonce" keys create --db "$db" --name bench --scopes send,read,admin)
api=$(free_port) in=$(free_port) sink=$(free_port)
# The sender's domain publishes SPF and DMARC on a local DNS server (an MTA
# runs behind a resolver that answers; this machine's may not), so every
# message's SPF, DKIM and DMARC checks are real lookups answered at once.
"$work/dnsd" 'sender.test. 300 IN TXT "v=spf1 ip4:127.0.0.0/8 -all"' \
  '_dmarc.sender.test. 300 IN TXT "v=DMARC1; p=none"' >"$work/dns.addr" 2>"$work/dns.log" &
pids+=($!)
for _ in $(seq 1 50); do [ -s "$work/dns.addr" ] && break; sleep 0.1; done
"$work/sendonce" serve --db "$db" --addr "127.0.0.1:$api" --inbound-addr "127.0.0.1:$in" \
  --dns-resolver "$(cat "$work/dns.addr")" --rate-limit 0 ${SERVE_FLAGS:-} >"$work/serve.log" 2>&1 &
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

# start_postfix PORT: a Postfix of its own (configuration, queue and log
# under $work/postfix) taking mail for recv.test on 127.0.0.1:PORT; the
# system's instance is not touched.
start_postfix() {
	local d="$work/postfix"
	postfix_dirs "$d"
	chmod 755 "$work"
	{
		postfix_main_cf "$d" mx.recv.test
		cat <<-EOF
			relay_domains = recv.test
			transport_maps = inline:{ recv.test=discard: }
		EOF
	} >"$d/etc/main.cf"
	postfix_master_cf "$1" >"$d/etc/master.cf"
	postfix -c "$d/etc" start >/dev/null 2>&1 || { echo "postfix did not start" >&2; exit 1; }
	stop_postfix=1
	for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done
	echo "postfix does not listen on $1" >&2
	exit 1
}

rate() { # host:port → messages per second
  local t0 t1
  t0=$(date +%s.%N)
  smtp-source -d -N -s "$SESSIONS" -l "$MSGLEN" -m "$MSGS" -f a@sender.test -t bench@recv.test "$1" >/dev/null \
    || { echo "smtp-source failed against $1" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print(round($MSGS/($t1-$t0)))"
}
pfx=$(free_port)
start_postfix "$pfx"
ratios=() pratios=()
for r in $(seq 1 "$RUNS"); do
  s=$(rate "127.0.0.1:$in")
  y=$(rate "127.0.0.1:$sink")
  p=$(rate "127.0.0.1:$pfx")
  ratio=$(python3 -c "print(round($s/$y, 3))")
  pratio=$(python3 -c "print(round($s/$p, 3))")
  ratios+=("$ratio") pratios+=("$pratio")
  echo "round $r: sendonce inbound $s msg/s, smtp-sink $y msg/s ($ratio), postfix into its queue $p msg/s ($pratio)"
done
stored=$(curl -sf "http://127.0.0.1:$api/v1/received?limit=1" -H "Authorization: Bearer $key" | head -c 80)
med() { printf '%s\n' "$@" | sort -n | sed -n "$(( (RUNS+1)/2 ))p"; }
echo "median ratios: against smtp-sink $(med "${ratios[@]}"), against postfix's queue $(med "${pratios[@]}")  (stored, e.g.: $stored…)"
