# Sourced by bench/receive.sh and bench/compare_postfix.sh: the master.cf of
# a private Postfix instance (its own configuration and queue directories)
# whose smtpd listens on 127.0.0.1:PORT, with the daemons a queue, a relay
# and a discard transport need.
# postfix_master_cf PORT: prints master.cf.
postfix_master_cf() {
	cat <<-EOF
		127.0.0.1:$1 inet n - n - - smtpd
		pickup unix n - n 60 1 pickup
		cleanup unix n - n - 0 cleanup
		qmgr unix n - n 300 1 qmgr
		rewrite unix - - n - - trivial-rewrite
		bounce unix - - n - 0 bounce
		defer unix - - n - 0 bounce
		trace unix - - n - 0 bounce
		verify unix - - n - 1 verify
		flush unix n - n 1000? 0 flush
		proxymap unix - - n - - proxymap
		smtp unix - - n - - smtp
		relay unix - - n - - smtp
		showq unix n - n - - showq
		error unix - - n - - error
		retry unix - - n - - error
		discard unix - - n - - discard
		anvil unix - - n - 1 anvil
		scache unix - - n - 1 scache
		postlog unix-dgram n - n - 1 postlogd
	EOF
}
