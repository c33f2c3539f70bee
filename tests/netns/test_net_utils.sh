#!/bin/bash
# Between hosts (issue 5): ping-pongs and Debian's clients, unmodified,
# between two network namespaces ("hosts" a and b, tests/netns/lib.sh),
# over softhca's net path (RC/UC over TCP, UD over UDP, multicast over IP
# multicast):
#  - shca_pingpong (tests/pingpong), the evidence that the data cross
#    intact: RC, UC, UD and SRQ, -e, -N and -t, 1 B to 1 MiB (UD up to the
#    veth's 1024 MTU), IPv4 and IPv6 GIDs; each side checks every byte it
#    receives (and the bytes around it, and UD's GRH);
#  - ibv_{rc,uc,ud,srq}_pingpong, smoke tests: server in a, client in b
#    connecting to a's veth address, each on its own veth IPv4 GID (the
#    IPv6 GID too); events (-e), sizes 1 B to 1 MiB, a longer run, -N and
#    -t, on-demand paging (-o, -O, -P) and device memory (-j); a side that
#    says "invalid data in page" (-c) fails; ibv_xsrq_pingpong (XRC);
#  - perftest's ib_{send,write,read,atomic}_{lat,bw} (RC), the UC, UD and
#    XRC variants, --odp, and a few with their exchange over rdma_cm (-z);
#    smoke tests too (perftest does not look at the payload);
#  - rdmacm-utils: rping -V (it compares every ping's data; each line i
#    must be ping i), rdma_server/rdma_client, rdma_xserver/rdma_xclient
#    -c x, ucmatose, udaddy, mckey
#    (receiver in a, sender in b once the receiver said it joined);
#  - clean failures: an ibv_rc_pingpong client toward a with no server
#    there, an rping client toward a port of a nobody listens on: both
#    exit non-zero by themselves (not by their timeout).
# No case is run twice.  Each pair is bounded in time, and when the first
# case of a family (one client and transport) times out, the family's
# other cases fail at once, not run: the whole test stays within a few
# minutes however the net path fails.
# Environment: SOFTHCA_BUILD (default: the source tree's build/), the
# libraries in $SOFTHCA_BUILD/lib.  Root only (77 otherwise).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong \
	ibv_srq_pingpong ibv_xsrq_pingpong ib_send_lat ib_send_bw ib_write_lat ib_write_bw \
	ib_read_lat ib_read_bw ib_atomic_lat ib_atomic_bw rping rdma_server \
	rdma_client rdma_xserver rdma_xclient udaddy mckey ucmatose stdbuf ss

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -e "$LIB/librdmacm.so.1" ] || { echo "FAIL: no $LIB/librdmacm.so.1" >&2; exit 1; }
PP=$SOFTHCA_BUILD/tests/shca_pingpong
[ -x "$PP" ] || { echo "FAIL: no $PP (build first)" >&2; exit 1; }
# the clients must see softhca only
export LD_LIBRARY_PATH=$LIB
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS
LOADER_ERRORS='no version information available|symbol lookup error|undefined symbol|error while loading shared libraries'

DEV=softhca_$NETNS_IF
# the clients' own TCP exchanges and rdma_cm ports: one per pair, far from
# softhca's own data-path ports (SOFTHCA_PORT_BASE, 24000-25023)
next_port=18600
P=0
port() { next_port=$((next_port + 1)); P=$next_port; }

not_grep() { ! grep -Eq -- "$1" "$2"; }
re() { printf '%s' "$1" | sed 's/[.[\*^$]/\\&/g'; }
started=$SECONDS

# under ctest's TIMEOUT (600, tests/CMakeLists.txt)
: "${NETNS_WATCHDOG:=540}"
netns_setup 2 || { fail "netns_setup 2"; finish; }
A4=$(netns_ip4 a) B4=$(netns_ip4 b) A6=$(netns_ip6 a) B6=$(netns_ip6 b)
ok "namespaces a ($A4) and b ($B4)"

