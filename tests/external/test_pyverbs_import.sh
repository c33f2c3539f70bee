#!/bin/bash
# pyverbs (Debian's python3-pyverbs) loads on softhca's libibverbs: its
# compiled modules import ibv_query_gid_type@IBVERBS_PRIVATE_34 directly,
# and the mlx5/efa provider modules pull in libmlx5.so.1/libefa.so.1, which
# import 62 more IBVERBS_PRIVATE_34 symbols (reference/abi.md §6.1, §6.5).
# One ImportError here would abort rdma-core's whole test suite.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
[ -x "$PY" ] || skip "$PY is not installed"
"$PY" -c 'import pyverbs' 2>/dev/null || skip "python3-pyverbs is not installed"

# The three the suite's __init__ needs first
run import 30 "$PY" -c 'import pyverbs.device, pyverbs.providers.mlx5.mlx5dv, pyverbs.providers.efa.efadv; print("imported")'
expect_rc import 0
no_loader_errors import
expect_out import '^imported$'

# Every compiled module of the package
cat >"$T/all.py" <<'PYEOF'
import importlib, pkgutil, sys
import pyverbs
bad = 0
n = 0
for m in pkgutil.walk_packages(pyverbs.__path__, 'pyverbs.'):
    try:
        importlib.import_module(m.name)
        n += 1
    except ImportError as e:
        print(f'ImportError: {m.name}: {e}')
        bad += 1
print(f'{n} modules imported, {bad} failed')
sys.exit(1 if bad else 0)
PYEOF
run all 60 "$PY" "$T/all.py"
expect_rc all 0
no_loader_errors all
expect_out all '^[1-9][0-9]* modules imported, 0 failed$'
if [ "$rc" != 0 ]; then
	grep ImportError "$T/all.out" | head -10 | sed 's/^/    /' >&2
fi

# ... and the library it loads is ours: a device list with softhca_lo.
run devlist 30 "$PY" -c '
import pyverbs.device as d
names = [x.name.decode() for x in d.get_device_list()]
print(" ".join(names))
with d.Context(name="softhca_lo") as ctx:
    port = ctx.query_port(1)
    print("port state", port.state, "gid0", ctx.query_gid(1, 0).gid,
          "type", ctx.query_gid_type(1, 0))
'
expect_rc devlist 0
no_loader_errors devlist
expect_out devlist '(^| )softhca_lo( |$)'
# IBV_PORT_ACTIVE = 4; ibv_query_gid_type answers IBV_GID_TYPE_SYSFS_ROCE_V2 = 1
expect_out devlist '^port state 4 gid0 0000:0000:0000:0000:0000:ffff:7f00:0001 type 1$'

# Static view of every compiled module: ldd -r resolves all imports.
for so in $("$PY" -c 'import pyverbs, os; print(os.path.dirname(pyverbs.__file__))' |
	    xargs -I{} find {} -name '*.so'); do
	name=pyverbs-$(basename "$so" .so)
	run "$name" 30 ldd -r "$so"
	cat "$T/$name.err" >>"$T/$name.out"
	if grep -Eq -- "$LOADER_ERRORS|not found" "$T/$name.out"; then
		fail "$(basename "$so"): ldd -r reports unresolved imports:"
		grep -E -- "$LOADER_ERRORS|not found" "$T/$name.out" | head -5 |
			sed 's/^/    /' >&2
	else
		ok "$(basename "$so"): ldd -r clean"
	fi
done

finish
