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

/// Releases an answer's body.
void ccurl_response_free(ccurl_response *response);

#endif
