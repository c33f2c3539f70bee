#!/bin/bash
# libfabric's verbs provider (Debian's libfabric-bin, unmodified) over
# softhca's libibverbs and librdmacm: fi_info lists the MSG endpoints of
# the device that owns an interface address, and fi_pingpong moves data
# between two processes over the verbs DGRAM (UD) endpoint.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need fi_info fi_pingpong
export FI_PROVIDER=verbs

# an IPv4 address of a non-loopback interface of this machine, if any
addr=$(ip -4 -o addr show scope global 2>/dev/null |
	awk '{sub(/\/.*/, "", $4); print $2, $4; exit}')
if [ -n "$addr" ]; then
	ifname=${addr% *}
	ip4=${addr#* }
	run fi_info_msg 30 fi_info -p verbs -t FI_EP_MSG -n "$ip4"
	expect_rc fi_info_msg 0
	no_loader_errors fi_info_msg
	expect_out fi_info_msg "domain: softhca_$ifname\$"
	expect_out fi_info_msg 'type: FI_EP_MSG'
else
	echo "note: no non-loopback IPv4 address: the MSG listing is not checked"
fi

run fi_info_dgram 30 fi_info -p verbs -t FI_EP_DGRAM
expect_rc fi_info_dgram 0
expect_out fi_info_dgram 'domain: softhca_lo-dgram'

port=$(free_port)
pair pingpong_dgram 60 fi_pingpong -p verbs -e dgram -B "$port" -I 1000 \
	-S all -c -- fi_pingpong -p verbs -e dgram -P "$port" -I 1000 -S all \
	-c 127.0.0.1
expect_pair() {
	grep -Eq -- "$2" "$T/$1.client" && ok "$1 /$2/" || fail "$1: no /$2/"
}
expect_pair pingpong_dgram '^1k +1k +=1k'
finish
