#!/usr/bin/env bash
# `lansbert info`'s NCCL net line loads the plugin by the name NCCL's dlopen uses, through the
# same loader search and with NCCL's flags: a stand-in plugin on LD_LIBRARY_PATH is found
# there; one installed only as libnccl-net-ofi.so is reported as not loading under NCCL's
# default name, with the NCCL_NET_PLUGIN=ofi fix, and loads with it; a plugin whose own
# dependency is missing, or with a symbol nothing defines, is reported with the loader's
# message (NCCL would silently use its sockets); with NCCL_NET set, NCCL would stop instead.
# Skips where this machine's loader already finds a real libnccl-net.so (an EFA node).
# Usage: info_plugin_test.sh LANSBERT SCRATCH
set -uo pipefail
lb=$1; tmp=$2
fail=0
rm -rf "$tmp" && mkdir -p "$tmp/empty" "$tmp/ofi" "$tmp/both" "$tmp/broken" "$tmp/undef"
cc=$(command -v cc || command -v gcc || command -v g++) || { echo "SKIP: no C compiler for the stand-in plugin"; exit 77; }
# lansbert's own libraries may come from LD_LIBRARY_PATH: the stand-ins' directory goes first.
net_line() {  # DIR [env ARGS...]: the NCCL net line with DIR first on the loader path
  local dir=$1; shift
  env -u NCCL_NET_PLUGIN -u NCCL_NET LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@" "$lb" info |
    grep "NCCL net"
}
line=$(net_line "$tmp/empty")
[[ -n $line ]] || { echo "FAIL: lansbert info printed no 'NCCL net' line"; exit 1; }
[[ $line == *"would load"* ]] && { echo "SKIP: this machine's loader finds a plugin already: $line"; exit 77; }
build() { "$cc" -x c -shared -fPIC "$@" || { echo "FAIL: cannot build a stand-in: $*"; exit 1; }; }
echo 'int lansbert_test_plugin_symbol = 1;' > "$tmp/plugin.c"
build -o "$tmp/ofi/libnccl-net-ofi.so" "$tmp/plugin.c"
cp "$tmp/ofi/libnccl-net-ofi.so" "$tmp/both/libnccl-net.so"
# A plugin that needs a library (as aws-ofi-nccl needs libfabric) which is then removed.
echo 'int missing_dep(void) { return 1; }' > "$tmp/dep.c"
echo 'int missing_dep(void); int plugin_init(void) { return missing_dep(); }' > "$tmp/needs_dep.c"
build -o "$tmp/libmissingdep.so" "$tmp/dep.c"
build -o "$tmp/broken/libnccl-net.so" "$tmp/needs_dep.c" -L"$tmp" -lmissingdep
rm "$tmp/libmissingdep.so"
# A plugin calling a function no library defines: loads lazily, not with NCCL's RTLD_NOW.
echo 'int fi_missing_symbol(void); int plugin_init(void) { return fi_missing_symbol(); }' > "$tmp/undef.c"
build -o "$tmp/undef/libnccl-net.so" "$tmp/undef.c"
want() {  # LINE PATTERN WHAT
  [[ $1 == *"$2"* ]] || { echo "FAIL: $3: no '$2' in: $1"; fail=1; }
}
want "$(net_line "$tmp/both")" "$tmp/both/libnccl-net.so would load" "plugin on LD_LIBRARY_PATH"
line=$(net_line "$tmp/ofi")
want "$line" "libnccl-net.so does not load" "only libnccl-net-ofi.so"
want "$line" "$tmp/ofi/libnccl-net-ofi.so loads: set NCCL_NET_PLUGIN=ofi" "only libnccl-net-ofi.so"
want "$line" "NCCL would use its built-in IB/socket transport" "only libnccl-net-ofi.so"
want "$(net_line "$tmp/ofi" env NCCL_NET_PLUGIN=ofi)" "$tmp/ofi/libnccl-net-ofi.so would load" "NCCL_NET_PLUGIN=ofi"
want "$(net_line "$tmp/broken")" "libmissingdep.so" "a plugin whose dependency is missing"
want "$(net_line "$tmp/undef")" "undefined symbol: fi_missing_symbol" "a plugin with an undefined symbol"
want "$(net_line "$tmp/empty" env "NCCL_NET=AWS Libfabric")" "NCCL would stop at start-up (NCCL_NET=AWS Libfabric)" \
  "no plugin, NCCL_NET set"
(( fail == 0 )) && echo "info_plugin: ok"
exit $fail
