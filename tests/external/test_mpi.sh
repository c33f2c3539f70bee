#!/bin/bash
# MPI over softhca, run as a user would (`softhca run mpirun ...`):
# Debian's Open MPI with pml ucx, Debian's MPICH (ch4:ucx) and Open MPI
# with pml cm and mtl ofi over libfabric's verbs;ofi_rxm, each with 2
# and 4 ranks on this host, run tests/external/mpi_check.c: a ping-pong
# of checked messages 0 B-4 MiB, allreduce, alltoall, MPI_Put/MPI_Get
# with checked results.  The traffic is shown to go over softhca twice:
# UCX says which transport and device it chose (UCX_LOG_LEVEL=info,
# "ep_cfg ... rc_verbs/softhca_..."), and while the ranks wait at the
# end (MPI_CHECK_HOLD) `softhca stat` must show each rank's QPs with
# packets sent and received.
#
# The ranks reach each other only through softhca: UCX_TLS names the
# verbs transports (and self), MPICH is told not to use its own shared
# memory (MPIR_CVAR_NOLOCAL=1), Open MPI's cm/ofi run names
# FI_PROVIDER=verbs;ofi_rxm.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ibv_devices

RUN=("$TOOL" run)
SRC=$(dirname "$0")/mpi_check.c
OMPI_ROOT=()
[ "$(id -u)" = 0 ] && OMPI_ROOT=(--allow-run-as-root)

# build NAME MPICC: mpi_check with that MPI's compiler wrapper
build() {
	if ! command -v "$2" >/dev/null 2>&1; then
		echo "SKIP: $2 is not installed: its runs are skipped"
		return 1
	fi
	if "$2" -O2 -o "$T/$1" "$SRC" 2>"$T/$1.build"; then
		return 0
	fi
	fail "$2 could not build mpi_check.c"
	sed 's/^/    /' "$T/$1.build" >&2
	return 1
}

# mpi NAME NRANKS LAUNCHER...: run the launcher (which runs mpi_check)
# under softhca run with MPI_CHECK_HOLD; check its output, the transport
# UCX chose (when UCX is in the path: WANT_UCX=1) and the counters
mpi() {
	local name=$1 n=$2 hold=$T/$1.hold pid i ready pids=() p
	shift 2
	mkdir -p "$hold"
	MPI_CHECK_HOLD=$hold UCX_LOG_LEVEL=info \
		timeout -k 5 240 "${RUN[@]}" "$@" \
		</dev/null >"$T/$name.out" 2>"$T/$name.err" &
	pid=$!
	# every rank says it is ready (or the job ended early)
	for i in $(seq 1 1200); do
		ready=$(find "$hold" -name 'ready.*' | wc -l)
		[ "$ready" -ge "$n" ] && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ "$ready" -ge "$n" ]; then
		for f in "$hold"/ready.*; do pids+=("$(cat "$f")"); done
		"$TOOL" stat >"$T/$name.stat" 2>&1
		for p in "${pids[@]}"; do
			# a QP of this rank that sent and received packets
			if awk -v p="$p" '$1 == "pid" && $2 == p && / qp 0x/ {
				s = r = 0
				for (i = 1; i < NF; i++) {
					if ($i == "sent_pkts") s = $(i + 1)
					if ($i == "rcvd_pkts") r = $(i + 1)
				}
				if (s > 0 && r > 0) found = 1
			} END { exit !found }' "$T/$name.stat"; then
				ok "$name: rank pid $p: softhca counters moved"
			else
				fail "$name: rank pid $p has no softhca QP that" \
					"sent and received packets"
				grep "pid $p " "$T/$name.stat" | head -5 |
					sed 's/^/    /' >&2
			fi
		done
	else
		fail "$name: $ready of $n ranks got to the end"
	fi
	touch "$hold/go"
	wait "$pid"
	rc=$?
	expect_rc "$name" 0
	no_loader_errors "$name"
	expect_out "$name" "^mpi_check: ok: $n ranks"
	if [ "${WANT_UCX:-1}" = 1 ]; then
		if grep -Eq 'ep_cfg.*(rc|ud)_verbs/softhca_[^ ]*:1' \
			"$T/$name.err" "$T/$name.out" &&
		   ! grep -Eq 'ep_cfg.*(tcp|posix|sysv|cma|knem|xpmem)/' \
			"$T/$name.err" "$T/$name.out"; then
			ok "$name: UCX chose softhca"
		else
			fail "$name: UCX did not say it chose a softhca device"
			grep -h 'ep_cfg' "$T/$name.err" "$T/$name.out" |
				head -4 | sed 's/^/    /' >&2
		fi
	fi
}

if build ompi mpicc.openmpi && command -v mpirun.openmpi >/dev/null; then
	OMPI=(mpirun.openmpi "${OMPI_ROOT[@]}" --oversubscribe
	      --mca btl self --mca pml ucx --mca osc ucx)
	for n in 2 4; do
		mpi "ompi-ucx-rc-$n" "$n" env UCX_TLS=rc_verbs,ud_verbs,self \
			"${OMPI[@]}" -np "$n" -x UCX_TLS -x UCX_LOG_LEVEL \
			-x MPI_CHECK_HOLD "$T/ompi"
	done
	mpi "ompi-ucx-ud-2" 2 env UCX_TLS=ud_verbs,self \
		"${OMPI[@]}" -np 2 -x UCX_TLS -x UCX_LOG_LEVEL \
		-x MPI_CHECK_HOLD "$T/ompi"
	if command -v fi_info >/dev/null; then
		for n in 2 4; do
			WANT_UCX=0 mpi "ompi-ofi-rxm-$n" "$n" \
				env FI_PROVIDER='verbs;ofi_rxm' \
				mpirun.openmpi "${OMPI_ROOT[@]}" --oversubscribe \
				--mca pml cm --mca mtl ofi --mca btl self \
				--mca osc pt2pt -np "$n" \
				-x FI_PROVIDER -x MPI_CHECK_HOLD "$T/ompi"
		done
	fi
fi

if build mpich mpicc.mpich && command -v mpiexec.mpich >/dev/null; then
	for n in 2 4; do
		mpi "mpich-ucx-rc-$n" "$n" mpiexec.mpich -n "$n" \
			-genv UCX_TLS rc_verbs,ud_verbs,self \
			-genv UCX_LOG_LEVEL info -genv MPIR_CVAR_NOLOCAL 1 \
			-genv MPI_CHECK_HOLD "$T/mpich-ucx-rc-$n.hold" \
			"$T/mpich"
	done
fi
[ "$checks" -gt 0 ] || [ "$failures" -gt 0 ] ||
	skip "neither Open MPI nor MPICH is installed (scripts/install-deps.sh)"
finish
