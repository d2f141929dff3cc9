#include "CCurl.h"

// Plain prototypes (curl's type-checking macros would take `lib.curl_easy_setopt(` for themselves).
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
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
    X(curl_easy_cleanup) \
    X(curl_multi_init) \
    X(curl_multi_setopt) \
    X(curl_multi_add_handle) \
    X(curl_multi_remove_handle) \
    X(curl_multi_perform) \
    X(curl_multi_poll) \
    X(curl_multi_wakeup) \
    X(curl_multi_info_read) \
    X(curl_multi_cleanup)

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

// MARK: Many exchanges at once (webhook deliveries)

typedef struct transfer {
    CURL *easy;
    struct curl_slist *headers;
    struct ccurl_sender *sender;
    ccurl_outcome outcome;
    size_t limit;
    size_t capacity;
    int plain_http;
    struct transfer *next;
} transfer;

struct ccurl_sender {
    CURLM *multi;
    ccurl_admit_fn admit;
    void *admit_context;
    char *ca_file;
    /// Every transfer added and not yet handed back.
    transfer *transfers;
};

/// Keeps at most `limit` bytes of the answer; past that the transfer stops (the status is
/// known by then).
static size_t keep_body(char *data, size_t size, size_t count, void *context) {
    transfer *t = context;
    size_t n = size * count;
    ccurl_outcome *outcome = &t->outcome;
    size_t room = t->limit - outcome->body_length;
    size_t kept = n < room ? n : room;
    if (kept > 0) {
        if (outcome->body_length + kept > t->capacity) {
            size_t capacity = t->capacity == 0 ? 1024 : t->capacity;
            while (capacity < outcome->body_length + kept) capacity *= 2;
            unsigned char *grown = realloc(outcome->body, capacity);
            if (grown == NULL) return 0;
            outcome->body = grown;
            t->capacity = capacity;
        }
        memcpy(outcome->body + outcome->body_length, data, kept);
        outcome->body_length += kept;
    }
    if (kept < n) {
        outcome->truncated = 1;
        return 0;
    }
    return n;
}

/// Every socket a transfer would connect through passes the sender's check of its address
/// first (after name resolution, for each address tried): a refused one is never made.
static curl_socket_t open_checked(void *context, curlsocktype purpose, struct curl_sockaddr *address) {
    transfer *t = context;
    (void)purpose;
    int port = 0;
    const unsigned char *bytes = NULL;
    if (address->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&address->addr;
        bytes = (const unsigned char *)&in->sin_addr;
        port = ntohs(in->sin_port);
    } else if (address->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&address->addr;
        bytes = (const unsigned char *)&in6->sin6_addr;
        port = ntohs(in6->sin6_port);
    }
    char reason[200] = "the address is not an IPv4 or IPv6 address";
    if (bytes == NULL || t->sender->admit(t->sender->admit_context, address->family, bytes, port, t->plain_http, reason, sizeof(reason)) != 0) {
        t->outcome.refused = 1;
        snprintf(t->outcome.error, sizeof(t->outcome.error), "%s", reason);
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

ccurl_sender *ccurl_sender_new(ccurl_admit_fn admit, void *admit_context, const char *ca_file, long max_connections) {
    if (ccurl_start() != 0) return NULL;
    ccurl_sender *sender = calloc(1, sizeof(*sender));
    if (sender == NULL) return NULL;
    sender->multi = lib.curl_multi_init();
    if (sender->multi == NULL) {
        free(sender);
        return NULL;
    }
    lib.curl_multi_setopt(sender->multi, CURLMOPT_MAXCONNECTS, max_connections);
    sender->admit = admit;
    sender->admit_context = admit_context;
    sender->ca_file = ca_file != NULL && ca_file[0] ? strdup(ca_file) : NULL;
    return sender;
}

const char *ccurl_load_failure(void) {
    return load_failure;
}

int ccurl_sender_add(
    ccurl_sender *sender, long long tag, const char *url, const char *const *headers, size_t header_count, const unsigned char *body,
    size_t body_length, size_t response_limit, long timeout_ms) {
    transfer *t = calloc(1, sizeof(*t));
    if (t == NULL) return -1;
    t->easy = lib.curl_easy_init();
    if (t->easy == NULL) {
        free(t);
        return -1;
    }
    t->sender = sender;
    t->limit = response_limit;
    t->outcome.tag = tag;
    t->plain_http = strncasecmp(url, "http:", 5) == 0;
    for (size_t i = 0; i < header_count; i++) t->headers = lib.curl_slist_append(t->headers, headers[i]);
    CURL *curl = t->easy;
    lib.curl_easy_setopt(curl, CURLOPT_URL, url);
    lib.curl_easy_setopt(curl, CURLOPT_PRIVATE, t);
    lib.curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    lib.curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    // What keeps deliveries where they may go must take, or the transfer is not made.
    int refused = lib.curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK
        // No proxy from the environment: the address checked must be the one connected to.
        || lib.curl_easy_setopt(curl, CURLOPT_PROXY, "") != CURLE_OK || lib.curl_easy_setopt(curl, CURLOPT_NOPROXY, "*") != CURLE_OK
        || lib.curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, open_checked) != CURLE_OK
        || lib.curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, t) != CURLE_OK || lib.curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK;
    lib.curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    lib.curl_easy_setopt(curl, CURLOPT_HTTPHEADER, t->headers);
    lib.curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
    lib.curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, body_length > 0 ? (const char *)body : "");
    lib.curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, keep_body);
    lib.curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
    if (sender->ca_file != NULL) lib.curl_easy_setopt(curl, CURLOPT_CAINFO, sender->ca_file);
    if (refused || lib.curl_multi_add_handle(sender->multi, curl) != CURLM_OK) {
        lib.curl_slist_free_all(t->headers);
        lib.curl_easy_cleanup(curl);
        free(t);
        return -1;
    }
    t->next = sender->transfers;
    sender->transfers = t;
    return 0;
}

