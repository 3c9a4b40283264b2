#!/usr/bin/env bash
# Storage engine micro benchmark: durable appends/s of 1 KiB operations with 64 concurrent
# appenders, then the time the queue takes to reopen them (OutboxQueue's own recovery, the one
# `outbox serve` runs at a restart) and the resident memory its index adds.
#
#   Benchmarks/storage-bench.sh            # N = 200000
#   Benchmarks/storage-bench.sh 1000000    # default maxOperations, a full queue (~1.1 GiB of disk)
#   BENCH_DIR=/some/disk Benchmarks/storage-bench.sh
#
# It is a Swift Testing test (StorageBenchmark) that runs N operations when OUTBOX_STORAGE_BENCH
# is N (512 otherwise, as in `swift test`), built in release mode with -enable-testing (the test target uses @testable imports).
# The log is written under BENCH_DIR (default /tmp) and removed afterwards.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
N=${1:-200000}
cd "$HERE/.."
OUTBOX_STORAGE_BENCH=$N OUTBOX_STORAGE_BENCH_DIR=${BENCH_DIR:-/tmp} \
  swift test -c release -Xswiftc -enable-testing --filter StorageBenchmark 2>&1 | grep -E 'storage-bench:|✘|error'
