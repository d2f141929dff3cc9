// HTTP through libcurl (libcurl4-openssl-dev): one exchange, signed with AWS Signature V4
// by libcurl itself (CURLOPT_AWS_SIGV4), for the S3 media store; and many POSTs at once
// (the multi interface) for webhook deliveries, each socket's address checked first.
// libcurl verifies TLS with the system's trust store and follows no redirects.
#ifndef CCURL_H
#define CCURL_H

#include <stddef.h>

/// What an exchange brought back.
typedef struct {
    /// The HTTP status; 0 when no answer came (then `error` says why).
    long status;
    /// The body (at most the limit asked for), to release with ``ccurl_response_free``.
    unsigned char *body;
    size_t body_length;
    /// Whether the body was longer than the limit (and cut there).
    int truncated;
    char error[256];
    /// The answer's `ETag`, as sent (quotes included); empty when it had none.
    char etag[160];
    /// The status of the last status line read (of an interim answer, then the final one).
    long status_seen;
} ccurl_response;

/// Loads libcurl (libcurl.so.4, with dlopen) and starts it, once for the process. 0 on success.
int ccurl_start(void);

/// Sends `method` to `url` with `body` (may be NULL) and the `header_count` header lines
/// in `headers` ("Name: value"), signed for `sigv4` (such as "aws:amz:us-east-1:s3") with
/// `credentials` ("key:secret"), giving up after `timeout_ms`. Reads at most
/// `response_limit` bytes of the answer's body. 0 when an answer came (any status).
int ccurl_perform(
    const char *method, const char *url, const char *sigv4, const char *credentials, const char *const *headers, size_t header_count,
    const unsigned char *body, size_t body_length, size_t response_limit, long timeout_ms, ccurl_response *response);

/// As ``ccurl_perform``, with the body read from `body_fd` at `body_offset` when it is not
/// -1 (`body_length` bytes; `body` is then unused), and a successful answer's body written
/// to `download_fd` when it is not -1 (another answer's body is kept in memory, as always).
/// `POST` sends the body too.
int ccurl_perform_files(
    const char *method, const char *url, const char *sigv4, const char *credentials, const char *const *headers, size_t header_count,
    const unsigned char *body, int body_fd, long long body_offset, size_t body_length, int download_fd, size_t response_limit,
    long timeout_ms, ccurl_response *response);

/// Releases an answer's body.
void ccurl_response_free(ccurl_response *response);

/// Why libcurl could not be loaded, when ``ccurl_start`` failed.
const char *ccurl_load_failure(void);

/// Decides whether a connection may be made to an address (`family` AF_INET with 4 bytes
/// or AF_INET6 with 16 at `address`, and `port`), for a plain `http` URL when
/// `plain_http`; 0 allows it, anything else refuses it after writing why into `reason`.
typedef int (*ccurl_admit_fn)(void *context, int family, const unsigned char *address, int port, int plain_http, char *reason, size_t reason_size);

/// Many `POST`s at once on one thread (libcurl's multi interface), sharing a cache of
/// connections, each socket's address checked by an admission function before it is made.
/// Not thread-safe but for ``ccurl_sender_wakeup``.
typedef struct ccurl_sender ccurl_sender;

/// What became of one `POST`.
typedef struct {
    /// The tag it was added with.
    long long tag;
    /// The answer's status; 0 when none came (then `error` says why).
    long status;
    /// The start of the answer's body (at most the limit), to release with ``ccurl_outcome_free``.
    unsigned char *body;
    size_t body_length;
    /// Whether the body was longer (and the exchange stopped there).
    int truncated;
    /// How long it took, in microseconds.
    long long duration_us;
    /// Whether the admission function refused every address (`error` says why).
    int refused;
    char error[256];
} ccurl_outcome;

/// A sender checking addresses with `admit` (given `admit_context`), trusting the CA
/// bundle `ca_file` (may be NULL) besides the system's, caching at most `max_connections`
/// idle connections. NULL when libcurl cannot be loaded (``ccurl_load_failure``).
ccurl_sender *ccurl_sender_new(ccurl_admit_fn admit, void *admit_context, const char *ca_file, long max_connections);

/// Starts a `POST` of `body` to `url` with the header lines `headers`, following no
/// redirect, through no proxy, giving up after `timeout_ms`, keeping at most
/// `response_limit` bytes of the answer. 0 when it was added.
int ccurl_sender_add(
    ccurl_sender *sender, long long tag, const char *url, const char *const *headers, size_t header_count, const unsigned char *body,
    size_t body_length, size_t response_limit, long timeout_ms);

/// Moves the transfers on, waiting at most `wait_ms` for one of them (or a wakeup).
/// Returns how many are still running.
int ccurl_sender_run(ccurl_sender *sender, int wait_ms);

/// Hands back one finished transfer's outcome: 1 when one was written to `outcome`.
int ccurl_sender_next(ccurl_sender *sender, ccurl_outcome *outcome);

/// Ends a wait in ``ccurl_sender_run`` early (from any thread).
void ccurl_sender_wakeup(ccurl_sender *sender);

/// Ends every transfer and releases the sender.
void ccurl_sender_free(ccurl_sender *sender);

/// Releases an outcome's body.
void ccurl_outcome_free(ccurl_outcome *outcome);

#endif
