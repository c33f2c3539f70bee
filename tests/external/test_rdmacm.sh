#!/bin/bash
# Debian's rdmacm-utils and perftest's rdma_cm mode (-R), unmodified, on
# softhca's librdmacm: two processes of this host, on 127.0.0.1 and on a
# non-loopback address of this machine (when it has one).  rping -V
# compares every ping's data (and each line i must be ping i's); the
# others are smoke tests: they pass on their exit status and their own
# last line, they do not compare payloads.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need rping rdma_server rdma_client rdma_xserver rdma_xclient udaddy mckey \
	ucmatose cmtime
[ -e "$LIB/librdmacm.so.1" ] || { echo "FAIL: no $LIB/librdmacm.so.1" >&2; exit 1; }

# The first global IPv4 address of this machine, and its device.
OTHER=$(ip -4 -o addr show scope global 2>/dev/null | awk 'NR == 1 { split($4, a, "/"); print a[1] }')
OTHER_DEV=$(ip -4 -o addr show scope global 2>/dev/null | awk 'NR == 1 { print "softhca_" $2 }')
ADDRS="127.0.0.1 $OTHER"
# README claims both halves: without the address, a failure under CI
# (CI=true), else a skip of that half that scripts/check.sh lists.
if [ -z "$OTHER" ]; then
	case ${CI:-} in
	""|0|false) echo "SKIP: no global IPv4 address: the interface-address half did not run" ;;
	*) fail "CI=true and no global IPv4 address: the interface-address half cannot run" ;;
	esac
fi
dev_of() { [ "$1" = 127.0.0.1 ] && echo softhca_lo || echo "$OTHER_DEV"; }

expect_pair_out() {
	if grep -Eq -- "$3" "$T/$1.$2"; then ok "$1 $2 /$3/"; else
		fail "$1: $2 output does not match /$3/"
		tail -5 "$T/$1.$2" | sed 's/^/    /' >&2
	fi
}

# rping_seq NAME N: both sides printed N lines of rping's "ping data: ",
# the i-th (from 0) with ping i's data, "rdma-ping-i: " (a buffer that
# the RDMA WRITE did not reach still holds ping i - 1's)
rping_seq() {
	local side
	for side in server client; do
		if awk -v n="$2" 'BEGIN { k = 0 } /ping data: / {
			if (index($0, "ping data: rdma-ping-" k ": ") == 0) bad++
			k++
		} END { exit !(k == n && !bad) }' "$T/$1.$side"; then
			ok "$1: the $side's $2 lines, line i with ping i's data"
		else
			fail "$1: the $side's lines are not pings 0 to $(($2 - 1))"
			tail -5 "$T/$1.$side" | sed 's/^/    /' >&2
		fi
	done
}