# gid_index HOST GID: the index of GID on HOST's softhca_veth0 (ibv_devinfo -v)
gid_index() {
	NETNS_EXEC_TIMEOUT=30 netns_exec "$1" ibv_devinfo -v -d "$DEV" 2>/dev/null |
		sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+$(re "$2"), RoCE v2\$/\1/p" |
		head -1
}
GA4=$(gid_index a "::ffff:$A4") GB4=$(gid_index b "::ffff:$B4")
GA6=$(gid_index a "$A6") GB6=$(gid_index b "$B6")
have_gids() { [ -n "$GA4" ] && [ -n "$GB4" ] && [ -n "$GA6" ] && [ -n "$GB6" ]; }
check "GID indexes on $DEV: a ::ffff:$A4 '$GA4', b ::ffff:$B4 '$GB4', a $A6 '$GA6', b $B6 '$GB6'" have_gids
: "${GA4:=0}" "${GB4:=0}" "${GA6:=1}" "${GB6:=1}"

# Families whose first case timed out: FAMILY -> that case; families
# seen: FAMILY -> 1.
declare -A hung=() seen=()

# gate FAMILY NAME: 0 to run case NAME of FAMILY; 1 (and a fail line) when
# the first case of FAMILY timed out.
gate() {
	[ -z "${hung[$1]:-}" ] && return 0
	fail "$2: not run, ${hung[$1]} timed out"
	return 1
}

# timed_out FAMILY NAME: after a pair; when it was FAMILY's first and timed
# out, the family's other cases will not run
timed_out() {
	if [ -z "${seen[$1]:-}" ]; then
		case "$NETNS_PAIR_SERVER_RC $NETNS_PAIR_CLIENT_RC" in
		*124*|*137*) hung[$1]=$2 ;;
		esac
	fi
	seen[$1]=1
}

# pair_ok NAME: the last netns_pair exited 0 on both sides without a
# loader complaint; one ok/fail line.
pair_ok() {
	if [ "$NETNS_PAIR_SERVER_RC" = 0 ] && [ "$NETNS_PAIR_CLIENT_RC" = 0 ] &&
	   not_grep "$LOADER_ERRORS" "$NETNS_PAIR_SERVER_OUT" &&
	   not_grep "$LOADER_ERRORS" "$NETNS_PAIR_CLIENT_OUT"; then
		ok "$1"
		return 0
	fi
	fail "$1 (server exit $NETNS_PAIR_SERVER_RC, client exit $NETNS_PAIR_CLIENT_RC)"
	return 1
}

# out_has NAME server|client ERE: one check on the last pair's output
out_has() {
	local f=$NETNS_PAIR_CLIENT_OUT
	[ "$2" = server ] && f=$NETNS_PAIR_SERVER_OUT
	if grep -Eq -- "$3" "$f"; then ok "$1: $2 /$3/"; else
		fail "$1: $2 output does not match /$3/"
		tail -5 "$f" | sed 's/^/    /' >&2
	fi
}

# --- shca_pingpong: the data checked -------------------------------------
# spp NAME [-6] ARGS...: shca_pingpong's server in a on a's veth GID, its
# client in b on b's, toward a's address; both sides exit 0, each says it
# checked all its -n (default 1000) messages, and the client's peer is
# a's GID.  -6: the IPv6 GIDs (the TCP exchange stays on IPv4).  Bounded
# by PP_SECS (60 s).
spp() {
	local name=$1 ga=$GA4 gb=$GB4 ra="::ffff:$A4" n=1000 a fam=shca side
	local secs=${PP_SECS:-60}
	shift
	if [ "${1:-}" = -6 ]; then ga=$GA6 gb=$GB6 ra=$A6 fam=shca-6; shift; fi
	for a in "$@"; do
		case $a in -n) n=next ;; *) [ "$n" = next ] && n=$a ;; esac
	done
	name="spp $name: shca_pingpong -g $gb${*:+ $*} (a <- b)"
	gate "$fam" "$name" || return 1
	port
	NETNS_PAIR_PORT=$P netns_pair a b "$secs" \
		"$PP" -d "$DEV" -g "$ga" -p "$P" "$@" -- \
		"$PP" -d "$DEV" -g "$gb" -p "$P" "$@" "$A4"
	timed_out "$fam" "$name"
	pair_ok "$name" || return 1
	for side in server client; do
		out_has "${name%%:*}" "$side" "^shca_pingpong: ok: .*, $n iters of "
	done
	out_has "${name%%:*}" client "remote address: .*GID $(re "$ra")\$"
}

