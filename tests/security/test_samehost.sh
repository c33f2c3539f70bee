#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Another user on the host tries to stand in for a victim's same-host peer
# or stall it (issue 11, docs/security.md "Same host").  The test makes two
# users, shca_sh1 (the impostor) and shca_sh2 (a victim without root), and
# removes them after, also on failure.  Victims: root and shca_sh2.
#
#  1. The impostor binds every abstract name softhca used to listen on
#     (all 1024 ports, for both victims), makes the names softhca falls back
#     to without a home directory (0777, with sockets and a host table),
#     old-style host tables (0666, valid magic) and symlinks, and tries to
#     make names in the victims' private directories: denied.  The victims'
#     pairs (RC WRITE + 100 FETCH_ADDs between two processes) still work
#     and map nothing of another user's.
#  2. Inside root's private directory, where only root can write, root
#     plants what an impostor would: a host table of another user's (0666,
#     valid magic) and a symlink.  The pair replaces them (counted in
#     host_table_refused) and never writes through the symlink.
#  3. A listener on a slot's name that is another user's (SO_PEERCRED),
#     that names another pid in its hello, or that hands out an unsealed
#     arena memfd (truncated right after): the victim's WRITE to that slot
#     fails, nothing of it is mapped, and shm_cred_refused /
#     shm_arena_refused count it.  A connection from another uid (with
#     CAP_DAC_OVERRIDE, past the directory) gets no hello.
#  4. A process killed with SIGKILL leaves its name: the next process on
#     that port takes it back (shm_stale_names), its pair works.
#  5. A victim without a home directory (shca_sh3: no key, so the
#     predictable /dev/shm/softhca-UID) whose directory the impostor made
#     first: refused, ibv_create_qp fails with EPERM and a message that
#     says why; once it is gone, the victim's pair works.
#
# Root only (exit 77 otherwise).  Ports: SOFTHCA_PORT_BASE=29100, below the
# ephemeral range (32768-60999): a connection of a test beside this one
# once took port 44300 of the old base 43300, the impostor could not bind
# it and every probe of section 3 missed it.
set -u

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root (to make a second user)"
	exit 77
fi
for c in useradd userdel runuser python3; do
	if ! command -v $c >/dev/null; then
		echo "SKIP: $c not found"
		exit 77
	fi
done
B=${SOFTHCA_BUILD:?SOFTHCA_BUILD}
T=$B/tests
TO="timeout -s KILL 90"
export LD_LIBRARY_PATH=$B/lib SOFTHCA_PORT_BASE=29100
export SOFTHCA_TOOL=$B/bin/softhca
IMP=shca_sh1
VIC=shca_sh2
NOHOME=shca_sh3
W=$(mktemp -d /tmp/shca-samehost.XXXXXX)
chmod 755 "$W"
PIDS=()
FAILS=0

cleanup() {
	local p
	exec 3>&- 4>&- 2>/dev/null
	for p in "${PIDS[@]}"; do
		kill -9 "$p" 2>/dev/null
	done
	wait 2>/dev/null
	for u in $IMP $VIC $NOHOME; do
		if id "$u" >/dev/null 2>&1; then
			pkill -9 -u "$u" 2>/dev/null
			find /dev/shm /tmp -maxdepth 1 -user "$u" \
				-exec rm -rf {} + 2>/dev/null
			userdel -r -f "$u" >/dev/null 2>&1
		fi
	done
	rm -rf "$W"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	FAILS=$((FAILS + 1))
}

# the largest value of counter $1 in file $2 (softhca stat lines)
counter() {
	grep -o "$1 [0-9]*" "$2" | awk '{ if ($2 > m) m = $2 } END { print m + 0 }'
}

# wait_for FILE RE: up to 30 s for a line matching RE in FILE (anchored:
# "ready" alone also matched "Address already in use")
wait_for() {
	local i
	for i in $(seq 300); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

cookie=$(python3 -c 'import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
print(int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), "little"))')

for u in $IMP $VIC; do
	userdel -r -f "$u" >/dev/null 2>&1
	useradd -m -s /bin/sh "$u" || { echo "SKIP: useradd $u failed"; exit 77; }
done
IMP_UID=$(id -u $IMP)
VIC_UID=$(id -u $VIC)
as_vic() { $TO runuser -u $VIC -- env LD_LIBRARY_PATH=$LD_LIBRARY_PATH \
	SOFTHCA_PORT_BASE=$SOFTHCA_PORT_BASE SOFTHCA_TOOL=$SOFTHCA_TOOL "$@"; }

