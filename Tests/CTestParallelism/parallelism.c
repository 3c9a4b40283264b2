// Swift Testing (6.3) starts every test of the binary at once unless
// SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH says otherwise, and the testing library reads
// that variable before any Swift code of ours runs. With ~800 tests queued on a cooperative
// pool one thread per core wide, a test whose task resumes waits behind every test not yet
// begun: on a 2-core machine that was up to a minute, longer than the real-time deadlines of
// the processes and servers the integration tests drive (an origin holding an exchange, a
// response timeout), so tests failed for being starved, not for a fault. A width of four tests
// per core bounds that wait to the few tests running, and the whole suite takes no longer
// (measured: 85 s capped at 8 on 2 cores, 88 s uncapped).
//
// A constructor, because `swift test` offers no other hook that runs before the testing
// library's entry point. A width set in the environment by whoever runs the tests wins.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "CTestParallelism.h"

static int chosen_width = 0;

__attribute__((constructor))
static void outbox_tests_limit_parallelization(void) {
    if (getenv("SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH") != NULL) return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int width = (int)(cores > 1 ? cores : 1) * 4;
    char text[16];
    snprintf(text, sizeof text, "%d", width);
    if (setenv("SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH", text, 0) == 0) chosen_width = width;
}

int outbox_tests_parallelization_width(void) {
    return chosen_width;
}