for t in rc uc srq; do
	spp "$t" -T "$t" -n 500
	spp "$t-events" -T "$t" -e -n 500
	spp "$t-ext" -T "$t" -e -N -t -n 500
done
spp ud -T ud -s 1024 -n 500
spp ud-events -T ud -s 1024 -e -n 500
spp ud-ext -T ud -s 1024 -e -N -t -n 500
for s in 1 4096 65536; do
	for t in rc uc srq; do
		spp "$t-$s" -T "$t" -s "$s" -n 200
	done
done
spp rc-1MiB -T rc -s 1048576 -n 20
spp srq-1MiB -T srq -s 1048576 -n 20
spp rc-ext-1MiB -T rc -e -N -t -s 1048576 -n 20
for s in 1 512 1024; do
	spp "ud-$s" -T ud -s "$s" -n 200
done
PP_SECS=120 spp rc-long -T rc -n 5000
spp rc-ipv6 -6 -T rc -s 4096 -n 200
spp ud-ipv6 -6 -T ud -s 1024 -n 200
spp srq-ipv6 -6 -T srq -e -N -t -s 65536 -n 100

# --- ibverbs-utils ping-pongs: smoke tests --------------------------------
# pp NAME PROG [-6] ARGS...: PROG's server in a on a's veth GID, its client
# in b on b's, toward a's address; both sides exit 0, the client did its
# iterations with a's GID as the remote one.  -6: the IPv6 GIDs (the
# clients' own exchange stays on IPv4).  Bounded by PP_SECS (20 s).
pp() {
	local name=$1 prog=$2 ga=$GA4 gb=$GB4 ra="::ffff:$A4" n=1000 a fam=$2
	local secs=${PP_SECS:-20}
	shift 2
	if [ "${1:-}" = -6 ]; then ga=$GA6 gb=$GB6 ra=$A6 fam=$prog-6; shift; fi
	for a in "$@"; do
		case $a in -n) n=next ;; *) [ "$n" = next ] && n=$a ;; esac
	done
	name="pp $name: $prog -g $gb${*:+ $*} (a <- b)"
	gate "$fam" "$name" || return 1
	port
	NETNS_PAIR_PORT=$P netns_pair a b "$secs" \
		"$prog" -d "$DEV" -g "$ga" -p "$P" "$@" -- \
		"$prog" -d "$DEV" -g "$gb" -p "$P" "$@" "$A4"
	timed_out "$fam" "$name"
	pair_ok "$name" || return 1
	if grep -q "^$n iters in" "$NETNS_PAIR_CLIENT_OUT" &&
	   grep -q "remote address: .*GID $(re "$ra")\$" "$NETNS_PAIR_CLIENT_OUT"; then
		ok "${name%%:*}: $n iters with remote GID $ra"
	else
		fail "${name%%:*}: no '$n iters' or remote GID $ra in the client's output"
		tail -5 "$NETNS_PAIR_CLIENT_OUT" | sed 's/^/    /' >&2
	fi
}

for t in rc uc srq; do
	pp "$t" "ibv_${t}_pingpong"
	pp "$t-events" "ibv_${t}_pingpong" -e
done
# ud_pingpong's default size (2048) is above the veth's active MTU (1024):
# it refuses it itself, as it does on rxe over a 1500-byte Ethernet
pp ud ibv_ud_pingpong -s 1024
pp ud-events ibv_ud_pingpong -s 1024 -e
for s in 1 4096 65536; do
	pp "rc-$s" ibv_rc_pingpong -s "$s" -n 200 -c
	pp "uc-$s" ibv_uc_pingpong -s "$s" -n 200 -c
	pp "srq-$s" ibv_srq_pingpong -s "$s" -n 200 -c
done
pp rc-1MiB ibv_rc_pingpong -s 1048576 -n 50 -c
# Each side posts up to 16 sends of 1 MiB more than it needs
# (ibv_srq_pingpong posts while fewer than -n completed), so the client's
# last ACKs travel behind megabytes on the one connection: it failed 1 run
# in 16 until the exit flush waited for the peer's kernel to have them
# (SIOCOUTQ 0) and a destroyed QP's queued packets were dropped.
pp srq-1MiB ibv_srq_pingpong -s 1048576 -n 20 -c
for s in 1 512 1024; do
	pp "ud-$s" ibv_ud_pingpong -s "$s" -n 200 -c
