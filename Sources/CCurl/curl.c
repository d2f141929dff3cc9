#include "CCurl.h"

// Plain prototypes (curl's type-checking macros would take `lib.curl_easy_setopt(` for themselves).
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

// libcurl is loaded when S3 is first spoken to (dlopen), not when the server starts: it and
// the libraries it needs (GnuTLS, Kerberos, LDAP, SSH, …) are not mapped by a server that
// keeps its images on local disk. Each function is called through a pointer of its own
// prototype, from curl.h.
#define CCURL_FUNCTIONS(X) \
    X(curl_global_init) \
    X(curl_easy_init) \
    X(curl_easy_setopt) \
    X(curl_easy_perform) \
    X(curl_easy_getinfo) \
    X(curl_easy_strerror) \
    X(curl_slist_append) \
    X(curl_slist_free_all) \
    X(curl_easy_cleanup)

#define POINTER(name) __typeof__(&name) name;
static struct {
    CCURL_FUNCTIONS(POINTER)
} lib;

static pthread_once_t started = PTHREAD_ONCE_INIT;
static int start_result = -1;
static char load_failure[256] = "libcurl.so.4 was not loaded";

static void start_once(void) {
    void *handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *error = dlerror();
        snprintf(load_failure, sizeof(load_failure), "%s", error != NULL ? error : "libcurl.so.4 could not be loaded");
        return;
    }
