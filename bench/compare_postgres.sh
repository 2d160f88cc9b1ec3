# bench/compare_postgres.sh — the postgres section of bench/compare.sh,
# which sources it (it uses that script's helpers and $work, $key, $PGURL,
# $pgdbs); see that script's header for what the section measures.

# pgurl DB: PGURL with its database replaced.
pgurl() { python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$PGURL" "$1"; }
# pgdb: a fresh scratch database; prints its name.
pgdb() {
	local name
	name=sendonce_bench_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
	psql "$PGURL" -qAtX -v ON_ERROR_STOP=1 -c "CREATE DATABASE $name" >/dev/null
	echo "$name"
}
# tps LOG: pgbench's tps figure.
tps() { awk '/^tps = / {print $3; exit}' "$1"; }
# three DUR: 3 wrk at once, one per API process, 17 connections each (51 in
# all); their RESULT lines in $work/pgwrk-PORT.txt.
three() {
	local p w=()
	for p in "${P_PGAPI[@]}"; do
		accept "http://127.0.0.1:$p/v1/send" "$key" 17 1 "$1" >"$work/pgwrk-$p.txt" &
		w+=($!)
	done
	wait "${w[@]}" || true
}
postgres_section() {
	echo
	echo "== PostgreSQL: sendonce (3 --role api + 1 --role worker, capture delivery) vs pgbench one-row INSERT"
	if ! command -v pg_isready >/dev/null || ! command -v psql >/dev/null || ! command -v pgbench >/dev/null; then
		echo "  skipped: psql, pgbench and pg_isready are needed"
		row "PostgreSQL accepts" "skipped" "no psql/pgbench" "-"
	elif ! pg_isready -q -d "$PGURL" -t 5; then
		echo "  skipped: pg_isready fails for $PGURL"
		row "PostgreSQL accepts" "skipped" "pg_isready failed" "-"
	else
		cat >"$work/one-row.sql" <<-'EOF'
			INSERT INTO t (id, body, created_at) VALUES (gen_random_uuid()::text, repeat('x', 200), now());
		EOF
		ours=postgres
		ydb=$(pgdb)
		pgdbs+=("$ydb")
		: >"$work/postgres.txt"
		for i in $(seq "$RUNS"); do
			# The yardstick, on a fresh table.
			psql "$(pgurl "$ydb")" -qAtX -v ON_ERROR_STOP=1 \
				-c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS t" -c "CREATE TABLE t (id text primary key, body text, created_at timestamptz)" >/dev/null
			((WARM_S)) && timeout $((WARM_S + 60)) pgbench -n -c 32 -j 2 -T "$WARM_S" -f "$work/one-row.sql" "$(pgurl "$ydb")" >/dev/null 2>&1
			mark
			timeout $((DUR_S + 60)) pgbench -n -c 32 -j 2 -T "$DUR_S" -f "$work/one-row.sql" "$(pgurl "$ydb")" >"$work/pgbench$i.log" 2>&1 ||
				die "pgbench failed: $(tail -3 "$work/pgbench$i.log")"
			oy=$(others)
			y=$(tps "$work/pgbench$i.log")

			# sendonce on a fresh database: the worker first (it migrates).
			sdb=$(pgdb)
			pgdbs+=("$sdb")
			start "$work/pg-worker$i.log" "$work/sendonce" serve --role worker --db "$(pgurl "$sdb")" --transport capture
			worker_pid=$started
			for _ in $(seq 300); do
				grep -q 'worker started' "$work/pg-worker$i.log" && break
				kill -0 "$worker_pid" 2>/dev/null || die "the worker died: $(tail -5 "$work/pg-worker$i.log")"
				sleep 0.1
			done
			grep -q 'worker started' "$work/pg-worker$i.log" || die "the worker did not start"
			key=$("$work/sendonce" keys create --db "$(pgurl "$sdb")" --name bench --scopes send,read)
			api_pids=()
			for p in "${P_PGAPI[@]}"; do
				start "$work/pg-api$i-$p.log" "$work/sendonce" serve --role api --db "$(pgurl "$sdb")" --addr 127.0.0.1:"$p"
				api_pids+=("$started")
				wait_http "http://127.0.0.1:$p/healthz" "$started" || die "sendonce --role api did not start"
			done
			((WARM_S)) && three "${WARM_S}s"
			mark
			three "$DURATION"
			os=$(others)
			read -r s sp bad <<<"$(for p in "${P_PGAPI[@]}"; do
				l=$(cat "$work/pgwrk-$p.txt")
				echo "$(field ok_rps "$l") $(field p99_ms "$l") $(field non200 "$l")"
			done | awk '{s+=$1; if ($2>p) p=$2; b+=$3} END {printf "%.1f %.3f %d\n", s, p, b}')"

			# Stopped first: their pools (20 connections each) and pgbench's 32
			# clients together pass a default max_connections of 100.
			for p in "${api_pids[@]}"; do peak_rss "postgres: serve --role api" "$p"; done
			peak_rss "postgres: serve --role worker" "$worker_pid"
			halt "${api_pids[@]}" "$worker_pid"
			if ((PG_ACCEPT_SQL)) && ((i == RUNS)); then
				# PostgreSQL alone running one accept's statements, on the migrated database.
				if timeout $((DUR_S + 60)) pgbench -n -c 32 -j 2 -T "$DUR_S" -f bench/pgbench/accept.sql "$(pgurl "$sdb")" >"$work/pgaccept.log" 2>&1; then
					pa=$(tps "$work/pgaccept.log")
				else
					pa=""
					echo "  pgbench accept.sql failed (its statements may not match the schema): $(grep -m1 ERROR "$work/pgaccept.log" || tail -1 "$work/pgaccept.log")"
				fi
			fi
			psql "$PGURL" -qAtX -c "DROP DATABASE IF EXISTS $sdb WITH (FORCE)" >/dev/null || true

			r=$(ratio "$s" "$y")
			printf '  round %d  sendonce %.0f ok/s (worst p99 of the 3 wrk %.1f ms, non-200 %s)   pgbench %.0f tps   ratio %s   others %s%%/%s%% CPU\n' \
				"$i" "$s" "$sp" "$bad" "$y" "$r" "$os" "$oy"
			echo "$s $sp $y $r" >>"$work/postgres.txt"
		done
		m() { cut -d' ' -f"$1" "$work/postgres.txt" | median; }
		printf '  median: sendonce %.0f ok/s (p99 %.1f ms), pgbench one-row INSERT %.0f tps, ratio %s\n' "$(m 1)" "$(m 2)" "$(m 3)" "$(m 4)"
		row "PostgreSQL, 3 api + 1 worker, new keys (ok/s, p99)" "$(printf '%.0f/s, p99 %.1f ms' "$(m 1)" "$(m 2)")" \
			"$(printf 'pgbench one-row INSERT %.0f tps' "$(m 3)")" "$(m 4)"
		if ((PG_ACCEPT_SQL)); then
			if [[ -n ${pa:-} ]]; then
				s=$(tail -1 "$work/postgres.txt" | cut -d' ' -f1)
				echo "  PostgreSQL alone, accept.sql: $(printf '%.0f' "$pa") tps (against round $RUNS's sendonce $(printf '%.0f' "$s") ok/s)"
				row "PostgreSQL, new keys vs one accept's SQL alone (last round)" "$(printf '%.0f/s' "$s")" \
					"$(printf 'pgbench accept.sql %.0f tps' "$pa")" "$(ratio "$s" "$pa")"
			else
				row "PostgreSQL, new keys vs one accept's SQL alone" "-" "accept.sql failed" "-"
			fi
		fi
		ours=""
	fi
}