done
# 5000 round trips: 2 s on an idle machine, up to 35 s seen with both
# cores kept busy by other work (each trip wakes both engine threads)
PP_SECS=120 pp rc-long ibv_rc_pingpong -n 5000
pp rc-events-sizes ibv_rc_pingpong -e -s 65536 -n 300 -c
pp rc-new-send ibv_rc_pingpong -N
pp rc-timestamps ibv_rc_pingpong -t
pp rc-ipv6 ibv_rc_pingpong -6 -s 4096 -n 200 -c
pp ud-ipv6 ibv_ud_pingpong -6 -s 1024 -n 200 -c
# on-demand paging (explicit, implicit, prefetched) and device memory
# (docs/dm-odp.md), between the namespaces
pp rc-odp ibv_rc_pingpong -o -n 200 -c
pp rc-odp-implicit ibv_rc_pingpong -o -O -n 200 -c
pp rc-odp-prefetch ibv_rc_pingpong -o -P -n 200 -c
pp rc-dm ibv_rc_pingpong -j -n 200

# XRC (docs/xrc.md): ibv_xsrq_pingpong's SRQs in a domain, its XRC_SEND
# and XRC_RECV QPs between the namespaces; it prints "success" on both
# sides when every message came back
gate xsrq "xsrq: ibv_xsrq_pingpong (a <- b)" && {
	port
	NETNS_PAIR_PORT=$P netns_pair a b 20 \
		ibv_xsrq_pingpong -d "$DEV" -g "$GA4" -p "$P" -- \
		ibv_xsrq_pingpong -d "$DEV" -g "$GB4" -p "$P" "$A4"
	timed_out xsrq "xsrq: ibv_xsrq_pingpong (a <- b)"
	pair_ok "xsrq: ibv_xsrq_pingpong (a <- b)" &&
		out_has xsrq client '^success$' &&
		out_has xsrq server '^success$'
}

# --- perftest: smoke tests --------------------------------------------------
# pt NAME PROG ARGS...: server in a, client in b toward a, once the server
# listens; both exit 0 and the client prints a result line.  -x: the veth
# IPv4 GID (perftest finds no RoCE v2 GID type in sysfs, which softhca has
# no entries in).  -F: a result even when perftest's sampling of the CPU
# clock is disturbed by a loaded machine (without it perftest exits 1,
# "Can't produce a report": a timing check of its own, nothing of
# softhca's).  RDMA_CM=1: -z, perftest's exchange over an rdma_cm
# connection (one rdma_listen, which the client waits for).  Not -R here:
# perftest 4.5's -R client connects its test QPs right after its last
# handshake with the server, which only then calls rdma_listen again on
# the same port (linux-rdma/perftest#93): whether the client is refused
# (and then crashes) is the scheduler's choice, and only a retry would
# hide that, which would hide a lost listener of softhca's too.  A
# family: the connection type (-c), with or without -z.
pt() {
	local name=$1 prog=$2 xa=(-F -x "$GA4") xb=(-F -x "$GB4") fam=RC a secs=30
	shift 2
	for a in "$@"; do
		case $a in -c) fam=next ;; *) [ "$fam" = next ] && fam=$a ;; esac
	done
	if [ -n "${RDMA_CM:-}" ]; then
		xa+=(-z) xb+=(-z) fam=$fam-z
	fi
	name="pt $name: $prog ${xb[*]} $* (a <- b)"
	gate "perftest-$fam" "$name" || return 1
	port
	NETNS_PAIR_PORT=$P netns_pair a b "$secs" \
		"$prog" -d "$DEV" "${xa[@]}" -p "$P" "$@" -- \
		"$prog" -d "$DEV" "${xb[@]}" -p "$P" "$@" "$A4"
	timed_out "perftest-$fam" "$name"
	pair_ok "$name" || return 1
	if grep -Eq '^ *[0-9]+ +[0-9]+ ' "$NETNS_PAIR_CLIENT_OUT"; then
		ok "${name%%:*}: a result line"
	else
		fail "${name%%:*}: no result line"
		tail -5 "$NETNS_PAIR_CLIENT_OUT" | sed 's/^/    /' >&2
	fi
}