#define RESOLVE(name) \
    if ((*(void **)&lib.name = dlsym(handle, #name)) == NULL) { \
        snprintf(load_failure, sizeof(load_failure), "libcurl.so.4 has no %s", #name); \
        return; \
    }
    CCURL_FUNCTIONS(RESOLVE)
    start_result = lib.curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
    if (start_result != 0) snprintf(load_failure, sizeof(load_failure), "curl_global_init failed");
}

int ccurl_start(void) {
    pthread_once(&started, start_once);
    return start_result;
}

typedef struct {
    const unsigned char *data;
    size_t length;
    size_t offset;
    /// A file to read the body from instead of `data` (-1: none), from `file_offset`.
    int fd;
    long long file_offset;
} upload;

static size_t read_body(char *buffer, size_t size, size_t count, void *context) {
    upload *source = context;
    size_t room = size * count;
    size_t left = source->length - source->offset;
    size_t n = left < room ? left : room;
    if (n == 0) return 0;
    if (source->fd >= 0) {
        ssize_t got;
        do {
            got = pread(source->fd, buffer, n, (off_t)(source->file_offset + (long long)source->offset));
        } while (got < 0 && errno == EINTR);
        if (got <= 0) return CURL_READFUNC_ABORT;
        n = (size_t)got;
    } else {
        memcpy(buffer, source->data + source->offset, n);
    }
    source->offset += n;
    return n;
}

typedef struct {
    ccurl_response *response;
    size_t limit;
    size_t capacity;
    /// A file to write the body to instead of memory (-1: none); `limit` still bounds it.
    int fd;
} download;

static size_t write_body(char *data, size_t size, size_t count, void *context) {
    download *sink = context;
    size_t n = size * count;
    ccurl_response *response = sink->response;
    if (response->body_length + n > sink->limit) {
        response->truncated = 1;
        return 0;  // stops the transfer
    }
    if (sink->fd >= 0 && response->status_seen >= 200 && response->status_seen < 300) {
        size_t done = 0;
        while (done < n) {
            ssize_t wrote = write(sink->fd, data + done, n - done);
            if (wrote < 0 && errno == EINTR) continue;
            if (wrote <= 0) return 0;
            done += (size_t)wrote;
        }
        response->body_length += n;
        return n;
    }
    if (response->body_length + n > sink->capacity) {
        size_t capacity = sink->capacity == 0 ? 16384 : sink->capacity;
        while (capacity < response->body_length + n) capacity *= 2;
        unsigned char *grown = realloc(response->body, capacity);
        if (grown == NULL) return 0;
        response->body = grown;
        sink->capacity = capacity;
    }
    memcpy(response->body + response->body_length, data, n);
    response->body_length += n;
    return n;
}

/// Keeps the status line's code (so a file receives only a successful body) and the ETag.
static size_t read_header(char *data, size_t size, size_t count, void *context) {
    ccurl_response *response = context;
    size_t n = size * count;
    if (n > 9 && strncmp(data, "HTTP/", 5) == 0) {
        const char *space = memchr(data, ' ', n);
        if (space != NULL && (size_t)(space - data) + 4 <= n) response->status_seen = strtol(space + 1, NULL, 10);
    } else if (n > 5 && strncasecmp(data, "etag:", 5) == 0) {
        size_t start = 5;
        while (start < n && (data[start] == ' ' || data[start] == '\t')) start++;
        size_t end = n;
        while (end > start && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' ')) end--;
        size_t length = end - start < sizeof(response->etag) - 1 ? end - start : sizeof(response->etag) - 1;
        memcpy(response->etag, data + start, length);
        response->etag[length] = 0;
    }
    return n;
}

int ccurl_perform(
    const char *method, const char *url, const char *sigv4, const char *credentials, const char *const *headers, size_t header_count,
    const unsigned char *body, size_t body_length, size_t response_limit, long timeout_ms, ccurl_response *response) {
    return ccurl_perform_files(
        method, url, sigv4, credentials, headers, header_count, body, -1, 0, body_length, -1, response_limit, timeout_ms, response);
}

int ccurl_perform_files(
    const char *method, const char *url, const char *sigv4, const char *credentials, const char *const *headers, size_t header_count,
    const unsigned char *body, int body_fd, long long body_offset, size_t body_length, int download_fd, size_t response_limit,
    long timeout_ms, ccurl_response *response) {
    memset(response, 0, sizeof(*response));
    if (ccurl_start() != 0) {
        strncpy(response->error, load_failure, sizeof(response->error) - 1);
        return -1;
    }
    CURL *curl = lib.curl_easy_init();
    if (curl == NULL) {
        strncpy(response->error, "curl_easy_init failed", sizeof(response->error) - 1);
        return -1;
    }
    char error[CURL_ERROR_SIZE] = {0};
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < header_count; i++) list = lib.curl_slist_append(list, headers[i]);
    upload source = {body, body_length, 0, body_fd, body_offset};
    download sink = {response, response_limit, 0, download_fd};

    lib.curl_easy_setopt(curl, CURLOPT_URL, url);
    lib.curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    lib.curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    lib.curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    lib.curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    lib.curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    lib.curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 10000 ? timeout_ms : 10000L);
    lib.curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4);
    lib.curl_easy_setopt(curl, CURLOPT_USERPWD, credentials);
    lib.curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    lib.curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
    lib.curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    lib.curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, read_header);
    lib.curl_easy_setopt(curl, CURLOPT_HEADERDATA, response);
    if (strcmp(method, "PUT") == 0) {
        lib.curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
        lib.curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
        lib.curl_easy_setopt(curl, CURLOPT_READDATA, &source);
        lib.curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body_length);
    } else if (strcmp(method, "HEAD") == 0) {
        lib.curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "POST") == 0) {
        lib.curl_easy_setopt(curl, CURLOPT_POST, 1L);
        lib.curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
        lib.curl_easy_setopt(curl, CURLOPT_READDATA, &source);
        lib.curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
    } else if (strcmp(method, "GET") != 0) {
        lib.curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode result = lib.curl_easy_perform(curl);
    if (result == CURLE_OK || (result == CURLE_WRITE_ERROR && response->truncated)) {
        lib.curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response->status);
    } else {
        strncpy(response->error, error[0] ? error : lib.curl_easy_strerror(result), sizeof(response->error) - 1);
    }
    lib.curl_slist_free_all(list);
    lib.curl_easy_cleanup(curl);
    return response->status == 0 ? -1 : 0;
}

void ccurl_response_free(ccurl_response *response) {
    free(response->body);
    response->body = NULL;
    response->body_length = 0;
}
