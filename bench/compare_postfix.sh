# bench/compare_postfix.sh — the postfix section of bench/compare.sh, which
# sources it (it uses that script's helpers: start, halt, newdb, metric,
# mark, others, row, median, ratio, field, die, and $work).
#
# One load client (sendonce-bench --mode smtp: SMTP_SESSIONS sessions kept
# open, MSGS messages of MSG_SIZE bytes, one recipient each) sends to
# sendonce's SMTP submission listener and to a private Postfix (its own
# configuration and queue under $work/postfix, smtpd on 127.0.0.1), both
# relaying to the same smtp-sink. The client opens its sessions one after
# another before its clock starts (sendonce refuses a burst of
# unauthenticated connections from one address), so its msgs/s leaves
# connection set-up out; the end-to-end clock, the script's, does not.
# Three figures a side, each round:
#
#   accept  into the durable queue, delivery held. sendonce: `serve --role
#           api` (no delivery in the process) on a fresh SQLite database;
#           its sendonce_queue_depth must then read MSGS. Postfix:
#           `defer_transports = smtp` — its smtpd and cleanup write and
#           fsync every queue file before the 250 as always (nothing of its
#           durability is turned off), and its qmgr moves each message to
#           the deferred queue instead of delivering; the queue must then
#           hold MSGS messages.
#   drain   of that backlog into smtp-sink. sendonce: `serve` started on the
#           same database, timed from its start until sendonce_queue_depth
#           reads 0 (as the delivery section). Postfix: `postqueue -f`
#           (which delivers deferred transports too), timed until its queue
#           is empty and the sink counted all MSGS.
#   e2e     delivering while accepting: sendonce `serve` (both roles) on a
#           fresh database, Postfix without defer_transports; timed from
#           the client's start until the sink counted all MSGS.
#
# Both sides run on their defaults (sendonce's 100 delivery workers,
# Postfix's 20 connections per destination). The side not measured is
# idle: sendonce runs only during its legs, and Postfix takes no work.

P_SMTP=18795 P_PFX=18796 P_PFSINK=2527
MSGS=${MSGS:-20000}
MSG_SIZE=${MSG_SIZE:-1536}
SMTP_SESSIONS=${SMTP_SESSIONS:-20}
# Checked when the script starts, not after the sections before this one.
if want postfix; then
	[[ $MSGS =~ ^[1-9][0-9]*$ && $SMTP_SESSIONS =~ ^[1-9][0-9]*$ && $MSG_SIZE =~ ^[1-9][0-9]*$ ]] ||
		die "MSGS, SMTP_SESSIONS and MSG_SIZE must be positive whole numbers"
	# sendonce's default --smtp-max-sessions-per-key: past it AUTH is 454,
	# and the side on its defaults is what this section measures.
	((SMTP_SESSIONS <= 20)) || die "SMTP_SESSIONS: at most 20, the sessions one API key may hold on sendonce's defaults"
fi
# Postfix's processes are not children of this script (its master
# daemonizes): named here, `others` counts them as this script's.
pf_procs="master qmgr smtpd cleanup smtp trivial-rewrite pickup anvil scache bounce postlogd showq proxymap"

pf=$work/postfix
# sendonce's relay: the section's smtp-sink.
so_tr="--transport smtp://127.0.0.1:$P_PFSINK?tls=none"

# pf_start: a Postfix of its own under $pf, smtpd on 127.0.0.1:$P_PFX,
# relaying everything to the sink; mail is held (defer_transports) until
# pf_hold 0 (bench/postfix_master.sh has the instance's common parts).
pf_start() {
	postfix_dirs "$pf"
	chmod 755 "$work"
	{
		postfix_main_cf "$pf" relay.bench.localhost
		cat <<-EOF
			smtpd_recipient_restrictions =
			relayhost = [127.0.0.1]:$P_PFSINK
			smtp_dns_support_level = disabled
			smtp_tls_security_level = none
			local_recipient_maps =
			delay_warning_time = 0
			defer_transports = smtp
		EOF
	} >"$pf/etc/main.cf"
	postfix_master_cf "$P_PFX" >"$pf/etc/master.cf"
	postfix -c "$pf/etc" start >"$work/postfix-start.log" 2>&1 || die "postfix did not start: $(cat "$work/postfix-start.log")"
	pf_up=1
	wait_port $P_PFX || die "postfix does not listen on $P_PFX: $(tail -5 "$pf/maillog" 2>/dev/null)"
}

