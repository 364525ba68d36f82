#!/usr/bin/env bash
# `lansbert info`'s NCCL net line loads the plugin by the name NCCL's dlopen uses, through the
# same loader search: a stand-in plugin only on LD_LIBRARY_PATH is found there; one installed
# only as libnccl-net-ofi.so is reported as not loading under NCCL's default name, with the
# NCCL_NET_PLUGIN=ofi fix, and loads with it; a plugin whose own dependency is missing is
# reported with the loader's message (NCCL would silently use its sockets).
# Usage: info_plugin_test.sh LANSBERT SCRATCH
set -uo pipefail
lb=$1; tmp=$2
fail=0
rm -rf "$tmp" && mkdir -p "$tmp/ofi" "$tmp/both" "$tmp/broken"
cc=$(command -v cc || command -v gcc || command -v g++) || { echo "SKIP: no C compiler for the stand-in plugin"; exit 77; }
echo 'int lansbert_test_plugin_symbol = 1;' > "$tmp/plugin.c"
"$cc" -x c -shared -fPIC -o "$tmp/ofi/libnccl-net-ofi.so" "$tmp/plugin.c" || { echo "FAIL: cannot build the stand-in"; exit 1; }
cp "$tmp/ofi/libnccl-net-ofi.so" "$tmp/both/libnccl-net.so"
# A plugin that needs a library (as aws-ofi-nccl needs libfabric) which is then removed.
echo 'int missing_dep(void) { return 1; }' > "$tmp/dep.c"
echo 'int missing_dep(void); int plugin_init(void) { return missing_dep(); }' > "$tmp/needs_dep.c"
"$cc" -x c -shared -fPIC -o "$tmp/libmissingdep.so" "$tmp/dep.c" &&
  "$cc" -x c -shared -fPIC -o "$tmp/broken/libnccl-net.so" "$tmp/needs_dep.c" -L"$tmp" -lmissingdep ||
  { echo "FAIL: cannot build the broken stand-in"; exit 1; }
rm "$tmp/libmissingdep.so"
net_line() { env -u NCCL_NET_PLUGIN LD_LIBRARY_PATH="$1" "${@:2}" "$lb" info | grep "NCCL net"; }
want() {  # LINE PATTERN WHAT
  [[ $1 == *"$2"* ]] || { echo "FAIL: $3: no '$2' in: $1"; fail=1; }
}
line=$(net_line "$tmp/both")
want "$line" "$tmp/both/libnccl-net.so would load" "plugin on LD_LIBRARY_PATH"
line=$(net_line "$tmp/ofi")
want "$line" "libnccl-net.so does not load" "only libnccl-net-ofi.so"
want "$line" "$tmp/ofi/libnccl-net-ofi.so loads: set NCCL_NET_PLUGIN=ofi" "only libnccl-net-ofi.so"
line=$(net_line "$tmp/ofi" env NCCL_NET_PLUGIN=ofi)
want "$line" "$tmp/ofi/libnccl-net-ofi.so would load" "NCCL_NET_PLUGIN=ofi"
line=$(net_line "$tmp/broken")
want "$line" "libmissingdep.so" "a plugin whose dependency is missing"
(( fail == 0 )) && echo "info_plugin: ok"
exit $fail
