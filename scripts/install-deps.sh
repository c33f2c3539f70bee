#!/bin/bash
# Install the Debian 12 packages that building and testing softhca need.
#
#   scripts/install-deps.sh        (run by `make deps`, `make check`, `make demo`)
#
# Idempotent: silent and exit 0 when everything is present.  As root it runs
# `apt-get update` once and installs what is missing, non-interactively.
# Without root it prints the exact command to run and exits 1.
# SOFTHCA_SKIP_DEPS=1 skips the check (for builds on other distributions,
# with the same tools installed by hand).
set -euo pipefail

# Package                why
PACKAGES=(
	cmake            # build system
	make
	gcc
	libc6-dev        # C headers and crt files (gcc alone does not pull them)
	pkg-config
	binutils         # readelf: tests/abi/check_exports.sh
	libibverbs-dev   # <infiniband/verbs.h>: the API definition
	librdmacm-dev    # <rdma/rdma_cma.h>, <rdma/rdma_verbs.h>
	ibverbs-utils    # external clients: ibv_devices, ibv_devinfo, ibv_*_pingpong
	rdmacm-utils     # external clients: rping, udaddy, ucmatose, ...
	perftest         # external clients: ib_write_bw, ib_send_lat, ...
	qperf            # bench/netns.sh: TCP bandwidth and latency on the same veth path
	ibverbs-providers # libmlx5.so.1/libefa.so.1, loaded by perftest and pyverbs
	rdma-core        # ships the pyverbs test suite (/usr/share/doc/rdma-core/tests)
	python3          # /usr/bin/python3 runs pyverbs and the suite runner
	python3-pyverbs  # the pyverbs bindings the suite drives
	iproute2         # `ip -j addr`, used by the pyverbs suite
	libfabric-bin    # external clients: fi_info, fi_pingpong (verbs provider)
	ucx-utils        # middleware: ucx_info, ucx_perftest (UCX over rc_verbs/ud_verbs)
	libucx0          # UCX's libraries (its verbs transports load softhca)
	openmpi-bin      # middleware: mpirun, Open MPI's pml ucx and mtl ofi
	libopenmpi-dev   # mpicc.openmpi: builds tests/middleware's MPI program
	mpich            # middleware: mpiexec.mpich (Debian's MPICH is ch4:ucx)
	libmpich-dev     # mpicc.mpich
	iperf3           # rsockets: librspreload under an unmodified TCP program
	netcat-openbsd   # rsockets: nc under librspreload
	netcat-traditional # rsockets: nc.traditional -l accepts with accept(), which
	                 # librspreload interposes (openbsd nc -l uses accept4)
	tshark           # tests/unit/test_wire_pcap.c: Wireshark's InfiniBand dissector
	iputils-ping     # tests/netns: reachability between the namespaces
	strace           # tests/security/flood_cm.c: counts a paused listener's accept4 calls
	                 # and tests/external/test_syscalls.sh: no call per work request
	gdb              # tests/lib/crash.c: every stack of a case that timed out
	clang            # make fuzz: the libFuzzer build of tests/fuzz
	libclang-rt-14-dev # libFuzzer and sanitizer runtimes for clang 14
)

if [ "${SOFTHCA_SKIP_DEPS:-0}" = 1 ]; then
	exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "install-deps: not a Debian system (no dpkg-query); make sure the" \
		"equivalents of these are installed:" >&2
	echo "  ${PACKAGES[*]}" >&2
	echo "install-deps: continuing (set SOFTHCA_SKIP_DEPS=1 to silence this)" >&2
	exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
	case "$status" in
	ii*) ;;
	*) missing+=("$pkg") ;;
	esac
done

# rdma-core ships the pyverbs suite under /usr/share/doc, which slim
# container images tell dpkg not to install (path-exclude=/usr/share/doc/*).
SUITE=/usr/share/doc/rdma-core/tests
suite_missing=0
case " ${missing[*]} " in
*" rdma-core "*) ;;
*) [ -e "$SUITE/run_tests.py" ] || suite_missing=1 ;;
esac
SUITE_FIX=(install --reinstall --no-install-recommends
	-o "Dpkg::Options::=--path-include=$SUITE/*" rdma-core)

[ ${#missing[@]} -eq 0 ] && [ $suite_missing = 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	if [ ${#missing[@]} -ne 0 ]; then
		echo "install-deps: missing Debian packages: ${missing[*]}" >&2
		echo "install-deps: install them with:" >&2
		echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
	fi
	if [ $suite_missing = 1 ]; then
		echo "install-deps: rdma-core is installed without its test suite" \
			"($SUITE; dpkg path-exclude?); restore it with:" >&2
		echo "  sudo apt-get -y ${SUITE_FIX[*]}" >&2
	fi
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
if [ ${#missing[@]} -ne 0 ]; then
	echo "install-deps: installing ${missing[*]}"
	apt-get "${apt_opts[@]}" update </dev/null
	apt-get "${apt_opts[@]}" install --no-install-recommends "${missing[@]}" </dev/null
	updated=1
fi
if [ ! -e "$SUITE/run_tests.py" ]; then
	echo "install-deps: restoring rdma-core's test suite ($SUITE)"
	[ -n "${updated:-}" ] || apt-get "${apt_opts[@]}" update </dev/null
	apt-get "${apt_opts[@]}" "${SUITE_FIX[@]}" </dev/null
	if [ ! -e "$SUITE/run_tests.py" ]; then
		echo "install-deps: $SUITE is still missing" >&2
		exit 1
	fi
fi

# Check again: apt-get can succeed and still leave a package unconfigured.
still=()
for pkg in "${missing[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
	case "$status" in
	ii*) ;;
	*) still+=("$pkg") ;;
	esac
done
if [ ${#still[@]} -ne 0 ]; then
	echo "install-deps: still missing after apt-get: ${still[*]}" >&2
	exit 1
fi
echo "install-deps: done"
