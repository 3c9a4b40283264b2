// Caps how many tests Swift Testing runs at once in this package's test binary: see
// parallelism.c. Nothing to call; linking the target in is the whole effect.
#ifndef C_TEST_PARALLELISM_H
#define C_TEST_PARALLELISM_H

/// The width the test binary asked Swift Testing for at load time (0 if the environment
/// already named one, which is then left as it was).
int outbox_tests_parallelization_width(void);

#endif
