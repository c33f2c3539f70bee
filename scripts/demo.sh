#!/bin/bash
# Show softhca at work: unmodified Debian RDMA programs on a device that
# has no hardware behind it.
#
#   scripts/demo.sh BUILD_DIR        (`make demo` builds first, then runs this)
#
# It shows the device list and ibv_devinfo, then a real RC ping-pong
# (Debian's ibv_rc_pingpong) between two processes on softhca_lo.
set -uo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
lib=$build/lib
tool=$build/bin/softhca
[ -e "$lib/libibverbs.so.1" ] && [ -x "$tool" ] ||
	{ echo "demo: build first (make)" >&2; exit 2; }
unset LD_LIBRARY_PATH LD_PRELOAD

if [ -t 1 ]; then B=$'\e[1m' D=$'\e[2m' N=$'\e[0m'; else B='' D='' N=''; fi
step() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }
say() { printf '%s\n' "$@" | fold -s -w 76 | sed 's/^/   /'; }
cmd() { printf '%s$ %s%s\n' "$D" "$*" "$N"; }
indent() { sed 's/^/   /'; }

cat <<INTRO
${B}softhca${N}: a host channel adapter in software.  Its libibverbs.so.1 is a
drop-in for rdma-core 44's: programs built against Debian's rdma-core get an
RDMA device with no RDMA hardware, no kernel module, no root and no daemon,
through LD_LIBRARY_PATH or \`softhca run -- PROGRAM\`.
Libraries: $lib
INTRO

step "1. Debian's ibv_devices with Debian's own libibverbs"
say "Without softhca, this machine's rdma-core looks for kernel RDMA devices" \
	"(rdma_rxe, siw, a NIC):"
cmd ibv_devices
timeout 20 ibv_devices 2>&1 | indent

step "2. The same binary, unmodified, on softhca"
say "One device per network interface with an IP address, loopback included:"
cmd "LD_LIBRARY_PATH=$lib ibv_devices"
LD_LIBRARY_PATH=$lib timeout 20 ibv_devices 2>&1 | indent
[ "${PIPESTATUS[0]}" = 0 ] || { echo "demo: ibv_devices failed on softhca" >&2; exit 1; }

step "3. softhca devices: ports and GID tables"
say "Each device has one RoCE v2 style port (link layer Ethernet); its GID" \
	"table holds the interface's addresses."
cmd "softhca devices"
timeout 20 "$tool" devices 2>&1 | indent

step "4. Debian's ibv_devinfo -v on softhca_lo"
say "Everything ibv_query_device_ex, ibv_query_port and ibv_query_gid_type" \
	"report: limits, capabilities, port state, GIDs.  softhca says what it" \
	"really supports: no ODP, no device memory, no memory windows, no tag" \
	"matching (their counts are 0)."
cmd "softhca run -- ibv_devinfo -v -d softhca_lo"
timeout 20 "$tool" run -- ibv_devinfo -v -d softhca_lo 2>&1 | indent

step "5. An RC ping-pong between two processes (ibv_rc_pingpong)"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 18515)
out=$(mktemp -d "${TMPDIR:-/tmp}/softhca-demo.XXXXXX")
trap 'rm -rf "$out"' EXIT
cmd "softhca run -- ibv_rc_pingpong -d softhca_lo -g 0 -p $port &"
cmd "softhca run -- ibv_rc_pingpong -d softhca_lo -g 0 -p $port 127.0.0.1"
# stdbuf: keep the clients' output even if timeout has to stop them
timeout 10 stdbuf -oL "$tool" run -- ibv_rc_pingpong -d softhca_lo -g 0 -p "$port" \
	>"$out/server" 2>&1 &
server=$!
sleep 0.5
timeout 10 stdbuf -oL "$tool" run -- ibv_rc_pingpong -d softhca_lo -g 0 -p "$port" 127.0.0.1 \
	>"$out/client" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
if [ "$client_rc" = 0 ] && [ "$server_rc" = 0 ]; then
	echo "   server:"; indent <"$out/server" | indent
	echo "   client:"; indent <"$out/client" | indent
	say "" "Data moved between two processes through softhca's RC transport."
else
	for side in server client; do
		rc=$server_rc
		[ $side = client ] && rc=$client_rc
		echo "   $side ($( [ "$rc" = 124 ] && echo "stopped after 10 s" ||
			echo "exit status $rc")):"
		head -4 "$out/$side" | indent | indent
	done
	say "" "The ping-pong failed: the output of both sides is above." \
		"Please report it, with SOFTHCA_LOG=debug output if you can."
fi

step "Try it"
say "Any verbs program:   $tool run -- PROGRAM [ARGS]" \
	"or:                  LD_LIBRARY_PATH=$lib PROGRAM [ARGS]" \
	"All the tests:       make check"