# pf_stop: stop the instance and wait (at most 30 s) for its master to go,
# so that nothing is left listening.
pf_stop() {
	((${pf_up:-0})) || return 0
	local m i
	m=$(tr -d ' ' <"$pf/spool/pid/master.pid" 2>/dev/null || true)
	postfix -c "$pf/etc" stop >/dev/null 2>&1 || true
	if [[ -n $m ]]; then
		for i in $(seq 300); do
			kill -0 "$m" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$m" 2>/dev/null || true
	fi
	pf_up=0
}

# pf_hold 1|0: hold mail in the queue (defer_transports = smtp) or not.
pf_hold() {
	local v=""
	(($1)) && v=smtp
	postconf -c "$pf/etc" -e "defer_transports = $v"
	postfix -c "$pf/etc" reload >/dev/null 2>&1 || die "postfix reload failed"
	sleep 1 # the reload restarts qmgr; let it read the new setting
}

# pf_queued: messages in Postfix's queue (one file each, wherever it is);
# a snapshot only while qmgr moves files, so callers also wait for the sink.
pf_queued() { find "$pf/spool/maildrop" "$pf/spool/incoming" "$pf/spool/active" "$pf/spool/deferred" "$pf/spool/hold" -type f 2>/dev/null | wc -l; }

# wait_port PORT: until 127.0.0.1:PORT takes connections (at most 10 s).
wait_port() {
	local i
	for i in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# sunk: messages smtp-sink has taken so far (its -c counters, "\r"-separated).
sunk() { tail -c 400 "$work/pfsink.log" | tr '\r' '\n' | awk -F'mesg=' 'NF > 1 {n = $2 + 0} END {print n + 0}'; }

# until_true WHAT CMD...: poll CMD every 50 ms until it succeeds, at most
# DRAIN_TIMEOUT seconds (then die, naming WHAT).
until_true() {
	local what=$1 t0
	shift
	t0=$(date +%s)
	until "$@"; do
		(($(date +%s) - t0 > DRAIN_TIMEOUT)) && die "$what: not done after $DRAIN_TIMEOUT s"
		sleep 0.05
	done
}
sink_has() { (($(sunk) >= $1)); }
depth_is() { [[ $(metric 127.0.0.1:$P_BACKLOG sendonce_queue_depth) == "$1" ]]; }
pf_empty() { (($(pf_queued) == 0)); }
pf_drained() { pf_empty && sink_has "$1"; }

# smtpload ADDR KEY: the load client; sets $rate (its msgs/s), dies on any
# error. In the background and waited for, not in $(…): bash runs the
# INT/TERM trap during a wait at once, and the client is in $pids for it.
smtpload() {
	local p
	start "$work/smtpload.log" timeout $((DRAIN_TIMEOUT + 60)) "$work/sendonce-bench" --mode smtp \
		--smtp-addr "$1" --key "$2" --messages "$MSGS" --sessions "$SMTP_SESSIONS" --msg-size "$MSG_SIZE"
	p=$started
	wait "$p" || die "the SMTP load client failed against $1: $(tail -2 "$work/smtpload.log")"
	forget "$p"
	rate=$(field msgs_per_s "$(grep '^RESULT ' "$work/smtpload.log")")
}
since() { awk -v a="$1" -v b="$(date +%s.%N)" -v n="$2" 'BEGIN {printf "%.1f", n / (b - a)}'; }

# so_serve LOG ARGS...: sendonce on $db (API on $P_BACKLOG, SMTP on
# $P_SMTP) with ARGS; sets $so_pid once both listen.
so_serve() {
	local log=$1
	shift
	start "$log" "$work/sendonce" serve --db "$db" --addr 127.0.0.1:$P_BACKLOG --smtp-addr 127.0.0.1:$P_SMTP "$@"
	so_pid=$started
	wait_http "http://127.0.0.1:$P_BACKLOG/healthz" "$so_pid" && wait_port $P_SMTP ||
		die "sendonce did not start: $(tail -5 "$log")"
}

# The legs below set their figures (sa sd pa pd se pe) and append to o,
# all locals of pf_round, which calls them.

# so_held I: sendonce accepts with delivery held (sa), then drains that
# backlog (sd).
so_held() {
	local i=$1 q c0 t0
	newdb "pf$i"
	so_serve "$work/pf-api$i.log" --role api
	mark
	smtpload 127.0.0.1:$P_SMTP "$key"
	sa=$rate
	o+=("$(others)")
	q=$(metric 127.0.0.1:$P_BACKLOG sendonce_queue_depth)
	[[ $q == "$MSGS" ]] || die "sendonce's queue depth is ${q:-?} after $MSGS accepted messages"
	peak_rss "postfix: serve --role api" "$so_pid"
	halt "$so_pid"
	c0=$(sunk)
	mark
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # two words on purpose
	so_serve "$work/pf-drain$i.log" $so_tr
	until_true "sendonce's drain" depth_is 0
	sd=$(since "$t0" "$MSGS")
	o+=("$(others)")
	until_true "the sink's count of sendonce's drain" sink_has $((c0 + MSGS))
	peak_rss "postfix: serve (drain)" "$so_pid"
	halt "$so_pid"
	rm -rf "${work:?}/pf$i"
}

# pf_held: Postfix accepts with defer_transports = smtp (pa), then
# postqueue -f drains it (pd).
pf_held() {
	local q c0 t0
	mark
	smtpload 127.0.0.1:$P_PFX ""
	pa=$rate
	o+=("$(others)")
	# Counted until it settles (at most 10 s): a file that qmgr moves from
	# one queue directory to the next while find walks them counts twice.
	for _ in $(seq 200); do
		q=$(pf_queued)
		((q == MSGS)) && break
		sleep 0.05
	done
	((q == MSGS)) || die "Postfix's queue holds $q messages after $MSGS accepted"
	c0=$(sunk)
	mark
	t0=$(date +%s.%N)
	postqueue -c "$pf/etc" -f || die "postqueue -f failed"
	until_true "Postfix's drain" pf_drained $((c0 + MSGS))
	pd=$(since "$t0" "$MSGS")
	o+=("$(others)")
}

# both_e2e I: end to end, each side delivering while it accepts (se, pe).
both_e2e() {
	local i=$1 c0 t0
	newdb "pf${i}e"
	# shellcheck disable=SC2086
	so_serve "$work/pf-e2e$i.log" $so_tr
	c0=$(sunk)
	mark
	t0=$(date +%s.%N)
	smtpload 127.0.0.1:$P_SMTP "$key"
	until_true "sendonce end to end" sink_has $((c0 + MSGS))
	se=$(since "$t0" "$MSGS")
	o+=("$(others)")
	peak_rss "postfix: serve (end to end)" "$so_pid"
	halt "$so_pid"
	rm -rf "${work:?}/pf${i}e"
	pf_hold 0
	c0=$(sunk)
	mark
	t0=$(date +%s.%N)
	smtpload 127.0.0.1:$P_PFX ""
	until_true "Postfix end to end" pf_drained $((c0 + MSGS))
	pe=$(since "$t0" "$MSGS")
	o+=("$(others)")
	pf_hold 1
}

# pf_round I: one round's six legs; appends its rates and ratios to
# $work/postfix.txt.
pf_round() {
	local i=$1 sa sd se pa pd pe o=() rate
	so_held "$i"
	pf_held
	both_e2e "$i"

	printf '  round %d  accept  sendonce %6.0f msg/s   Postfix %6.0f msg/s   ratio %s\n' "$i" "$sa" "$pa" "$(ratio "$sa" "$pa")"
	printf '  round %d  drain   sendonce %6.0f msg/s   Postfix %6.0f msg/s   ratio %s\n' "$i" "$sd" "$pd" "$(ratio "$sd" "$pd")"
	printf '  round %d  e2e     sendonce %6.0f msg/s   Postfix %6.0f msg/s   ratio %s   others %s%% CPU\n' \
		"$i" "$se" "$pe" "$(ratio "$se" "$pe")" "$(
			IFS=/
			echo "${o[*]}"
		)"
	echo "$sa $pa $(ratio "$sa" "$pa") $sd $pd $(ratio "$sd" "$pd") $se $pe $(ratio "$se" "$pe")" >>"$work/postfix.txt"
}

