#!/bin/bash
# Every Debian client binary that links libibverbs or librdmacm
# (ibverbs-utils, rdmacm-utils, perftest) loads with softhca's libibverbs:
#
#  1. `ldd -r` resolves libibverbs.so.1 to $SOFTHCA_BUILD/lib and finds every
#     symbol@version the binary and its libraries (libmlx5, libefa,
#     librdmacm) import;
#  2. the binary starts (`--help`, LD_BIND_NOW=1 so that every import is
#     bound at start) and ld.so prints no "no version information",
#     "symbol lookup error" or "version `IBVERBS_...' not found".
#
# librdmacm.so.1 is taken from $SOFTHCA_BUILD/lib once it is built; until
# then Debian's librdmacm loads, which itself loads our libibverbs and so
# still checks our exports.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"

# The binaries the brief names; others found in the packages are added.
REQUIRED="ibv_devices ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong
	ibv_ud_pingpong ibv_srq_pingpong ibv_xsrq_pingpong ibv_asyncwatch
	ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat
	ib_atomic_bw ib_atomic_lat
	rping udaddy mckey ucmatose cmtime rdma_server rdma_client
	rdma_xserver rdma_xclient rstream riostream rcopy udpong"

bins=""
for b in $REQUIRED; do
	p=$(command -v "$b") || skip "$b is not installed (scripts/install-deps.sh)"
	bins="$bins $p"
done
if command -v dpkg-query >/dev/null 2>&1; then
	for p in $(dpkg-query -L ibverbs-utils rdmacm-utils perftest 2>/dev/null |
		   grep -E '^/usr/s?bin/'); do
		case " $bins " in *" $p "*) continue ;; esac
		bins="$bins $p"
	done
fi

if [ -e "$LIB/librdmacm.so.1" ]; then
	rdmacm_from=$LIB/librdmacm.so.1
else
	rdmacm_from=system
fi
echo "librdmacm.so.1: ${rdmacm_from} (softhca's is not built yet when 'system')"

n=0
for p in $bins; do
	[ -f "$p" ] && [ -x "$p" ] || continue
	# ELF executables only (perftest ships shell scripts too) ...
	[ "$(head -c 4 "$p" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
	# ... that link the RDMA libraries.
	needed=$(readelf -d "$p" 2>/dev/null | grep -Eo '\[lib(ibverbs|rdmacm)\.so\.1\]')
	[ -n "$needed" ] || continue
	name=$(basename "$p")
	n=$((n + 1))

	# 1. static view: ldd -r performs every relocation without running
	run "$name.ldd" 30 ldd -r "$p"
	cat "$T/$name.ldd.err" >>"$T/$name.ldd.out"
	grep -Eq "libibverbs\.so\.1 => $LIB/libibverbs\.so\.1 " "$T/$name.ldd.out" &&
		ok "$name: libibverbs.so.1 from $LIB" ||
		{ fail "$name: libibverbs.so.1 does not resolve to $LIB"; show "$name.ldd"; }
	if [ "$rdmacm_from" != system ] && grep -q librdmacm "$T/$name.ldd.out"; then
		grep -Eq "librdmacm\.so\.1 => $LIB/librdmacm\.so\.1 " "$T/$name.ldd.out" &&
			ok "$name: librdmacm.so.1 from $LIB" ||
			fail "$name: librdmacm.so.1 does not resolve to $LIB"
	fi
	if grep -Eq -- "$LOADER_ERRORS|not found" "$T/$name.ldd.out"; then
		fail "$name: ldd -r reports unresolved imports:"
		grep -E -- "$LOADER_ERRORS|not found" "$T/$name.ldd.out" | head -5 |
			sed 's/^/    /' >&2
	else
		ok "$name: ldd -r clean"
	fi

	# 2. start it: usage text, all imports bound at start
	LD_BIND_NOW=1 run "$name.start" 10 "$p" --help
	no_loader_errors "$name.start"
	case "$rc" in
	124|137) fail "$name --help did not exit within 10 s" ;;
	129|13[0-9]|1[4-5][0-9]) fail "$name --help died of signal $((rc - 128))"
		show "$name.start" ;;
	*) ok "$name --help exit $rc" ;;
	esac
done

[ "$n" -ge 29 ] && ok "$n client binaries checked" ||
	fail "only $n client binaries found (expected 29 or more)"
echo "checked $n client binaries"
finish
