// The libpq functions the PostgreSQL engine calls, each forwarding to libpq.so.5 as
// loaded by cpostgres_load(): a server on SQLite never maps libpq and its dependencies.
// The prototypes are libpq-fe.h's own, so a mismatch does not compile.
#include "CPostgres.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CPOSTGRES_FUNCTIONS(X) \
    X(PGconn *, PQconnectdbParams, (const char *const *keywords, const char *const *values, int expand_dbname), \
      (keywords, values, expand_dbname)) \
    X(ConnStatusType, PQstatus, (const PGconn *conn), (conn)) \
    X(char *, PQerrorMessage, (const PGconn *conn), (conn)) \
    X(int, PQsocket, (const PGconn *conn), (conn)) \
    X(int, PQserverVersion, (const PGconn *conn), (conn)) \
    X(PGresult *, PQexec, (PGconn *conn, const char *query), (conn, query)) \
    X(PGresult *, PQprepare, (PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes), \
      (conn, stmtName, query, nParams, paramTypes)) \
    X(PGresult *, PQexecPrepared, (PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, \
                                   const int *paramLengths, const int *paramFormats, int resultFormat), \
      (conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat)) \
    X(int, PQconsumeInput, (PGconn *conn), (conn)) \
    X(int, PQsetnonblocking, (PGconn *conn, int arg), (conn, arg)) \
    X(int, PQsendPrepare, (PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes), \
      (conn, stmtName, query, nParams, paramTypes)) \
    X(int, PQsendQueryPrepared, (PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, \
                                 const int *paramLengths, const int *paramFormats, int resultFormat), \
      (conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat)) \
    X(int, PQflush, (PGconn *conn), (conn)) \
    X(int, PQenterPipelineMode, (PGconn *conn), (conn)) \
    X(int, PQexitPipelineMode, (PGconn *conn), (conn)) \
    X(int, PQpipelineSync, (PGconn *conn), (conn)) \
    X(int, PQsendFlushRequest, (PGconn *conn), (conn)) \
    X(int, PQisBusy, (PGconn *conn), (conn)) \
    X(PGresult *, PQgetResult, (PGconn *conn), (conn)) \
    X(PGnotify *, PQnotifies, (PGconn *conn), (conn)) \
    X(ExecStatusType, PQresultStatus, (const PGresult *res), (res)) \
    X(char *, PQresultErrorMessage, (const PGresult *res), (res)) \
    X(char *, PQresultErrorField, (const PGresult *res, int fieldcode), (res, fieldcode)) \
    X(int, PQntuples, (const PGresult *res), (res)) \
    X(int, PQnfields, (const PGresult *res), (res)) \
    X(Oid, PQftype, (const PGresult *res, int field_num), (res, field_num)) \
    X(char *, PQgetvalue, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num)) \
    X(int, PQgetlength, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num)) \
    X(int, PQgetisnull, (const PGresult *res, int tup_num, int field_num), (res, tup_num, field_num)) \
    X(char *, PQcmdTuples, (PGresult *res), (res)) \
    X(char *, PQcmdStatus, (PGresult *res), (res))

#define CPOSTGRES_PROCEDURES(X) \
    X(PQfinish, (PGconn *conn), (conn)) \
    X(PQclear, (PGresult *res), (res)) \
    X(PQfreemem, (void *ptr), (ptr))

#define POINTER(type, name, parameters, arguments) type (*name) parameters;
#define PROCEDURE_POINTER(name, parameters, arguments) void (*name) parameters;
static struct {
    CPOSTGRES_FUNCTIONS(POINTER)
    CPOSTGRES_PROCEDURES(PROCEDURE_POINTER)
} libpq;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *failure = "libpq.so.5 was not loaded";

static void load(void) {
    void *handle = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *error = dlerror();
        char *copy = error != NULL ? strdup(error) : NULL;
        failure = copy != NULL ? copy : "libpq.so.5 could not be loaded";
        return;
    }
    // The version first (an older libpq lacks the pipeline functions, and is named as such):
    // the event loops' reads use pipeline mode, whose fixes of 14.5 they need.
    int (*version_of)(void) = NULL;
    *(void **)&version_of = dlsym(handle, "PQlibVersion");
    int version = version_of != NULL ? version_of() : 0;
    if (version < 140005) {
        static char message[96];
        snprintf(message, sizeof message, "libpq.so.5 is version %d.%d: 14.5 or later is needed", version / 10000,
                 version >= 100000 ? version % 10000 : version / 100 % 100);
        failure = message;
        return;
    }
#define RESOLVE(name) \
    if ((*(void **)&libpq.name = dlsym(handle, #name)) == NULL) { \
        failure = "libpq.so.5 lacks " #name; \
        return; \
    }
#define RESOLVE_FUNCTION(type, name, parameters, arguments) RESOLVE(name)
#define RESOLVE_PROCEDURE(name, parameters, arguments) RESOLVE(name)
    CPOSTGRES_FUNCTIONS(RESOLVE_FUNCTION)
    CPOSTGRES_PROCEDURES(RESOLVE_PROCEDURE)
    failure = NULL;
}

const char *cpostgres_load(void) {
    pthread_once(&once, load);
    return failure;
}

// Reached only after cpostgres_load() succeeded (every connection is opened after it);
// a call otherwise is a bug, stopped here rather than jumping through NULL.
static void require(void) {
    if (cpostgres_load() != NULL) {
        fprintf(stderr, "libpq called before it was loaded: %s\n", failure);
        abort();
    }
}

#define FORWARD(type, name, parameters, arguments) \
    type name parameters { \
        require(); \
        return libpq.name arguments; \
    }
#define FORWARD_PROCEDURE(name, parameters, arguments) \
    void name parameters { \
        require(); \
        libpq.name arguments; \
    }
CPOSTGRES_FUNCTIONS(FORWARD)
CPOSTGRES_PROCEDURES(FORWARD_PROCEDURE)
