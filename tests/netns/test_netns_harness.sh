#!/bin/bash
# The namespace harness itself (tests/netns/lib.sh): three namespaces reach
# each other over IPv4 and IPv6 and nothing else, the root namespace gains
# no interface, address or route, a pulled link cuts one namespace off and
# plugging it back restores it, netem shows up in the namespace's qdiscs
# (skipped when the kernel has no netem), and teardown leaves no namespace
# and no process behind: called directly, after a subshell that fails
# mid-test, after a SIGKILL of the test, and when the watchdog fires.
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ping

# the root namespace as this test found it
root_state() {
	ip -o link | awk '{ print $1, $2 }'
	ip -o addr | awk '{ print $2, $3, $4 }'
	ip route show table all
	ip -6 route show table all
}

ping4() { netns_exec "$1" ping -n -c1 -W2 "$(netns_ip4 "$2")" >/dev/null 2>&1; }
ping6() { netns_exec "$1" ping -6 -n -c1 -W2 "$(netns_ip6 "$2")" >/dev/null 2>&1; }

# ns_of_run PREFIX: the namespaces of a run that still exist
ns_of_run() { ip netns list | awk -v p="$1-" 'index($1, p) == 1 { print $1 }'; }

# pids_gone PID...: none of them is alive (a zombie counts as gone)
pids_gone() {
	local p
	for p in "$@"; do
		[ -n "$(_netns_proc_start "$p")" ] && return 1
	done
	return 0
}

# watchdog_gone PREFIX: no process runs `lib.sh --watchdog ... PREFIX ...`
watchdog_gone() {
	local c
	for c in /proc/[0-9]*/cmdline; do
		tr '\0' ' ' <"$c" 2>/dev/null | grep -Eq -- "--watchdog [0-9]+ [0-9]+ [0-9]+ $1 " &&
			return 1
	done
	return 0
}

# run_gone NAME PREFIX PID...: the run PREFIX left no namespace, no
# watchdog and none of the PIDs behind (bounded wait: the watchdog polls
# once a second).
run_gone() {
	local name=$1 prefix=$2
	shift 2
	if _netns_wait 20 eval "[ -z \"\$(ns_of_run $prefix)\" ]"; then
		ok "$name: no namespace $prefix-* left"
	else
		fail "$name: namespaces left: $(ns_of_run "$prefix" | tr '\n' ' ')"
	fi
	if [ ! -e "/run/netns/$prefix-a" ] && [ ! -e "/run/netns/$prefix-br" ]; then
		ok "$name: no /run/netns/$prefix-* file left"
	else
		fail "$name: /run/netns/$prefix-* still there"
	fi
	if [ $# -gt 0 ]; then
		if _netns_wait 10 pids_gone "$@"; then
			ok "$name: the $# processes started in the namespaces are gone"
		else
			fail "$name: processes left: $(for p in "$@"; do
				tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null && echo "($p);"; done)"
		fi
	fi
	if _netns_wait 10 watchdog_gone "$prefix"; then
		ok "$name: the watchdog of $prefix is gone"
	else
		fail "$name: the watchdog of $prefix is still running"
	fi
}