# shca_sh2's private directory exists once it has run (a baseline pair)
if ! as_vic $T/samehost_pair pair >"$W/base.out" 2>&1; then
	cat "$W/base.out"
	fail "shca_sh2's pair fails before any attack"
fi

echo "=== 1. the impostor occupies every name it can"
mkfifo "$W/f0" "$W/f2"
chmod 666 "$W/f0" "$W/f2"
runuser -u $IMP -- $T/samehost_impostor occupy 0 29100 <"$W/f0" \
	>"$W/occ0.out" 2>&1 &
PIDS+=($!)
runuser -u $IMP -- $T/samehost_impostor occupy $VIC_UID 29100 <"$W/f2" \
	>"$W/occ2.out" 2>&1 &
PIDS+=($!)
exec 3>"$W/f0" 4>"$W/f2"
wait_for "$W/occ0.out" "^ready$" || fail "impostor (root) not ready"
wait_for "$W/occ2.out" "^ready$" || fail "impostor ($VIC) not ready"
cat "$W/occ0.out" "$W/occ2.out"
for f in occ0 occ2; do
	line=$(grep occupied "$W/$f.out")
	case "$line" in
	*"1024 abstract names, 1024 fallback names"*) ;;
	*) fail "the impostor did not get to occupy everything: $line" ;;
	esac
	denied=$(echo "$line" | sed -n 's/.*private: \([0-9]*\) of \([0-9]*\).*/\1 \2/p')
	set -- $denied
	if [ "${2:-0}" = 0 ] || [ "$1" != "$2" ]; then
		fail "private directory attempts not all denied: $line"
	fi
done

if $TO $T/samehost_pair pair >"$W/pair0.out" 2>&1; then
	grep "pair ok" "$W/pair0.out"
else
	cat "$W/pair0.out"
	fail "root's pair fails while the impostor holds every name"
fi
if as_vic $T/samehost_pair pair >"$W/pair2.out" 2>&1; then
	grep "pair ok" "$W/pair2.out"
else
	cat "$W/pair2.out"
	fail "$VIC's pair fails while the impostor holds every name"
fi
exec 3>&- 4>&-

echo "=== 2. a foreign host table and a symlink in root's private directory"
# (the directory only root can enter: root plants what an impostor would)
for kind in foreign symlink; do
	base=$(find /dev/shm -maxdepth 1 -type d -user 0 -perm 700 \
		-name 'softhca-0-????????????????' | head -1)
	[ -n "$base" ] || { fail "no private directory of root's"; break; }
	dir=$base/net-$cookie
	mkdir -p -m 700 "$dir"
	rm -f "$dir/host-v2"
	target=$W/target
	printf 'the impostor file\n' >"$target"
	chown $IMP "$target"
	chmod 666 "$target"
	before=$(md5sum <"$target")
	if [ $kind = foreign ]; then
		python3 -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<QI", 0x54534f4841484353, 2) +
    bytes(1 << 20))' "$dir/host-v2"
		chown $IMP "$dir/host-v2"
		chmod 666 "$dir/host-v2"
	else
		ln -s "$target" "$dir/host-v2"
	fi
	planted=$(stat -c %i "$dir/host-v2" 2>/dev/null)
	if $TO $T/samehost_pair pair >"$W/table-$kind.out" 2>&1; then
		grep "pair ok" "$W/table-$kind.out"
	else
		cat "$W/table-$kind.out"
		fail "pair fails with a $kind host table"
	fi
	n=$(counter host_table_refused "$W/table-$kind.out")
	echo "$kind table: host_table_refused $n"
	[ "$n" -ge 1 ] || fail "the $kind host table was not refused"
	now=$(stat -c %i "$dir/host-v2" 2>/dev/null)
	[ "$now" != "$planted" ] || fail "the $kind host table is still there"
	[ "$(md5sum <"$target")" = "$before" ] ||
		fail "the symlink's target was written"
done

