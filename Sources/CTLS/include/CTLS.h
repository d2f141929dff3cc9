// OpenSSL's libssl (3.x, from libssl-dev) as Swift sees it: the server's TLS contexts
// with Mozilla's "intermediate" profile, rotating session ticket keys, and the few
// macros Swift cannot call.
#ifndef CTLS_H
#define CTLS_H
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/// A server context with Mozilla's "intermediate" configuration (v5.7): TLS 1.2 and 1.3,
/// its cipher suites, order and groups (the server's order, but ChaCha20 for clients that
/// prefer it), no compression or renegotiation, ALPN `http/1.1` only, session tickets
/// under the rotating keys below (sessions live an hour) and no server-side session
/// cache, no early data, no passphrase prompts, and modes for non-blocking use with
/// partial writes and moving buffers. NULL when OpenSSL fails.
SSL_CTX *ctls_server_context(void);

/// A client context for probes and tests: TLS 1.2 or later, ALPN `http/1.1`, verifying
/// the peer against `ca_file` when it is not NULL (and not verifying at all when it is).
SSL_CTX *ctls_client_context(const char *ca_file);

/// Sets the name a client sends in SNI and checks in the certificate (a DNS name or an IP
/// address); 1 on success.
int ctls_set_server_name(SSL *ssl, const char *name);

/// Replaces the session ticket key in use with a new random one; the one it replaces still
/// opens tickets (which are then renewed) until the next rotation. Keys also rotate on
/// their own every hour (the sessions' lifetime), checked at each handshake.
void ctls_rotate_ticket_keys(void);

/// The reason of the oldest error on this thread's OpenSSL error queue (or "unknown")
/// and its library reason code, then clears the queue. Never contains key material.
const char *ctls_take_error(int *reason);

/// The negotiated ALPN protocol written into `buffer` (NUL-terminated, empty when none).
void ctls_alpn(const SSL *ssl, char *buffer, size_t size);

/// When the context's certificate stops being valid (notAfter), in seconds since 1970; 0 when unknown.
long long ctls_certificate_not_after(const SSL_CTX *context);

/// The `SSL_R_HTTP_REQUEST` reason: a plaintext HTTP request arrived instead of a ClientHello.
int ctls_reason_http_request(void);
#endif
