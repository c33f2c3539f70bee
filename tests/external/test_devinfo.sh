#!/bin/bash
# Debian's ibv_devices and ibv_devinfo (ibverbs-utils), unmodified, list
# softhca's devices: softhca_lo at least, every port PORT_ACTIVE with a
# RoCE v2 GID table, and ld.so has nothing to say about our exports.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ibv_devices ibv_devinfo

# --- ibv_devices
run devices 20 ibv_devices
expect_rc devices 0
no_loader_errors devices
expect_out devices '^[[:space:]]+softhca_lo[[:space:]]+[0-9a-f]{16}$'
devs=$(awk 'NR > 2 {print $1}' "$T/devices.out")
[ -n "$devs" ] || fail "ibv_devices lists no device"
for d in $devs; do
	case "$d" in
	softhca_*) ok "device name $d" ;;
	*) fail "ibv_devices lists '$d', not a softhca device: is the system libibverbs loaded?" ;;
	esac
done

# --- ibv_devinfo -l: the same set of devices
run list 20 ibv_devinfo -l
expect_rc list 0
no_loader_errors list
expect_out list "^$(echo "$devs" | wc -w) HCAs? found:"
listed=$(awk 'NR > 1 && NF {print $1}' "$T/list.out" | sort)
[ "$listed" = "$(echo "$devs" | tr ' ' '\n' | sort)" ] &&
	ok "ibv_devinfo -l agrees with ibv_devices" ||
	fail "ibv_devinfo -l lists '$listed', ibv_devices '$devs'"

# --- ibv_devinfo -v: every device, every port active, with GIDs
run devinfo 30 ibv_devinfo -v
expect_rc devinfo 0
no_loader_errors devinfo
expect_out devinfo '^hca_id:[[:space:]]+softhca_lo$'
# loopback's GID table holds 127.0.0.1 (IPv4-mapped), RoCE v2
expect_out devinfo 'GID\[ *0\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2'
awk '
	/^hca_id:/      { dev = $2; ndev++; ports[dev] = 0; active[dev] = 0; gids[dev] = 0 }
	/^[[:space:]]+port:/ { ports[dev]++ }
	/state:[[:space:]]+PORT_ACTIVE/ { active[dev]++ }
	/link_layer:[[:space:]]+Ethernet/ { eth[dev]++ }
	/GID\[ *[0-9]+\]:.*RoCE v2/ { gids[dev]++ }
	END {
		for (d in ports) {
			printf "%s ports=%d active=%d eth=%d gids=%d\n", d, ports[d], active[d], eth[d], gids[d]
			if (ports[d] < 1 || active[d] != ports[d] || eth[d] != ports[d] || gids[d] < 1) bad = 1
		}
		exit bad
	}' "$T/devinfo.out" >"$T/ports.txt" &&
	ok "every port of every device is PORT_ACTIVE, Ethernet, with RoCE v2 GIDs" ||
	{ fail "a port is not active or has no GID:"; sed 's/^/    /' "$T/ports.txt" >&2; }
for f in vendor_id node_guid sys_image_guid max_qp max_cqe max_mr_size \
	phys_port_cnt active_mtu max_msg_sz gid_tbl_len num_comp_vectors; do
	expect_out devinfo "^[[:space:]]+$f:"
done
# non-zero identity, as test_device.py asserts too
expect_out devinfo 'node_guid:[[:space:]]+[0-9a-f:]*[1-9a-f]'
expect_out devinfo 'vendor_id:[[:space:]]+0x0*[1-9a-f]'

# --- one device, one port
run one 20 ibv_devinfo -d softhca_lo -i 1
expect_rc one 0
no_loader_errors one
expect_out one 'state:[[:space:]]+PORT_ACTIVE \(4\)'
expect_out one 'active_mtu:[[:space:]]+4096 \(5\)'

# --- a device that does not exist is an error, not a crash
run nodev 20 ibv_devinfo -d softhca_no_such_device
expect_rc nodev nonzero
no_loader_errors nodev

finish
