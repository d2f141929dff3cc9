#include "csqlite.h"
#include <sqlite3.h>

int csqlite_configure(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
