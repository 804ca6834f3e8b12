#!/usr/bin/env bash
# A rank that never arrives, then a rank that dies: the other fails with the
# collective and the rank named, within the timeout (distributed_test.cpp).
# Usage: failure.sh MPIEXEC TEST_BINARY
set -u
mpiexec=$1 binary=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
for mode in absent kill; do
  # --enable-recovery: mpirun lets the other rank go on when one dies, so the
  # test sees Kiln's own error rather than mpirun's.
  out=$(KILN_TEST_FAILURE=$mode timeout 60 "$mpiexec" --oversubscribe --enable-recovery -np 2 \
        "$binary" -tc="*never arrives*" 2>&1)
  if grep -q "KILN_FAILURE_OK" <<<"$out"; then
    echo "$mode: $(grep KILN_FAILURE_OK <<<"$out")"
  else
    echo "$mode: FAILED"; echo "$out"; status=1
  fi
done
exit $status
