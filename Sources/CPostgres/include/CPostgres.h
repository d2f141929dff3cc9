#ifndef CPOSTGRES_H
#define CPOSTGRES_H

// libpq's own declarations (libpq-dev), for the PostgreSQL engine. The server does not
// link libpq: it loads libpq.so.5 (and what it needs: Kerberos, LDAP, GnuTLS, about 3 MiB
// of resident memory) only when it opens a PostgreSQL database; see postgres.c.
#include <postgresql/libpq-fe.h>

/// Loads libpq.so.5 once; NULL when it is loaded, else why it cannot be (dlerror's text).
/// Every PQ function of this module requires it to have succeeded.
const char *cpostgres_load(void);

#endif
