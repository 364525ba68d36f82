#!/usr/bin/env bash
# SIGINT, SIGTERM and SIGUSR1 from the command line (core/stop_signals.h):
# - a command without its own handling dies of the signal, as any Unix tool does (exit 130
#   from the shell), not through the backtrace-and-exit(1) handler libinfinipath installs
#   at load time;
# - prep stops between documents, says so, exits 128 + the signal, and leaves the output
#   directory as it was (no staging directory, earlier files untouched), also while it
#   waits on a silent pipe (stdin).
# Usage: signals_cli_test.sh LANSBERT SOURCE_DIR
source "$(dirname "$0")/cli_test_setup.sh" "$@"
cd "$tmp"

# wait_for COND: polls COND for up to 60 s.
wait_for() {
  for _ in $(seq 1200); do eval "$1" && return 0; sleep 0.05; done
  fail "timed out waiting for: $1"
}

# tokenize blocks reading a pipe that stays open: a signal is the only way it ends. Its
# readiness is read from /proc/PID/syscall, which some containers do not allow.
if ! cat /proc/$$/syscall > /dev/null 2>&1; then
  echo "signals_cli: /proc/PID/syscall not readable here; skipping the tokenize part"
else
mkfifo in.fifo
"$bin" tokenize --vocab "$vocab" < in.fifo > /dev/null 2> tok.err &
pid=$!
exec 3> in.fifo
echo "hello world" >&3
# Ready once blocked in read() of the pipe (stdin, or the copy of it the corpus reader
# takes), or in the poll() that waits for it to be readable (data/text_sources.cc; x86-64
# numbers: read 0, poll 7): main has run (the vocab is loaded) and waits for text. (The dynamic
# loader's and the vocab's reads are of other files, and nothing else polls.)
reading_stdin() {
  local nr fd rest
  read -r nr fd rest < /proc/$pid/syscall &&
    { [[ $nr == 7 ]] || { [[ $nr == 0 ]] && [[ $(readlink /proc/$pid/fd/$((fd))) == $(readlink /proc/$pid/fd/0) ]]; }; }
}
wait_for reading_stdin
kill -INT $pid
rc=0; wait $pid || rc=$?
exec 3>&-
(( rc == 130 )) || fail "tokenize on SIGINT: exit $rc, expected 130 (death by SIGINT): $(cat tok.err)"
fi

# prep: a corpus that takes one thread many seconds (20 passes), stopped once its staging
# directory exists, i.e. mid-run.
for d in $(seq 3000); do
  printf 'Document %d talks about topic %d and then about topic %d at some length.\n' $d $((d % 17)) $((d % 23))
  printf 'A second sentence of document %d adds detail %d.\n\n' $d $((d * 7 % 101))
done > corpus.txt
mkdir shards
echo "an earlier run's file" > shards/shard-00000.lbs
for sig in INT TERM USR1; do
  "$bin" prep --vocab "$vocab" --input corpus.txt --out shards --threads 1 --dupe-factor 200 \
    --no-progress > /dev/null 2> prep.err &
  pid=$!
  wait_for "compgen -G 'shards/.prep-staging-*' > /dev/null"
  kill -$sig $pid
  rc=0; wait $pid || rc=$?
  want=$((128 + $(kill -l $sig)))
  (( rc == want )) || fail "prep on SIG$sig: exit $rc, expected $want: $(cat prep.err)"
  grep -qF "stopped by SIG$sig; shards is as it was before the run" prep.err || fail "prep on SIG$sig: $(cat prep.err)"
  [[ $(ls -A shards) == "shard-00000.lbs" ]] || fail "prep on SIG$sig left: $(ls -A shards)"
  [[ $(cat shards/shard-00000.lbs) == "an earlier run's file" ]] || fail "prep on SIG$sig changed the earlier file"
done

# prep reading stdin from a pipe whose writer stays open and silent (before its first byte,
# and again after some text): SIGINT still stops it, through the reader's poll, rather than
# leaving it waiting for the writer (which would hold this test until CTest's timeout).
# Some thread of prep ($pid) is in poll() (x86-64: 7), i.e. waiting for the pipe.
prep_polls() {
  local t nr rest
  for t in /proc/$pid/task/*; do
    read -r nr rest < "$t/syscall" 2> /dev/null && [[ $nr == 7 ]] && return 0
  done
  return 1
}
if cat /proc/$$/syscall > /dev/null 2>&1; then
  for before in "" "One sentence here. Another one there."; do
    rm -f in2.fifo && mkfifo in2.fifo
    "$bin" prep --vocab "$vocab" --input - --out shards --no-progress < in2.fifo > /dev/null 2> prep.err &
    pid=$!
    exec 4> in2.fifo
    [[ -n $before ]] && echo "$before" >&4
    wait_for prep_polls
    kill -INT $pid
    rc=0; wait $pid || rc=$?
    exec 4>&-
    (( rc == 130 )) || fail "prep of a silent pipe ('$before') on SIGINT: exit $rc: $(cat prep.err)"
    [[ $(ls -A shards) == "shard-00000.lbs" ]] || fail "prep of a silent pipe left: $(ls -A shards)"
  done
fi
echo "signals_cli: ok"