for p in ib_send_lat ib_write_lat ib_read_lat; do
	pt "$p" "$p" -n 200
done
for p in ib_send_bw ib_write_bw ib_read_bw; do
	pt "$p" "$p" -n 100
done
pt ib_write_bw-all ib_write_bw -a -n 10
pt ib_read_lat-1MiB ib_read_lat -s 1048576 -n 20
pt ib_atomic_lat ib_atomic_lat -n 500
pt ib_atomic_bw ib_atomic_bw -n 500
pt ib_send_lat-UC ib_send_lat -c UC -n 200
pt ib_write_bw-UC ib_write_bw -c UC -n 100
pt ib_send_lat-UD ib_send_lat -c UD -n 200
pt ib_send_bw-UD ib_send_bw -c UD -n 100
pt ib_send_lat-XRC ib_send_lat -c XRC -n 200
pt ib_write_bw-XRC ib_write_bw -c XRC -n 100
pt ib_read_bw-XRC ib_read_bw -c XRC -n 100
pt ib_write_bw-odp ib_write_bw --odp -n 100
pt ib_read_bw-odp ib_read_bw --odp -n 100
RDMA_CM=1 pt ib_send_lat-z ib_send_lat -n 200
RDMA_CM=1 pt ib_write_bw-z ib_write_bw -n 100
RDMA_CM=1 pt ib_read_lat-z ib_read_lat -n 200
RDMA_CM=1 pt ib_send_lat-UD-z ib_send_lat -c UD -n 200

# --- rdmacm-utils -------------------------------------------------------
# ping_seq FILE N: FILE has N lines of rping's "ping data: ", the i-th
# (from 0) with ping i's data: "rdma-ping-i: " (a buffer that the RDMA
# WRITE did not reach still holds ping i - 1's)
ping_seq() {
	awk -v n="$2" 'BEGIN { k = 0 } /ping data: / {
		if (index($0, "ping data: rdma-ping-" k ": ") == 0) bad++
		k++
	} END { exit !(k == n && !bad) }' "$1"
}
# rping -V: the client compares every ping's data (rping says "data
# mismatch" and fails); stdout line-buffered (stderr shares the file)
port
NETNS_PAIR_PORT=$P netns_pair a b 20 \
	stdbuf -oL rping -s -a "$A4" -p "$P" -v -V -C 100 -- \
	stdbuf -oL rping -c -a "$A4" -p "$P" -v -V -C 100
if pair_ok "rping -v -V -C 100 (a <- b)"; then
	check "rping: the client's 100 lines, line i with ping i's data" \
		ping_seq "$NETNS_PAIR_CLIENT_OUT" 100
	check "rping: the server's 100 lines, line i with ping i's data" \
		ping_seq "$NETNS_PAIR_SERVER_OUT" 100
fi

port
NETNS_PAIR_PORT=$P netns_pair a b 20 rdma_server -s "$A4" -p "$P" -- \
	rdma_client -s "$A4" -p "$P"
pair_ok "rdma_server/rdma_client (a <- b)" &&
	out_has rdma_server client 'rdma_client: end 0' &&
	out_has rdma_server server 'rdma_server: end 0'

# XRC through the CM (docs/xrc.md): the XRCETH between the namespaces
port
NETNS_PAIR_PORT=$P netns_pair a b 20 rdma_xserver -p "$P" -c x -- \
	rdma_xclient -s "$A4" -p "$P" -c x
pair_ok "rdma_xserver/rdma_xclient -c x (a <- b)" &&
	out_has rdma_xserver client 'rdma_xclient: end 0' &&
	out_has rdma_xserver server 'rdma_xserver: end 0'

port
NETNS_PAIR_PORT=$P netns_pair a b 30 ucmatose -b "$A4" -p "$P" -c 10 -C 10 -- \
	ucmatose -s "$A4" -p "$P" -c 10 -C 10
