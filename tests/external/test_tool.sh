#!/bin/bash
# The softhca command: `softhca devices` lists the devices, and
# `softhca run -- CMD` runs an unmodified client (Debian's ibv_devinfo) on
# softhca with no LD_LIBRARY_PATH of the caller's.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ibv_devinfo
[ -x "$TOOL" ] || { echo "FAIL: no $TOOL" >&2; exit 1; }

# The tool finds its libraries itself: start it with a clean environment.
unset LD_LIBRARY_PATH LD_PRELOAD
SHIM=$(readlink -f "$LIB")/libsofthca_path.so

run help 10 "$TOOL" --help
expect_rc help 0
expect_out help 'softhca run -- CMD'
expect_out help 'softhca devices'
expect_out help 'softhca env'

run devices 20 "$TOOL" devices
expect_rc devices 0
no_loader_errors devices
expect_out devices '^softhca_lo[[:space:]]+node_guid [0-9a-f]{4}(:[0-9a-f]{4}){3}$'
expect_out devices 'port 1: active, link layer Ethernet'
expect_out devices 'GID\[ *0\] 127\.0\.0\.1'

# Debian's ibv_devinfo, unmodified, through `softhca run`
run devinfo 20 "$TOOL" run -- ibv_devinfo -d softhca_lo
expect_rc devinfo 0
no_loader_errors devinfo
expect_out devinfo '^hca_id:[[:space:]]+softhca_lo$'
expect_out devinfo 'state:[[:space:]]+PORT_ACTIVE'

# ... and without the `--`
run devinfo2 20 "$TOOL" run ibv_devinfo -l
expect_rc devinfo2 0
expect_out devinfo2 'softhca_lo'

# `run` puts the build's lib directory first and keeps the caller's path.
# shellcheck disable=SC2016  # expanded by the inner sh
run env 10 env LD_LIBRARY_PATH=/opt/x "$TOOL" run -- sh -c 'echo "$LD_LIBRARY_PATH"'
expect_rc env 0
expect_out env "^$(readlink -f "$LIB"):/opt/x\$"

# ... and its path shim first on LD_PRELOAD, keeping the caller's (which
# ld.so splits at spaces and colons), without repeating an entry.
# shellcheck disable=SC2016  # expanded by the inner sh
run preload 10 env LD_PRELOAD="/opt/p1.so /opt/p2.so" "$TOOL" run -- \
	sh -c 'echo "$LD_PRELOAD"'
expect_rc preload 0
expect_out preload "^$SHIM:/opt/p1.so:/opt/p2.so\$"
# shellcheck disable=SC2016
run preload2 10 env LD_PRELOAD="$SHIM" "$TOOL" run -- sh -c 'echo "$LD_PRELOAD"'
expect_out preload2 "^$SHIM\$"
# a program run under it finds the devices by path
run bypath 10 "$TOOL" run -- ls /sys/class/infiniband
expect_rc bypath 0
expect_out bypath '^softhca_lo$'

# `softhca env`: the same environment, as export lines a shell can eval,
# and eval'ed twice the same
run env2 10 env LD_LIBRARY_PATH=/opt/x "$TOOL" env
expect_rc env2 0
expect_out env2 "^export LD_LIBRARY_PATH='$(readlink -f "$LIB"):/opt/x'\$"
expect_out env2 "^export LD_PRELOAD='$SHIM'\$"
# shellcheck disable=SC2016
run evaltwice 10 env LD_LIBRARY_PATH=/opt/x LD_PRELOAD="/opt/it's.so" TOOL="$TOOL" \
	bash -c 'eval "$("$TOOL" env)" && eval "$("$TOOL" env)" &&
		 echo "$LD_LIBRARY_PATH" && echo "$LD_PRELOAD" &&
		 ls /sys/class/infiniband'
expect_rc evaltwice 0
expect_out evaltwice "^$(readlink -f "$LIB"):/opt/x\$"
expect_out evaltwice "^$SHIM:/opt/it's.so\$"
expect_out evaltwice '^softhca_lo$'
run envbad 10 "$TOOL" env extra
expect_rc envbad 2

# Errors: unknown command, nothing to run, a command that does not exist.
run bad 10 "$TOOL" frobnicate
expect_rc bad 2
expect_out bad "unknown command" stderr
run norun 10 "$TOOL" run --
expect_rc norun 2
run nocmd 10 "$TOOL" run -- /nonexistent/softhca-test-command
expect_rc nocmd 127
expect_out nocmd 'cannot run' stderr

finish
