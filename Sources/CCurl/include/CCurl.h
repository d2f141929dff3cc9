// One HTTP exchange through libcurl (libcurl4-openssl-dev), signed with AWS Signature V4
// by libcurl itself (CURLOPT_AWS_SIGV4), for the S3 media store. libcurl verifies TLS with
// the system's trust store and follows no redirects.
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

#endif
