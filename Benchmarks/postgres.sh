#!/usr/bin/env bash
# The PostgreSQL store's write path against pgbench on one private cluster (SPEC §9, issue 29):
# 64 clients each add an operation with a 1 KiB body and wait for its commit, through the
# store's group commit, alternated with pgbench inserting one 1 KiB row per transaction at 64
# clients; both wait on the same WAL flush. Prints adds/s, rows/s and their ratio per round.
#
#   Benchmarks/postgres.sh                  # 10 s per arm, 2 rounds, 1 connection
#   Benchmarks/postgres.sh 20 3 2           # 20 s per arm, 3 rounds, 2 connections
#
# This is the storage level (no HTTP): the ceiling for `outbox serve` on the postgres store.
# It is a Swift Testing test (PostgresCommitBenchmark), built in release mode, that starts its
# own PostgreSQL (initdb into a temp dir, 127.0.0.1, fsync on) and removes it afterwards.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$HERE/.."
OUTBOX_POSTGRES_BENCH_SECONDS=${1:-10} OUTBOX_POSTGRES_BENCH_ROUNDS=${2:-2} OUTBOX_POSTGRES_BENCH_CONNECTIONS=${3:-1} \
  swift test -c release -Xswiftc -enable-testing --filter PostgresCommitBenchmark 2>&1 | grep -E 'postgres-bench:|✘|error'
