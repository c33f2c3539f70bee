#!/bin/sh
# The libraries are built with the initial-exec TLS model (CMakeLists.txt):
# each keeps its whole TLS block in the static TLS area, where a library
# that dlopen brings in after start-up (Python's ctypes, as pyverbs does;
# UCX's and libfabric's plug-ins) must fit in the space glibc keeps spare
# (glibc.rtld.optional_static_tls: 512 bytes by default, shared with any
# other such library).  So both blocks together stay within LIMIT bytes
# (larger thread-locals live in per-thread blocks: src/common/tblock.h),
# and a Python process opens both with dlopen.  Fails on a library whose
# thread-locals grew back (2,956 bytes in one block: "cannot allocate
# memory in static TLS block").
#   check_tls.sh LIBIBVERBS LIBRDMACM
set -eu
LIMIT=384
total=0
for lib in "$@"; do
	# the PT_TLS program header's MemSiz (0 when there is none)
	size=$(readelf -lW "$lib" | awk '$1 == "TLS" { print $6 }')
	size=$((${size:-0}))
	echo "$lib: TLS block $size bytes"
	total=$((total + size))
done
echo "together: $total bytes (limit $LIMIT)"
[ "$total" -le "$LIMIT" ] || { echo "FAIL: TLS blocks above $LIMIT bytes" >&2; exit 1; }
command -v python3 >/dev/null || { echo "no python3: the dlopen part skipped"; exit 0; }
python3 - "$@" <<'PY'
import ctypes, sys
for lib in sys.argv[1:]:
    ctypes.CDLL(lib)     # raises OSError when it does not fit
    print("dlopen from Python:", lib, "ok")
PY