postfix_section() {
	local t
	# Skipped, as the postgres section is without PostgreSQL, so that a full
	# run elsewhere still gives its other rows.
	for t in postfix postconf postqueue smtp-sink; do
		if ! command -v "$t" >/dev/null; then
			echo
			echo "== SMTP in, sendonce vs Postfix: skipped: $t is needed (apt-get install postfix)"
			row "SMTP in vs a private Postfix" "skipped" "no $t" "-"
			return 0
		fi
	done
	if ((EUID != 0)); then
		echo
		echo "== SMTP in, sendonce vs Postfix: skipped: Postfix must be started as root"
		row "SMTP in vs a private Postfix" "skipped" "not root" "-"
		return 0
	fi
	echo
	echo "== SMTP in: sendonce (SQLite, one process) vs a private Postfix, $MSGS messages of $MSG_SIZE bytes over $SMTP_SESSIONS sessions, both relaying to smtp-sink"
	echo "   (Postfix holds mail with defer_transports = smtp and releases it with postqueue -f;"
	echo "    others: sendonce accept/drain, Postfix accept/drain, sendonce/Postfix end to end)"
	# -c: running counters on its output, which is how the legs count what
	# arrived; -u nobody: smtp-sink refuses to run as root without it.
	start "$work/pfsink.log" smtp-sink -c -u nobody -m 1000 127.0.0.1:$P_PFSINK 1000
	local sink_pid=$started
	wait_port $P_PFSINK || die "smtp-sink did not start: $(cat "$work/pfsink.log")"
	pf_start
	ours=$pf_procs
	: >"$work/postfix.txt"
	local i
	for i in $(seq "$RUNS"); do
		pf_round "$i"
	done
	ours=""
	pf_stop
	halt "$sink_pid"
	m() { cut -d' ' -f"$1" "$work/postfix.txt" | median; }
	printf '  median: accept %.0f vs %.0f msg/s (ratio %s), drain %.0f vs %.0f msg/s (ratio %s), end to end %.0f vs %.0f msg/s (ratio %s)\n' \
		"$(m 1)" "$(m 2)" "$(m 3)" "$(m 4)" "$(m 5)" "$(m 6)" "$(m 7)" "$(m 8)" "$(m 9)"
	row "SMTP accept into the queue, delivery held, $MSGS msgs (msg/s)" "$(printf '%.0f/s' "$(m 1)")" \
		"$(printf 'Postfix, defer_transports %.0f/s' "$(m 2)")" "$(m 3)"
	row "SMTP backlog drain to smtp-sink (msg/s)" "$(printf '%.0f/s' "$(m 4)")" \
		"$(printf 'Postfix, postqueue -f %.0f/s' "$(m 5)")" "$(m 6)"
	row "SMTP end to end, accept + deliver to smtp-sink (msg/s)" "$(printf '%.0f/s' "$(m 7)")" \
		"$(printf 'Postfix %.0f/s' "$(m 8)")" "$(m 9)"
}