for a in $ADDRS; do
	# -V: the client compares each ping's data and fails on a
	# mismatch.  stdout line-buffered: stderr shares the file, a block
	# flush would split a line around rping's "DISCONNECT EVENT"
	# message.  The client starts once the server listens.
	port=$(free_port)
	PAIR_PORT=$port pair "rping-$a" 60 \
		stdbuf -oL rping -s -a "$a" -p "$port" -v -V -C 1000 -- \
		stdbuf -oL rping -c -a "$a" -p "$port" -v -V -C 1000
	rping_seq "rping-$a" 1000
	port=$(free_port)
	PAIR_PORT=$port pair "rping-q-$a" 60 \
		stdbuf -oL rping -s -q -a "$a" -p "$port" -v -V -C 100 -- \
		stdbuf -oL rping -c -q -a "$a" -p "$port" -v -V -C 100
	rping_seq "rping-q-$a" 100

	port=$(free_port)
	PAIR_PORT=$port pair "rdma_server-$a" 30 rdma_server -s "$a" -p "$port" -- \
		rdma_client -s "$a" -p "$port"
	expect_pair_out "rdma_server-$a" client 'rdma_client: end 0'
	expect_pair_out "rdma_server-$a" server 'rdma_server: end 0'

	port=$(free_port)
	PAIR_PORT=$port pair "rdma_xserver-rc-$a" 30 rdma_xserver -p "$port" -c r -- \
		rdma_xclient -s "$a" -p "$port" -c r
	expect_pair_out "rdma_xserver-rc-$a" client 'rdma_xclient: end 0'

	# XRC through the CM (docs/xrc.md): an XRC_SEND QP to the server's
	# XRC_RECV QP, the SEND into its XRC SRQ (srqn in the REP's data)
	port=$(free_port)
	PAIR_PORT=$port pair "rdma_xserver-xrc-$a" 30 rdma_xserver -p "$port" -c x -- \
		rdma_xclient -s "$a" -p "$port" -c x
	expect_pair_out "rdma_xserver-xrc-$a" client 'rdma_xclient: end 0'
	expect_pair_out "rdma_xserver-xrc-$a" server 'rdma_xserver: end 0'

	port=$(free_port)
	PAIR_PORT=$port pair "ucmatose-$a" 60 ucmatose -p "$port" -c 10 -C 10 -- \
		ucmatose -s "$a" -p "$port" -c 10 -C 10
	expect_pair_out "ucmatose-$a" client 'return status 0'

	# (udaddy's port, 7174: bound, and the server in rdma_get_cm_event)
	PAIR_READY="udp_waiting 7174" pair "udaddy-$a" 60 \
		udaddy -C 10 -- udaddy -s "$a" -C 10
	expect_pair_out "udaddy-$a" client 'return status 0'

	# mckey's default makes the QP with rdma_create_qp (loopback on);
	# -l asks for IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, not offered (rxe
	# neither).  The sender starts once the receiver (stdout
	# line-buffered) says "joined dgid": its QP is attached, so no
	# datagram can go before it is in the group.
	PAIR_READY='grep -q "joined dgid" "$T/$name.server"' \
		pair "mckey-$a" 60 \
		stdbuf -oL mckey -m 239.7.7.1 -b "$a" -C 10 -- \
		mckey -m 239.7.7.1 -b "$a" -s -C 10
	expect_pair_out "mckey-$a" client 'joined dgid: ::ffff:239.7.7.1'
	expect_pair_out "mckey-$a" server 'data transfers complete'

	# cmtime's server never returns: it is stopped once the client is done
	port=$(free_port)
	timeout -k 5 60 cmtime -b "$a" -p "$port" </dev/null >"$T/cmtime-$a.server" 2>&1 &
	spid=$!
	wait_ready 60 "$spid" tcp_listening "$port"
	run "cmtime-$a" 60 cmtime -s "$a" -p "$port" -c 50
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	expect_rc "cmtime-$a" 0
	expect_out "cmtime-$a" '^disconnect +:'
	no_loader_errors "cmtime-$a"

	if command -v ib_send_lat >/dev/null; then
		dev=$(dev_of "$a")
		for t in "ib_send_lat" "ib_write_bw" "ib_read_lat" \
			 "ib_send_lat -c UD"; do
			port=$(free_port)
			name="$(echo "$t" | tr ' ' '_')-$a"
			# -F: a report even when perftest's sampling of
			# the CPU clock is disturbed by the load (else it
			# exits 1, "Can't produce a report")
			# shellcheck disable=SC2086
			PAIR_PORT=$port pair "$name" 60 \
				$t -F -R -d "$dev" -p "$port" -- \
				$t -F -R -d "$dev" -p "$port" "$a"
		done
	fi
done

# A connection to a port nobody listens on: the IB CM's REJ "invalid
# service ID" (8), as on a RoCE device.
run rping-refused 20 rping -c -a 127.0.0.1 -p "$(free_port)" -C 1
expect_rc rping-refused nonzero
expect_out rping-refused 'RDMA_CM_EVENT_REJECTED, error 8' stderr

# An rsocket connection nobody listens for: refused, a clean error
# (the rsocket API itself: test_rsocket.sh).
if command -v rstream >/dev/null; then
	run rstream 20 rstream -s 127.0.0.1 -p "$(free_port)"
	expect_rc rstream nonzero
	no_loader_errors rstream
fi
finish
