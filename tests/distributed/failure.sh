#!/usr/bin/env bash
# The failure cases of failure_test.cpp ("failure cases (run by
# failure.sh)"), each a job of two ranks: a rank that never arrives, dies,
# exits, or calls a collective that differs from the other's. Each case checks
# what the ranks print (KILN_FAILURE_OK: a rank saw the error it expected),
# how long the job took, and its exit status: a failed run must be a failed
# exit status.
#
# Plain mpirun ends the job when a rank exits with a nonzero status and exits
# with that rank's status. To see what the other rank does after one died or
# left, the job must go on: --enable-recovery. Under that flag Open MPI's mpirun
# exits 0 whatever its ranks returned, so there each rank runs under a wrapper
# that prints its own exit status (KILN_RANK_EXIT rank status), and those are
# checked.
# Usage: failure.sh MPIEXEC TEST_BINARY
set -u
mpiexec=$1 binary=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# check MODE FLAGS WANT_STATUS WANT_OK MAX_SECONDS [RANK0_STATUS RANK1_STATUS]
#   FLAGS: plain or recovery. WANT_STATUS: mpirun's exit status (plain).
#   WANT_OK: how many ranks must print KILN_FAILURE_OK.
check() {
  local mode=$1 flags=$2 want_status=$3 want_ok=$4 max_s=$5 want0=${6:-} want1=${7:-}
  local start end out status ok took why=""
  # Its own session directory: mpiruns started at once race to create the same one.
  local tmp
  tmp=$(mktemp -d -p "$logs")
  export TMPDIR=$tmp
  start=$(date +%s.%N)
  if [[ $flags == recovery ]]; then
    out=$(KILN_TEST_FAILURE=$mode timeout 60 "$mpiexec" --oversubscribe --enable-recovery -np 2 \
          bash -c '"$@"; s=$?; echo "KILN_RANK_EXIT $OMPI_COMM_WORLD_RANK $s"; exit $s' rank \
          "$binary" -tc="failure cases*" 2>&1)
  else
    out=$(KILN_TEST_FAILURE=$mode timeout 60 "$mpiexec" --oversubscribe -np 2 \
          "$binary" -tc="failure cases*" 2>&1)
  fi
  status=$?
  end=$(date +%s.%N)
  took=$(awk "BEGIN { printf \"%.1f\", $end - $start }")
  ok=$(grep -c "KILN_FAILURE_OK" <<<"$out")
  if [[ $flags == plain && $status != "$want_status" ]]; then
    why+=" mpirun exited with $status, expected $want_status;"
  fi
  if [[ $flags == recovery ]]; then
    for r in 0 1; do
      local want=$want0
      [[ $r == 1 ]] && want=$want1
      local got
      got=$(awk -v r=$r '$1 == "KILN_RANK_EXIT" && $2 == r { print $3 }' <<<"$out")
      [[ $got == "$want" ]] || why+=" rank $r exited with '${got}', expected $want;"
    done
  fi
  (( ok >= want_ok )) || why+=" $ok rank(s) printed KILN_FAILURE_OK, expected $want_ok;"
  awk "BEGIN { exit !($end - $start < $max_s) }" || why+=" took ${took} s, expected < $max_s s;"
  if [[ -z $why ]]; then
    echo "$mode ($flags): ok in ${took} s, status $status"
    grep "KILN_FAILURE_OK" <<<"$out" | sed 's/^/  /'
  else
    echo "$mode ($flags): FAILED:$why"
    echo "$out"
    return 1
  fi
}

# The cases run at once (each job mostly waits), each writing its own log.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
run() {
  check "$@" >"$logs/${#pids[@]}.log" 2>&1 &
  pids+=($!)
}
# Plain mpirun: the job's status is the first failing rank's.
run exit plain 3 0 10        # rank 1 exit(3): it leaves at once; mpirun reports its 3
run exit0 plain 1 1 10       # rank 1 exit(0): rank 0 learns at once, fails with 1
run shape plain 1 1 10       # ranks disagree: they fail with 1
run busy plain 3 0 10        # rank 1 exit(3) while a thread waits in a collective: at once (a wait would take the 300 s timeout)
# --enable-recovery: every rank's own status (mpirun's is 0 there).
run absent recovery 0 2 10 1 1   # rank 0 times out (1 s); rank 1, late, learns rank 0 left
run kill recovery 0 1 10 1 137   # rank 0 times out naming the dead rank 1
run exit recovery 0 1 10 1 3     # rank 0 learns at once that rank 1 exited with 3
for mode in shape dtype kind root traced; do
  run $mode recovery 0 2 10 1 1  # both ranks fail, each naming both calls
done
failures=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || failures=$((failures + 1))
  cat "$logs/$i.log"
done
exit $((failures > 0))
