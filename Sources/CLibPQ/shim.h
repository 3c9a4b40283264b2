// libpq, PostgreSQL's own C client (Debian: libpq-dev; pkg-config adds -I/usr/include/postgresql).
#include <libpq-fe.h>
