#include "csqlite.h"
#include <pthread.h>
#include <sqlite3.h>

// SQLite's allocations go to the system's malloc, through SQLite's own wrappers
// (`SQLITE_CONFIG_GETMALLOC`), with one exception: blocks of exactly `CHUNK_BYTES`, the
// chunks of an in-memory statement journal, which every statement that may fail halfway
// allocates a few of per page it changes and frees at its end (about ten per created
// item). More than glibc's per-thread cache keeps (seven of a size), so most took its
// slower paths; here each thread keeps up to `CACHE_SLOTS` of them for reuse, and gives
// them back to the system when it exits.

#define CHUNK_BYTES 1024
#define CACHE_SLOTS 32

static sqlite3_mem_methods systemMemory;
static pthread_key_t cacheKey;

typedef struct ChunkCache {
    int count;
    void *chunks[CACHE_SLOTS];
} ChunkCache;

static __thread ChunkCache *threadCache;

static void releaseCache(void *value) {
    ChunkCache *cache = value;
    for (int index = 0; index < cache->count; index++) systemMemory.xFree(cache->chunks[index]);
    systemMemory.xFree(cache);
    threadCache = NULL;
}

static void *memMalloc(int bytes) {
    ChunkCache *cache = threadCache;
    if (bytes == CHUNK_BYTES && cache != NULL && cache->count > 0) return cache->chunks[--cache->count];
    return systemMemory.xMalloc(bytes);
}

static void memFree(void *pointer) {
    if (pointer != NULL && systemMemory.xSize(pointer) == CHUNK_BYTES) {
        ChunkCache *cache = threadCache;
        if (cache == NULL) {
            cache = systemMemory.xMalloc((int)sizeof(ChunkCache));
            // Registered for this thread's exit; without it, the block is simply freed.
            if (cache != NULL && pthread_setspecific(cacheKey, cache) != 0) {
                systemMemory.xFree(cache);
                cache = NULL;
            }
            if (cache != NULL) {
                cache->count = 0;
                threadCache = cache;
            }
        }
        if (cache != NULL && cache->count < CACHE_SLOTS) {
            cache->chunks[cache->count++] = pointer;
            return;
        }
    }
    systemMemory.xFree(pointer);
}

static void *memRealloc(void *pointer, int bytes) { return systemMemory.xRealloc(pointer, bytes); }
static int memSize(void *pointer) { return systemMemory.xSize(pointer); }
static int memRoundup(int bytes) { return systemMemory.xRoundup(bytes); }
static int memInit(void *data) { return systemMemory.xInit(data); }
static void memShutdown(void *data) { systemMemory.xShutdown(data); }

/// SQLite's system allocator with the chunk cache, or SQLITE_MISUSE when SQLite is in use.
static int configureMemory(void) {
    int rc = sqlite3_config(SQLITE_CONFIG_GETMALLOC, &systemMemory);
    if (rc != SQLITE_OK) return rc;
    if (pthread_key_create(&cacheKey, releaseCache) != 0) return SQLITE_ERROR;
    static sqlite3_mem_methods methods = {memMalloc, memFree, memRealloc, memSize, memRoundup, memInit, memShutdown, NULL};
    return sqlite3_config(SQLITE_CONFIG_MALLOC, &methods);
}

int csqlite_configure(void) {
    int configured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    if (configured == SQLITE_OK) configured = configureMemory();
    int registered = csqlite_register_wal_vfs();
    return configured != SQLITE_OK ? configured : registered;
}
