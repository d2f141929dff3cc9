#include "csqlite.h"
#include <sqlite3.h>

int csqlite_configure(void) {
    int configured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    int registered = csqlite_register_wal_vfs();
    return configured != SQLITE_OK ? configured : registered;
}
