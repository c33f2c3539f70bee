#!/bin/sh
# Compare the exported symbol@version set of a built library with the
# checked-in list taken from Debian 12's rdma-core 44.0, and the version
# node tree (names and parents).  Any difference fails.
#   check_exports.sh LIBRARY EXPECTED.syms
set -eu
lib=$1
expected=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

readelf --dyn-syms --wide "$lib" |
	awk '$7 != "UND" && $8 ~ /@/ && $5 != "LOCAL" {print $8}' |
	grep -v -E '^(IBVERBS|RDMACM)_[^@]*@@?(IBVERBS|RDMACM)_' |
	sort >"$tmp/actual"
grep -v '^#' "$expected" | grep -v '^node ' | sort >"$tmp/expected"

# version definitions: "node NAME [< PARENT]"
readelf -V "$lib" | awk '
	/Version definition/ { in_def = 1; next }
	/Version needs/ { in_def = 0 }
	in_def && /Name:/ && !/BASE/ { name = $NF; print "node " name; last = name }
	in_def && /Parent 1:/ { print "node " last " < " $NF }' |
	sort >"$tmp/actual_nodes"
grep '^node ' "$expected" | sort >"$tmp/expected_nodes"

status=0
if ! diff -u "$tmp/expected" "$tmp/actual"; then
	echo "FAIL: exported symbol@version set differs from rdma-core 44" >&2
	status=1
fi
if ! diff -u "$tmp/expected_nodes" "$tmp/actual_nodes"; then
	echo "FAIL: version node tree differs from rdma-core 44" >&2
	status=1
fi
[ $status = 0 ] && echo "ok: $(wc -l <"$tmp/actual") symbols, $(wc -l <"$tmp/actual_nodes") node lines match $(basename "$expected")"
exit $status
