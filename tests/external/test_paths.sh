#!/bin/bash
# Discovery by path (docs/discovery.md): under the path shim
# (libsofthca_path.so, which `softhca run` preloads), programs that look
# for RDMA devices in the file system find softhca's, and what they read
# there is what the verbs say.  The oracles are Debian's ibv_devices and
# ibv_devinfo -v (through softhca's libibverbs), the device's dev_name as
# libibverbs hands it out (ctypes), and the interfaces themselves:
#  - /dev/infiniband/<dev_name> of every device is a character device,
#    readable and writable (stat, access: what UCX checks), that nobody can
#    open (ENXIO: no driver behind it);
#  - ls /sys/class/infiniband is the device list; node_guid,
#    sys_image_guid, GIDs, port state, phys_state and link_layer equal
#    ibv_devinfo's; gid_attrs/types and ndevs name RoCE v2 and the
#    interface; device/net/ lists the interface (pyverbs' lookup);
#    infiniband_verbs/<dev_name>/{ibdev,dev} match the device and the node;
#  - ibv_read_sysfs_file (libibverbs) reads the same, with and without it;
#  - a name that is not there is ENOENT, a write EACCES;
#  - other paths are untouched, and without the shim none of this exists;
#  - UCX (ucx_info -d) lists rc_verbs and ud_verbs on every device, and
#    none without the shim.
# (Counters under traffic: tests/traffic/test_sysfs.c; namespaces:
# tests/netns/test_paths_netns.sh.)
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ibv_devices ibv_devinfo
SHIM=$LIB/libsofthca_path.so
[ -e "$SHIM" ] || { echo "FAIL: no $SHIM" >&2; exit 1; }

# run NAME SECS $with CMD...: under the shim; $without: not
with="env LD_PRELOAD=$SHIM"
without="env -u LD_PRELOAD"

# --- the device list, from Debian's ibv_devices
run devices 20 ibv_devices
expect_rc devices 0
devs=$(awk 'NR > 2 && NF {print $1}' "$T/devices.out" | sort)
[ -n "$devs" ] || { fail "ibv_devices lists no device"; finish; }

# each device's dev_name, as libibverbs gives it (struct ibv_device: two
# pointers and two enums, then name[64], dev_name[64])
run names 20 "$PY" -c '
import ctypes
lib = ctypes.CDLL("libibverbs.so.1")
lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
n = ctypes.c_int()
lst = lib.ibv_get_device_list(ctypes.byref(n))
for i in range(n.value):
    name = ctypes.string_at(lst[i] + 24).decode()
    dev_name = ctypes.string_at(lst[i] + 88).decode()
    print(name, dev_name)
'
expect_rc names 0
dev_name() { awk -v d="$1" '$1 == d {print $2}' "$T/names.out"; }

# --- /dev/infiniband: what UCX checks (stat, S_ISCHR, access R_OK|W_OK)
for d in $devs; do
	n=$(dev_name "$d")
	[ -n "$n" ] || { fail "$d: no dev_name from libibverbs"; continue; }
	node=/dev/infiniband/$n
	run "st-$d" 10 $with "$PY" -c '
import os, stat, sys, errno
p = sys.argv[1]
st = os.stat(p)
print(stat.S_ISCHR(st.st_mode), os.access(p, os.R_OK | os.W_OK),
      os.major(st.st_rdev), os.minor(st.st_rdev))
try:
    os.open(p, os.O_RDWR)
    print("opened")
except OSError as e:
    print(errno.errorcode[e.errno])
' "$node"
	expect_out "st-$d" '^True True 231 [0-9]+$'
	expect_out "st-$d" '^ENXIO$'
	# coreutils' test and stat agree
	run "test-$d" 10 $with /usr/bin/test -c "$node" -a -r "$node" -a -w "$node"
	expect_rc "test-$d" 0
	run "stat-$d" 10 $with /usr/bin/stat -c %F "$node"
	expect_out "stat-$d" '^character special file$'
	# the same major:minor in infiniband_verbs/<dev_name>/dev, and the
	# device's name in .../ibdev
	mm=$(awk 'NR == 1 {print $3 ":" $4}' "$T/st-$d.out")
	run "uv-$d" 10 $with cat "/sys/class/infiniband_verbs/$n/dev" \
		"/sys/class/infiniband_verbs/$n/ibdev"
	expect_rc "uv-$d" 0
	[ "$(cat "$T/uv-$d.out")" = "$(printf '%s\n%s' "$mm" "$d")" ] &&
		ok "$d: infiniband_verbs/$n: dev $mm, ibdev $d" ||
		fail "$d: infiniband_verbs/$n holds '$(tr '\n' ' ' <"$T/uv-$d.out")', expected $mm $d"