echo "=== 3. listeners that are not the peer they claim"
for kind in other-user wrong-pid unsealed bad-pool; do
	slot=1000
	port=$((29100 + slot))
	$T/samehost_impostor serve 29100 $port $kind $IMP_UID \
		>"$W/serve-$kind.out" 2>&1 &
	spid=$!
	PIDS+=($spid)
	wait_for "$W/serve-$kind.out" "^ready$" ||
		fail "serve $kind not ready: $(tr '\n' ' ' <"$W/serve-$kind.out")"
	extra=
	[ $kind = other-user ] && extra=$IMP_UID
	if ! $TO $T/samehost_pair probe $slot $extra >"$W/probe-$kind.out" 2>&1; then
		cat "$W/probe-$kind.out"
		fail "probe of a $kind impostor: the WRITE succeeded or the probe failed"
	fi
	kill -9 $spid 2>/dev/null
	wait $spid 2>/dev/null
	grep -E "probe|connect as" "$W/probe-$kind.out"
	cred=$(counter shm_cred_refused "$W/probe-$kind.out")
	arena=$(counter shm_arena_refused "$W/probe-$kind.out")
	echo "$kind: shm_cred_refused $cred shm_arena_refused $arena"
	case $kind in
	other-user)
		# one connection refused on accept, at least one on connect
		[ "$cred" -ge 2 ] || fail "other-user: cred refusals $cred < 2" ;;
	wrong-pid)
		[ "$cred" -ge 1 ] || fail "wrong-pid: not refused" ;;
	unsealed)
		[ "$arena" -ge 1 ] || fail "unsealed arena: not refused" ;;
	bad-pool)
		[ "$arena" -ge 1 ] || fail "unsealed pool: not refused" ;;
	esac
	grep -q "WRITE status success" "$W/probe-$kind.out" &&
		fail "$kind: the WRITE reached the impostor"
done

echo "=== 4. a name left by a killed process"
# every port but two held, so that the next processes get the dead one's
python3 - "$W/squat.out" <<'EOF' &
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
def tcp(p):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("::", p)); s.listen(1); return s
    except OSError:
        s.close(); return None
def udp_free(p):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    try:
        s.bind(("::", p)); return True
    except OSError:
        return False
    finally:
        s.close()
# the two ports left free are free for TCP and UDP, as a slot needs
free = []
held = []
for p in range(29100, 29100 + 1024):
    s = tcp(p)
    if s and len(free) < 2 and udp_free(p):
        s.close(); free.append(p)
    elif s:
        held.append(s)
open(sys.argv[1], "w").write("held %d free %s\n" % (len(held), free))
time.sleep(60)
EOF
PIDS+=($!)
sq=$!
wait_for "$W/squat.out" "^held" || fail "squatter not ready"
$T/samehost_pair hold >"$W/hold.out" 2>&1 &
hp=$!
PIDS+=($hp)
wait_for "$W/hold.out" "^held" || fail "hold: no QP"
port=$(sed -n 's/held //p' "$W/hold.out")
kill -9 $hp
wait $hp 2>/dev/null
name=$(find /dev/shm/softhca-0-*/net-$cookie -maxdepth 1 -name "$port" \
	2>/dev/null | head -1)
if [ -S "$name" ]; then
	echo "killed process left $name"
else
	fail "no name left by the killed process (port $port)"
fi
if $TO $T/samehost_pair pair >"$W/stale.out" 2>&1; then
	grep "pair ok" "$W/stale.out"
else
	cat "$W/stale.out"
	fail "pair fails after a killed process left its name"
fi
n=$(counter shm_stale_names "$W/stale.out")
echo "shm_stale_names $n"
[ "$n" -ge 1 ] || fail "the dead process's name was not reclaimed"
kill -9 $sq 2>/dev/null
wait $sq 2>/dev/null

echo "=== 5. no home directory, and the impostor made the fallback first"
userdel -r -f $NOHOME >/dev/null 2>&1
useradd -M -d /nonexistent -s /bin/sh $NOHOME || fail "useradd $NOHOME"
NH_UID=$(id -u $NOHOME)
as_nohome() { $TO runuser -u $NOHOME -- env LD_LIBRARY_PATH=$LD_LIBRARY_PATH \
	SOFTHCA_PORT_BASE=$SOFTHCA_PORT_BASE SOFTHCA_TOOL=$SOFTHCA_TOOL "$@"; }
runuser -u $IMP -- mkdir -m 777 /dev/shm/softhca-$NH_UID
as_nohome $T/samehost_pair pair >"$W/nohome.out" 2>&1
cat "$W/nohome.out"
grep -q "refusing /dev/shm/softhca-$NH_UID: owned by uid $IMP_UID" \
	"$W/nohome.out" || fail "the impostor's fallback directory was not refused"
grep -q "create_qp: Operation not permitted" "$W/nohome.out" ||
	fail "ibv_create_qp did not fail with EPERM"
rm -rf /dev/shm/softhca-$NH_UID
if as_nohome $T/samehost_pair pair >"$W/nohome2.out" 2>&1; then
	grep "pair ok" "$W/nohome2.out"
else
	cat "$W/nohome2.out"
	fail "$NOHOME's pair fails in its own fallback directory"
fi

if [ $FAILS -ne 0 ]; then
	echo "$FAILS failure(s)"
	exit 1
fi
echo "PASS"
