#!/usr/bin/env bash
# Queue index memory at scale: inserts N operations (default 1 000 000) into the in-memory
# index and prints its footprint in bytes per entry and the resident-set growth.
#
#   Benchmarks/index-memory.sh            # N = 1000000
#   Benchmarks/index-memory.sh 4000000
#
# It is the suite's QueueIndexMemoryTests run with QUEUE_INDEX_MEMORY_ENTRIES=N, built in
# release mode with -enable-testing (the test target uses @testable imports). With N set, the
# test also checks the measured resident-set growth (at most 200 bytes per entry) and the script
# exits 1 when it does not hold. The suite itself inserts 16 384 entries and checks structure
# only (every entry found, the record's stride), without tens of seconds of CPU.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
N=${1:-1000000}
cd "$HERE/.."
QUEUE_INDEX_MEMORY_ENTRIES=$N \
  swift test -c release -Xswiftc -enable-testing --filter QueueIndexMemoryTests 2>&1 |
  grep -E 'QueueIndex memory|✘|error'