done
run devls 10 $with ls /dev/infiniband
want=$(for d in $devs; do dev_name "$d"; done | sort)
[ "$(sort "$T/devls.out")" = "$want" ] &&
	ok "ls /dev/infiniband: $(echo $want)" ||
	fail "ls /dev/infiniband: '$(tr '\n' ' ' <"$T/devls.out")', expected '$(echo $want)'"

# --- /sys/class/infiniband: the device list ...
run ls 10 $with ls /sys/class/infiniband
expect_rc ls 0
[ "$(sort "$T/ls.out")" = "$devs" ] &&
	ok "ls /sys/class/infiniband = ibv_devices ($(echo $devs))" ||
	fail "ls /sys/class/infiniband: '$(tr '\n' ' ' <"$T/ls.out")', ibv_devices: '$(echo $devs)'"

# ... and what ibv_devinfo -v says of each
run devinfo 30 ibv_devinfo -v
expect_rc devinfo 0
# field DEV NAME: the value of "NAME:" in DEV's block of ibv_devinfo -v
field() {
	awk -v d="$1" -v f="$2:" '
		/^hca_id:/ { on = ($2 == d) }
		on && $1 == f { print $2; exit }' "$T/devinfo.out"
}
# gids DEV: "index address" of DEV's port 1 GIDs, addresses in full form
gids() {
	awk -v d="$1" '
		/^hca_id:/ { on = ($2 == d) }
		on && /GID\[/ { sub(/.*GID\[ */, ""); sub(/\]:/, "");
				sub(/,.*/, ""); print $1, $2 }' "$T/devinfo.out" |
	"$PY" -c '
import ipaddress, sys
for line in sys.stdin:
    i, a = line.split()
    print(i, ipaddress.IPv6Address(a).exploded)'
}
for d in $devs; do
	S=/sys/class/infiniband/$d
	P=$S/ports/1
	run "attr-$d" 10 $with cat "$S/node_guid" "$S/sys_image_guid" \
		"$P/state" "$P/phys_state" "$P/link_layer" "$P/lid" "$P/rate"
	expect_rc "attr-$d" 0
	got=$(tr '\n' '|' <"$T/attr-$d.out")
	state=$(field "$d" state)        # PORT_ACTIVE
	case "$state" in
	PORT_ACTIVE) want_state="4: ACTIVE" ;;
	PORT_DOWN) want_state="1: DOWN" ;;
	*) want_state="?$state" ;;
	esac
	phys=$(awk -v d="$d" '/^hca_id:/ { on = ($2 == d) }
		on && /phys_state:/ { print $3; exit }' "$T/devinfo.out" | tr -d '()')
	want="$(field "$d" node_guid)|$(field "$d" sys_image_guid)|$want_state|"
	[ "${got#"$want"}" != "$got" ] &&
		ok "$d: node_guid, sys_image_guid, state as ibv_devinfo" ||
		fail "$d: files say '$got', ibv_devinfo '$want'"
	echo "$got" | grep -q "^[^|]*|[^|]*|[^|]*|$phys: [A-Za-z]*|Ethernet|0x0|" &&
		ok "$d: phys_state $phys, link_layer Ethernet, lid 0x0" ||
		fail "$d: phys_state/link_layer/lid in '$got' (ibv_devinfo phys_state $phys, $(field "$d" link_layer))"

	# every GID ibv_devinfo lists, at its index, RoCE v2, on the interface
	ifname=${d#softhca_}
	gids "$d" >"$T/gids-$d"
	[ -s "$T/gids-$d" ] || fail "$d: ibv_devinfo lists no GID"
	while read -r i a; do
		run "gid-$d-$i" 10 $with cat "$P/gids/$i" "$P/gid_attrs/types/$i" \
			"$P/gid_attrs/ndevs/$i"
		[ "$(cat "$T/gid-$d-$i.out")" = "$(printf '%s\nRoCE v2\n%s' "$a" "$ifname")" ] &&
			ok "$d: GID $i $a, RoCE v2, $ifname" ||
			fail "$d: GID $i: '$(tr '\n' '|' <"$T/gid-$d-$i.out")', ibv_devinfo $a on $ifname"
	done <"$T/gids-$d"

	# pyverbs' lookup of the interface (tests/base.py): os.path.exists,
	# then `ls .../device/net/`
	run "net-$d" 10 $with "$PY" -c '
import os, subprocess, sys
p = "/sys/class/infiniband/%s/device/net/" % sys.argv[1]
print(os.path.exists(p))
print(subprocess.check_output(["ls", p]).decode().split("\n")[0])' "$d"
	[ "$(cat "$T/net-$d.out")" = "$(printf 'True\n%s' "$ifname")" ] &&
		ok "$d: device/net/ lists $ifname" ||
		fail "$d: device/net/: '$(tr '\n' '|' <"$T/net-$d.out")', expected $ifname"

	# libibverbs' ibv_read_sysfs_file reads the same files, with and
	# without the shim
	for how in with without; do
		run "rsf-$how-$d" 10 ${!how} "$PY" -c '
import ctypes, sys
lib = ctypes.CDLL("libibverbs.so.1")
d = ("/sys/class/infiniband/" + sys.argv[1]).encode()
for f in sys.argv[2:]:
    buf = ctypes.create_string_buffer(256)
    n = lib.ibv_read_sysfs_file(d, f.encode(), buf, 256)
    print(buf.value.decode() if n >= 0 else "error")' "$d" node_guid \
			sys_image_guid ports/1/state ports/1/phys_state \
			ports/1/link_layer ports/1/lid ports/1/rate
		[ -n "$got" ] && [ "$(tr '\n' '|' <"$T/rsf-$how-$d.out")" = "$got" ] &&
			ok "$d: ibv_read_sysfs_file $how the shim reads the files" ||
			fail "$d: ibv_read_sysfs_file $how the shim: '$(tr '\n' '|' <"$T/rsf-$how-$d.out")', files '$got'"
	done
done

# --- errors as sysfs gives them
d=$(echo "$devs" | head -1)
run noent 10 $with "$PY" -c '
import errno, os
for p in ("/sys/class/infiniband/softhca_no_such_device",
          "/sys/class/infiniband/%s/no_such_file",
          "/sys/class/infiniband/%s/node_guid/",
          "/dev/infiniband/uverbs999999"):
    try:
        os.stat(p.replace("%s", "'"$d"'"))
        print("exists")
    except OSError as e:
        print(errno.errorcode[e.errno])'
[ "$(tr '\n' ' ' <"$T/noent.out")" = "ENOENT ENOENT ENOTDIR ENOENT " ] &&
	ok "names that are not there: ENOENT (ENOTDIR under a file)" ||
	fail "names that are not there: $(tr '\n' ' ' <"$T/noent.out")"
run write 10 $with "$PY" -c '
import errno, os
for p, f in (("node_desc", os.O_WRONLY), ("node_guid", os.O_RDWR),
             ("ports/1/hw_counters/lifespan", os.O_WRONLY | os.O_TRUNC),
             ("new_file", os.O_WRONLY | os.O_CREAT)):
    try:
        os.open("/sys/class/infiniband/'"$d"'/" + p, f)
        print("opened")
    except OSError as e:
        print(errno.errorcode[e.errno])'
[ "$(tr '\n' ' ' <"$T/write.out")" = "EACCES EACCES EACCES EACCES " ] &&
	ok "writes are refused: EACCES" ||
	fail "writes: $(tr '\n' ' ' <"$T/write.out")"
run shwrite 10 $with sh -c "echo x > /sys/class/infiniband/$d/node_desc"
expect_rc shwrite 2
expect_out shwrite 'Permission denied' stderr

# --- other paths are untouched
for p in /sys/class/net /etc /proc/version /dev/null; do
	run "o1" 10 $with stat -L -c '%d %i %F %s %a' "$p"
	run "o2" 10 $without stat -L -c '%d %i %F %s %a' "$p"
	cmp -s "$T/o1.out" "$T/o2.out" && [ -s "$T/o1.out" ] &&
		ok "untouched: $p" || fail "$p: '$(cat "$T/o1.out")' with the shim, '$(cat "$T/o2.out")' without"
done
run cls1 10 $with ls /sys/class
run cls2 10 $without ls /sys/class
[ "$(sort "$T/cls1.out")" = "$( (cat "$T/cls2.out"; echo infiniband; echo infiniband_verbs) | sort -u)" ] &&
	ok "ls /sys/class: the real entries, and infiniband, infiniband_verbs" ||
	fail "ls /sys/class with the shim: $(tr '\n' ' ' <"$T/cls1.out")"

# --- without the shim, none of it
run bare 10 $without ls "/sys/class/infiniband/$d"
expect_rc bare 2
expect_out bare 'No such file or directory' stderr
run bare2 10 $without /usr/bin/test -c "/dev/infiniband/$(dev_name "$d")"
expect_rc bare2 1

# --- UCX finds the devices (ucx-utils), and does not without the shim
if command -v ucx_info >/dev/null 2>&1; then
	run ucx 60 $with ucx_info -d
	run ucx0 60 $without ucx_info -d
	for d in $devs; do
		for tl in rc_verbs ud_verbs; do
			awk -v tl="$tl" -v dev="$d:1" '
				/# *Transport:/ { t = $3 }
				/# *Device:/ && t == tl && $3 == dev { found = 1 }
				END { exit !found }' "$T/ucx.out" &&
				ok "ucx_info -d: $tl on $d:1" ||
				fail "ucx_info -d lists no $tl on $d:1"
		done
	done
	grep -q 'Transport: rc_verbs' "$T/ucx0.out" &&
		fail "ucx_info -d lists rc_verbs without the shim: the test cannot tell" ||
		ok "without the shim UCX lists no verbs transport"
else
	echo "SKIP: ucx_info not installed (ucx-utils): UCX not checked"
fi

finish