pair_ok "ucmatose -c 10 -C 10 (a <- b)" &&
	out_has ucmatose client 'return status 0'

# udaddy (its port is 7174; -p is the port space): a UD id listens on a
# UDP port, which NETNS_PAIR_PORT (TCP) does not see.
# ud_listening HOST PORT: HOST's UDP PORT is bound and the process that
# bound it waits in read(2) (system call 0): in rdma_get_cm_event, after
# its rdma_listen (udaddy does not block between its bind and its listen)
ud_listening() {
	local pid
	pid=$(ip netns exec "$(netns_name "$1")" ss -Hulnp "sport = :$2" |
		sed -n 's/.*pid=\([0-9]*\),.*/\1/p' | head -1)
	[ -n "$pid" ] && [ "$(cut -d' ' -f1 "/proc/$pid/syscall")" = 0 ]
}
NETNS_PAIR_READY="ud_listening a 7174" netns_pair a b 20 \
	udaddy -b "$A4" -C 10 -- udaddy -s "$A4" -C 10
pair_ok "udaddy -C 10 (a <- b)" &&
	out_has udaddy client 'return status 0'

# mckey: the receiver in a (its stdout line-buffered) posts its receives,
# joins, and says "joined dgid" once its QP is attached (the join event
# retrieved); the sender in b starts only then (bounded by the pair's
# time), so no datagram can go before the receiver is in the group.
# IPv4 (::ffff:239.7.7.1), then IPv6 (ff0e::7:7:1)
joined='grep -q "joined dgid" "$NETNS_PAIR_SERVER_OUT"'
NETNS_PAIR_READY=$joined netns_pair a b 20 \
	stdbuf -oL mckey -m 239.7.7.1 -b "$A4" -C 10 -- \
	mckey -m 239.7.7.1 -b "$B4" -s -C 10
pair_ok "mckey -C 10: receiver a, sender b" &&
	out_has mckey client 'joined dgid: ::ffff:239\.7\.7\.1' &&
	out_has mckey server 'data transfers complete'
NETNS_PAIR_READY=$joined netns_pair a b 20 \
	stdbuf -oL mckey -m ff0e::7:7:1 -b "$A6" -C 10 -- \
	mckey -m ff0e::7:7:1 -b "$B6" -s -C 10
pair_ok "mckey -6 -C 10: receiver a, sender b" &&
	out_has mckey-6 client 'joined dgid: ff0e::7:7:1 ' &&
	out_has mckey-6 server 'data transfers complete'

# --- clean failures -----------------------------------------------------
# clean_fail RC: an error exit (1 to 255), not 0, timeout's own statuses
# (124 to 127) or death by a signal (128 + n: 129 to 192)
clean_fail() {
	[ "$1" -ge 1 ] && [ "$1" -le 255 ] &&
		{ [ "$1" -lt 124 ] || [ "$1" -gt 192 ]; }
}

# ibv_rc_pingpong client in b toward a, where nothing listens (bounded by
# its 30 s; clean_fail says it was not that bound that ended it)
port
NETNS_EXEC_TIMEOUT=30 netns_exec b ibv_rc_pingpong -d "$DEV" -g "$GB4" -p "$P" "$A4" \
	</dev/null >"$NETNS_T/nosrv.out" 2>&1
rc=$?
check "ibv_rc_pingpong toward a with no server: exits non-zero by itself ($rc)" clean_fail "$rc"
check "ibv_rc_pingpong toward a with no server: says it could not connect" \
	grep -q "Couldn't connect to $A4:$P" "$NETNS_T/nosrv.out"

# rping client in b toward a port of a nobody listens on: the IB CM's
# REJ "invalid service ID" (8), as on a RoCE device
port
NETNS_EXEC_TIMEOUT=30 netns_exec b rping -c -a "$A4" -p "$P" -C 1 \
	</dev/null >"$NETNS_T/norping.out" 2>&1
rc=$?
check "rping toward a with no listener: exits non-zero by itself ($rc)" clean_fail "$rc"
check "rping toward a with no listener: RDMA_CM_EVENT_REJECTED, error 8" \
	grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$NETNS_T/norping.out"

echo "$(basename "$0"): $((SECONDS - started)) s"
finish
