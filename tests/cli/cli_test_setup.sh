# Sourced by the data command-line tests (`source cli_test_setup.sh "$@"`): strict mode, the
# arguments every one takes (LANSBERT SOURCE_DIR), a scratch directory removed on exit
# (after killing any background job the test left), and fail().
set -euo pipefail
bin=$1
vocab=$2/tests/data/bert-base-uncased-vocab.txt
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