# child_of PID: the (first) child process of PID
child_of() {
	local parent=$1 st s
	for st in /proc/[0-9]*/stat; do
		s=$(cat "$st" 2>/dev/null) || continue
		s=${s##*) }
		# shellcheck disable=SC2086  # the fields: state ppid ...
		set -- $s
		if [ "$2" = "$parent" ]; then
			st=${st#/proc/}
			echo "${st%/stat}"
			return 0
		fi
	done
	return 1
}

# wait_ns_pids NS N: until N processes run in NS (bounded), then print them
wait_ns_pids() {
	local full
	full=$(netns_name "$1") || return 1
	_netns_wait 10 eval "[ \"\$(ip netns pids $full | wc -l)\" -ge $2 ]"
	ip netns pids "$full"
}

before=$(root_state)
netns_before=$(ip netns list | awk '{ print $1 }' | sort)

# --- setup --------------------------------------------------------------
netns_setup 3 || { fail "netns_setup 3"; finish; }
ok "netns_setup 3: ${NETNS_HOSTS[*]} and $NETNS_BR (10.231.$NETNS_X.0/24, fd00:5348:$NETNS_X::/64)"
run=$NETNS_RUN

# (other runs may come and go meanwhile: only this run's names count)
new=$(comm -13 <(echo "$netns_before") <(ns_of_run "$run" | sort) | tr '\n' ' ')
check "4 new namespaces, expected $run-{a,b,br,c}: $new" \
	[ "$new" = "$run-a $run-b $run-br $run-c " ]

after=$(root_state)
if [ "$before" = "$after" ]; then
	ok "the root namespace has no new interface, address or route"
else
	fail "the root namespace changed:"
	diff <(echo "$before") <(echo "$after") | sed 's/^/    /' >&2
fi

for h in a b c; do
	out=$(netns_exec "$h" ip -o addr show dev "$NETNS_IF")
	check "$h: $NETNS_IF has $(netns_ip4 "$h")/24" grep -q "inet $(netns_ip4 "$h")/24 " <<<"$out"
	check "$h: $NETNS_IF has $(netns_ip6 "$h")/64" grep -q "inet6 $(netns_ip6 "$h")/64 " <<<"$out"
	out=$(netns_exec "$h" ip -o link show lo)
	check "$h: lo is up" grep -q '<LOOPBACK,UP' <<<"$out"
	# nothing but the private subnets: no way out of the namespaces
	out=$(netns_exec "$h" ip route show default; netns_exec "$h" ip -6 route show default)
	check "$h: no default route" [ -z "$out" ]
done

# --- every namespace reaches every other, IPv4 and IPv6 -------------------
for s in a b c; do
	for d in a b c; do
		[ "$s" = "$d" ] && continue
		check "ping $s -> $d $(netns_ip4 "$d")" ping4 "$s" "$d"
		check "ping -6 $s -> $d $(netns_ip6 "$d")" ping6 "$s" "$d"
	done
done

# --- netns_exec is bounded, netns_pair runs and keeps outputs -------------
NETNS_EXEC_TIMEOUT=1 netns_exec a sleep 30
rc=$?
check "netns_exec is bounded by NETNS_EXEC_TIMEOUT: exit $rc (timeout)" [ "$rc" = 124 ]
check "netns_pair a b: both exit 0" \
	netns_pair a b 20 ip -o -4 addr show dev "$NETNS_IF" -- ip -o -4 addr show dev "$NETNS_IF"
check "netns_pair: the server's output, from a" grep -q "inet $(netns_ip4 a)/" "$NETNS_PAIR_SERVER_OUT"
check "netns_pair: the client's output, from b" grep -q "inet $(netns_ip4 b)/" "$NETNS_PAIR_CLIENT_OUT"
NETNS_PAIR_QUIET=1 netns_pair a b 20 true -- sh -c 'exit 3'
rc=$?
pair_failed() { [ "$rc" = 1 ] && [ "$NETNS_PAIR_SERVER_RC" = 0 ] && [ "$NETNS_PAIR_CLIENT_RC" = 3 ]; }
check "netns_pair: a failing client fails the pair (exit $rc; server $NETNS_PAIR_SERVER_RC, client $NETNS_PAIR_CLIENT_RC)" \
	pair_failed

# --- a pulled link cuts c off, plugging it back restores it ---------------
check "netns_link_down c" netns_link_down c
out=$(netns_exec c ip link show "$NETNS_IF")
check "link down: c's $NETNS_IF has no carrier" grep -q 'NO-CARRIER' <<<"$out"
check_not "link down: a -/-> c (IPv4)" ping4 a c
check_not "link down: a -/-> c (IPv6)" ping6 a c
check_not "link down: c -/-> b (IPv4)" ping4 c b
check "link down: a -> b still (IPv4)" ping4 a b
check "link down: b -> a still (IPv6)" ping6 b a
check "netns_link_up c" netns_link_up c
check "link up: a -> c (IPv4)" ping4 a c
check "link up: a -> c (IPv6)" ping6 a c
check "link up: c -> b (IPv4)" ping4 c b

# --- netem (no timing: just that the qdisc is in place) -----------------
netns_netem b "delay 5ms loss 1%"
rc=$?
if [ "$rc" = 77 ]; then
	if [ -n "${NETNS_REQUIRE_NETEM:-}" ]; then
		fail "netem is unavailable and NETNS_REQUIRE_NETEM is set"
	else
		echo "skip: netem: the kernel has no netem qdisc; the fault tests that need it will skip"
	fi
elif [ "$rc" = 0 ]; then
	qd=$(netns_exec b tc qdisc show dev "$NETNS_IF")
	check "netem: b's qdiscs list it: $qd" grep -Eq 'netem.*delay 5ms.*loss 1%' <<<"$qd"
	netns_netem_clear b
	qd=$(netns_exec b tc qdisc show dev "$NETNS_IF")
	check_not "netns_netem_clear b removes it" grep -q netem <<<"$qd"
else
	fail "netns_netem b: exit $rc"
fi

# --- teardown: no namespace, no process behind ----------------------------
for h in a b c "$NETNS_BR"; do
	# (the shell that says "Terminated" when they go is this subshell)
	(netns_exec "$h" sleep 600) 2>/dev/null &
done
sleepers=()
for h in a b c "$NETNS_BR"; do
	mapfile -t -O "${#sleepers[@]}" sleepers < <(wait_ns_pids "$h" 1)
done
check "a process in each of the 4 namespaces: ${sleepers[*]}" [ "${#sleepers[@]}" = 4 ]
check "netns_teardown" netns_teardown
run_gone teardown "$run" "${sleepers[@]}"
check "netns_teardown again: nothing to do, exit 0" netns_teardown
# the background `timeout`s end with their sleepers
no_jobs() { [ -z "$(jobs -pr)" ]; }
check "the background jobs ended" _netns_wait 10 no_jobs
wait
check "the root namespace is as it was" [ "$before" = "$(root_state)" ]

# --- a subshell that fails mid-test --------------------------------------
(
	netns_setup 2 || exit 2
	echo "$NETNS_RUN" >"$NETNS_T/sub.run"
	(netns_exec a sleep 600) 2>/dev/null &
	(netns_exec b sleep 600) 2>/dev/null &
	{ wait_ns_pids a 1; wait_ns_pids b 1; } >"$NETNS_T/sub.pids"
	exit 1                  # the failure, with everything running
)
rc=$?
check "failing subshell: exit $rc, expected 1" [ "$rc" = 1 ]
sub=$(cat "$NETNS_T/sub.run" 2>/dev/null)
mapfile -t subpids <"$NETNS_T/sub.pids"
if [ -n "$sub" ] && [ "${#subpids[@]}" = 2 ]; then
	ok "failing subshell ran $sub with processes ${subpids[*]}"
	run_gone "failing subshell" "$sub" "${subpids[@]}"
else
	fail "failing subshell: run '$sub', processes '${subpids[*]}'"
fi

# --- a test killed with SIGKILL: the watchdog cleans up -------------------
# As under ctest after a timeout: the test's stderr is a pipe whose reader
# is gone too (the watchdog's message must not kill the watchdog).
cat >"$NETNS_T/child.sh" <<'EOF'
. "$1"
netns_setup 2 || exit 2
echo "$NETNS_T" >"$2.tmp"
echo "$NETNS_RUN" >"$2.run"
(netns_exec a sleep 600) 2>/dev/null &
NETNS_EXEC_TIMEOUT=600 netns_exec b sleep 600
echo "the test survived" >&2
EOF
mkfifo "$NETNS_T/kill.fifo"
timeout 120 cat "$NETNS_T/kill.fifo" >"$NETNS_T/kill.err" &
reader=$!
NETNS_WATCHDOG=300 timeout -k 5 120 bash "$NETNS_T/child.sh" "$NETNS_LIB" "$NETNS_T/kill" \
	2>"$NETNS_T/kill.fifo" &
child=$!
_netns_wait 20 test -s "$NETNS_T/kill.run"
krun=$(cat "$NETNS_T/kill.run" 2>/dev/null)
if [ -n "$krun" ]; then
	NETNS_CLEANUP+=("_netns_destroy $krun")      # should the watchdog fail
	kpids=()
	for h in a b; do
		_netns_wait 10 eval "[ -n \"\$(ip netns pids $krun-$h)\" ]"
		mapfile -t -O "${#kpids[@]}" kpids < <(ip netns pids "$krun-$h")
	done
	# the test's shell is the parent of the `timeout`s; kill it alone
	kpid=$(child_of "$child")
	ok "SIGKILL: test $kpid runs $krun, processes ${kpids[*]}"
	kill "$reader"
	wait "$reader" 2>/dev/null
	kill -KILL "$kpid"
	wait "$child" 2>/dev/null
	run_gone "SIGKILL" "$krun" "${kpids[@]}"
	ktmp=$(cat "$NETNS_T/kill.tmp")
	check "SIGKILL: the test's temporary directory is gone" \
		_netns_wait 10 test ! -e "$ktmp"
else
	fail "SIGKILL: the child test did not set up"
	kill "$child" "$reader" 2>/dev/null
	wait "$child" "$reader" 2>/dev/null
fi

# --- the watchdog ends a hung test and its namespaces ---------------------
NETNS_WATCHDOG=3 NETNS_EXEC_TIMEOUT=100 timeout -k 5 90 \
	bash "$NETNS_T/child.sh" "$NETNS_LIB" "$NETNS_T/hang" >"$NETNS_T/hang.out" 2>&1
rc=$?
hrun=$(cat "$NETNS_T/hang.run" 2>/dev/null)
[ -n "$hrun" ] && NETNS_CLEANUP+=("_netns_destroy $hrun")
if [ "$rc" = 143 ] && grep -q 'netns watchdog: test .* still running' "$NETNS_T/hang.out" &&
	! grep -q survived "$NETNS_T/hang.out"; then
	ok "watchdog: the hung test was ended (exit 143)"
else
	fail "watchdog: the hung test ended with exit $rc:"
	sed 's/^/    /' "$NETNS_T/hang.out" >&2
fi
if [ -n "$hrun" ]; then
	run_gone "watchdog" "$hrun"
	htmp=$(cat "$NETNS_T/hang.tmp")
	check "watchdog: the test's temporary directory is gone" \
		_netns_wait 10 test ! -e "$htmp"
fi

check "the root namespace is as it was at the start" [ "$before" = "$(root_state)" ]
finish
