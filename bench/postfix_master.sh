# Sourced by bench/receive.sh and bench/compare_postfix.sh (run from the
# repository's root): the configuration of a private Postfix instance (its
# own configuration, queue and log directories under DIR), as the test kit
# (internal/testkit/postfixtest) runs one. Run as root, Postfix drops to
# user postfix, which must reach DIR/data.

# postfix_dirs DIR: makes DIR's etc, spool and data, reachable by Postfix.
postfix_dirs() {
	mkdir -p "$1/etc" "$1/spool" "$1/data"
	chmod 755 "$1"
	chown postfix "$1/data"
}

# postfix_main_cf DIR HOSTNAME: prints the main.cf lines every instance
# has (the test kit's file: loopback only, no TLS on smtpd, no local
# delivery, its log in DIR); the caller adds where its mail goes.
postfix_main_cf() {
	sed -e "s|\$DIR|$1|g" -e "s|\$HOSTNAME|$2|" internal/testkit/postfixtest/main.cf
}

# postfix_master_cf PORT: prints master.cf, whose smtpd listens on
# 127.0.0.1:PORT: the test kit's file, so the benchmarks' Postfix and the
# tests' run the same services (a queue, a relay, a discard transport).
postfix_master_cf() {
	sed "s/^LISTEN /127.0.0.1:$1 /" internal/testkit/postfixtest/master.cf
}
