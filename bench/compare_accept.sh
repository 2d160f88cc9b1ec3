# bench/compare_accept.sh — the accept and api sections of bench/compare.sh,
# which sources it (it uses that script's helpers and $work, $key); see
# that script's header for what the sections measure.

# accept_vs_redislock TAG WHAT ROW SERVE_ARGS...: RUNS rounds of new-key
# accepts, `sendonce serve SERVE_ARGS` on a fresh SQLite database against
# the Redis-lock yardstick, each side paused while the other is measured.
accept_vs_redislock() {
	local tag=$1 what=$2 rowname=$3 i s y o r redis_pid yard_pid so_pid
	shift 3
	need node npm redis-server
	echo
	echo "== new-key accepts: sendonce ($what) vs the Redis-lock design"
	if [[ ! -d bench/redislock/node_modules ]]; then
		(cd bench/redislock && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci in bench/redislock failed"
	fi
	start "$work/redis.log" redis-server --bind 127.0.0.1 --port $P_REDIS --save "" --appendonly no --dir "$work"
	redis_pid=$started
	for _ in $(seq 50); do
		(exec 3<>/dev/tcp/127.0.0.1/$P_REDIS) 2>/dev/null && break
		sleep 0.1
	done
	start "$work/yard.log" env PORT=$P_YARD REDIS_URL=redis://127.0.0.1:$P_REDIS SEND_DELAY_MS=0 node bench/redislock/server.js
	yard_pid=$started
	wait_http "http://127.0.0.1:$P_YARD/" "$yard_pid" || die "the Redis-lock yardstick did not start: $(cat "$work/yard.log")"

	newdb "$tag"
	start "$work/$tag-sendonce.log" "$work/sendonce" serve --db "$db" --addr 127.0.0.1:$P_SENDONCE "$@"
	so_pid=$started
	wait_http "http://127.0.0.1:$P_SENDONCE/healthz" "$so_pid" || die "sendonce did not start: $(cat "$work/$tag-sendonce.log")"
	kill -STOP "$redis_pid" "$yard_pid"

	: >"$work/$tag.txt"
	for i in $(seq "$RUNS"); do
		kill -CONT "$so_pid"
		((WARM_S)) && accept "http://127.0.0.1:$P_SENDONCE/v1/send" "$key" 50 2 "${WARM_S}s" >/dev/null
		mark
		s=$(accept "http://127.0.0.1:$P_SENDONCE/v1/send" "$key" 50 2 "$DURATION")
		o=$(others)
		kill -STOP "$so_pid"
		echo "  round $i  sendonce    $(describe "$s")  others ${o}% CPU"
		kill -CONT "$redis_pid" "$yard_pid"
		((WARM_S)) && accept "http://127.0.0.1:$P_YARD/v1/send" "" 50 2 "${WARM_S}s" >/dev/null
		mark
		y=$(accept "http://127.0.0.1:$P_YARD/v1/send" "" 50 2 "$DURATION")
		o=$(others)
		kill -STOP "$redis_pid" "$yard_pid"
		echo "  round $i  redis-lock  $(describe "$y")  others ${o}% CPU"
		r=$(ratio "$(field ok_rps "$s")" "$(field ok_rps "$y")")
		echo "  round $i  ratio $r"
		echo "$(field ok_rps "$s") $(field p99_ms "$s") $(field ok_rps "$y") $(field p99_ms "$y") $r" >>"$work/$tag.txt"
	done
	m() { cut -d' ' -f"$1" "$work/$tag.txt" | median; }
	printf '  median: sendonce %.0f ok/s (p99 %.1f ms), redis-lock %.0f ok/s (p99 %.1f ms), ratio %s\n' "$(m 1)" "$(m 2)" "$(m 3)" "$(m 4)" "$(m 5)"
	row "$rowname" "$(printf '%.0f/s, p99 %.1f ms' "$(m 1)" "$(m 2)")" \
		"$(printf 'Redis-lock %.0f/s, p99 %.1f ms' "$(m 3)" "$(m 4)")" "$(m 5)"
	peak_rss "$tag: serve $*" "$so_pid"
	halt "$so_pid" "$yard_pid" "$redis_pid"
}