int ccurl_sender_run(ccurl_sender *sender, int wait_ms) {
    int running = 0;
    lib.curl_multi_perform(sender->multi, &running);
    if (wait_ms > 0) {
        int ready = 0;
        lib.curl_multi_poll(sender->multi, NULL, 0, wait_ms, &ready);
        lib.curl_multi_perform(sender->multi, &running);
    }
    return running;
}

int ccurl_sender_next(ccurl_sender *sender, ccurl_outcome *outcome) {
    int left = 0;
    CURLMsg *message;
    while ((message = lib.curl_multi_info_read(sender->multi, &left)) != NULL) {
        if (message->msg != CURLMSG_DONE) continue;
        CURL *curl = message->easy_handle;
        CURLcode result = message->data.result;
        transfer *t = NULL;
        lib.curl_easy_getinfo(curl, CURLINFO_PRIVATE, (char **)&t);
        if (t == NULL) continue;
        if (result == CURLE_OK || (result == CURLE_WRITE_ERROR && t->outcome.truncated)) {
            lib.curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &t->outcome.status);
            // An address refused before another was connected to is no failure of this one.
            t->outcome.refused = 0;
            t->outcome.error[0] = 0;
        } else if (!t->outcome.refused || result != CURLE_COULDNT_CONNECT) {
            snprintf(t->outcome.error, sizeof(t->outcome.error), "%s", lib.curl_easy_strerror(result));
        }
        curl_off_t total = 0;
        lib.curl_easy_getinfo(curl, CURLINFO_TOTAL_TIME_T, &total);
        t->outcome.duration_us = (long long)total;
        lib.curl_multi_remove_handle(sender->multi, curl);
        lib.curl_easy_cleanup(curl);
        lib.curl_slist_free_all(t->headers);
        for (transfer **link = &sender->transfers; *link != NULL; link = &(*link)->next) {
            if (*link == t) {
                *link = t->next;
                break;
            }
        }
        *outcome = t->outcome;
        free(t);
        return 1;
    }
    return 0;
}

void ccurl_sender_wakeup(ccurl_sender *sender) {
    lib.curl_multi_wakeup(sender->multi);
}

void ccurl_sender_free(ccurl_sender *sender) {
    if (sender == NULL) return;
    for (transfer *t = sender->transfers; t != NULL;) {
        transfer *next = t->next;
        lib.curl_multi_remove_handle(sender->multi, t->easy);
        lib.curl_easy_cleanup(t->easy);
        lib.curl_slist_free_all(t->headers);
        free(t->outcome.body);
        free(t);
        t = next;
    }
    lib.curl_multi_cleanup(sender->multi);
    free(sender->ca_file);
    free(sender);
}

void ccurl_outcome_free(ccurl_outcome *outcome) {
    free(outcome->body);
    outcome->body = NULL;
    outcome->body_length = 0;
}
