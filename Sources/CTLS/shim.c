#include "CTLS.h"
#include <arpa/inet.h>
#include <openssl/core_names.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

// Mozilla's "intermediate" configuration, version 5.7 (the one sslyze checks against).
static const char *intermediate_ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
static const char *intermediate_ciphersuites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
static const char *intermediate_groups = "X25519:prime256v1:secp384r1";
static const unsigned char http11[] = "\x08http/1.1";

// MARK: Session ticket keys

typedef struct {
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char hmac[32];
} ticket_key;

static pthread_mutex_t ticket_lock = PTHREAD_MUTEX_INITIALIZER;
static ticket_key ticket_keys[2];  // [0] seals new tickets; [1] the one before, still opens them
static int ticket_key_count = 0;
static time_t ticket_rotated_at = 0;
// Seconds between rotations, and the lifetime of sessions and the tickets that carry them.
static const long ticket_lifetime = 3600;

static time_t monotonic_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec;
}

// Called with ticket_lock held.
static int rotate_locked(void) {
    ticket_key fresh;
    if (RAND_bytes((unsigned char *)&fresh, sizeof fresh) != 1) return 0;
    if (ticket_key_count > 0) ticket_keys[1] = ticket_keys[0];
    ticket_keys[0] = fresh;
    OPENSSL_cleanse(&fresh, sizeof fresh);
    ticket_key_count = ticket_key_count == 0 ? 1 : 2;
    ticket_rotated_at = monotonic_seconds();
    return 1;
}

void ctls_rotate_ticket_keys(void) {
    pthread_mutex_lock(&ticket_lock);
    rotate_locked();
    pthread_mutex_unlock(&ticket_lock);
}

static int set_mac_key(EVP_MAC_CTX *mac, unsigned char *key) {
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key, 32),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    return EVP_MAC_CTX_set_params(mac, params);
}

// Seals tickets with the current key and opens them with the current or the previous one
// (asking for a renewed ticket then); a ticket under an older key means a full handshake.
static int ticket_callback(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cipher, EVP_MAC_CTX *mac, int seal) {
    (void)ssl;
    ticket_key key;
    int found = -1;
    pthread_mutex_lock(&ticket_lock);
    if (ticket_key_count == 0 || monotonic_seconds() - ticket_rotated_at >= ticket_lifetime) {
        if (!rotate_locked() && ticket_key_count == 0) {
            pthread_mutex_unlock(&ticket_lock);
            return -1;
        }
    }
    if (seal) {
        found = 0;
    } else {
        for (int index = 0; index < ticket_key_count; index++) {
            if (memcmp(name, ticket_keys[index].name, 16) == 0) {
                found = index;
                break;
            }
        }
    }
    if (found >= 0) key = ticket_keys[found];
    pthread_mutex_unlock(&ticket_lock);
    if (found < 0) return 0;
    int result;
    if (seal) {
        memcpy(name, key.name, 16);
        // A failure to seal only means no ticket this time (0), not a failed handshake.
        result = RAND_bytes(iv, 16) == 1 && EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, key.aes, iv) == 1
            && set_mac_key(mac, key.hmac) == 1 ? 1 : 0;
    } else {
        result = set_mac_key(mac, key.hmac) == 1 && EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, key.aes, iv) == 1
            ? (found == 0 ? 1 : 2) : -1;
    }
    OPENSSL_cleanse(&key, sizeof key);
    return result;
}

// MARK: Contexts

static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *out_length, const unsigned char *in, unsigned int in_length, void *arg) {
    (void)ssl;
    (void)arg;
    unsigned char *chosen = NULL;
    if (SSL_select_next_proto(&chosen, out_length, http11, sizeof http11 - 1, in, in_length) != OPENSSL_NPN_NEGOTIATED) {
        // RFC 7301 §3.2: a client offering only protocols we do not speak gets no_application_protocol.
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

// An encrypted private key fails to load instead of prompting on a terminal.
static int no_passphrase(char *buffer, int size, int writing, void *arg) {
    (void)buffer;
    (void)size;
    (void)writing;
    (void)arg;
    return 0;
}

SSL_CTX *ctls_server_context(void) {
    SSL_CTX *context = SSL_CTX_new(TLS_server_method());
    if (context == NULL) return NULL;
    if (SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) != 1 || SSL_CTX_set_max_proto_version(context, TLS1_3_VERSION) != 1
        || SSL_CTX_set_cipher_list(context, intermediate_ciphers) != 1 || SSL_CTX_set_ciphersuites(context, intermediate_ciphersuites) != 1
        || SSL_CTX_set1_groups_list(context, intermediate_groups) != 1 || SSL_CTX_set_dh_auto(context, 1) != 1
        || SSL_CTX_set_tlsext_ticket_key_evp_cb(context, ticket_callback) != 1) {
        SSL_CTX_free(context);
        return NULL;
    }
    // The profile's own order is enforced (testssl.sh rates a client-chosen order HIGH), except
    // that a client preferring ChaCha20 (no AES hardware, the reason the profile leaves the
    // choice to clients) gets it.
    SSL_CTX_set_options(context, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF
                                     | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
    SSL_CTX_clear_options(context, SSL_OP_NO_TICKET);
    SSL_CTX_set_mode(context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_read_ahead(context, 1);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_timeout(context, ticket_lifetime);
    SSL_CTX_set_max_early_data(context, 0);
    SSL_CTX_set_default_passwd_cb(context, no_passphrase);
    SSL_CTX_set_alpn_select_cb(context, select_alpn, NULL);
    return context;
}

SSL_CTX *ctls_client_context(const char *ca_file) {
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (context == NULL) return NULL;
    if (SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) != 1 || SSL_CTX_set_alpn_protos(context, http11, sizeof http11 - 1) != 0
        || (ca_file != NULL && SSL_CTX_load_verify_locations(context, ca_file, NULL) != 1)) {
        SSL_CTX_free(context);
        return NULL;
    }
    SSL_CTX_set_verify(context, ca_file != NULL ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_mode(context, SSL_MODE_AUTO_RETRY);
    return context;
}

int ctls_set_server_name(SSL *ssl, const char *name) {
    unsigned char address[16];
    if (inet_pton(AF_INET, name, address) == 1 || inet_pton(AF_INET6, name, address) == 1) {
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
    }
    return SSL_set_tlsext_host_name(ssl, name) == 1 && SSL_set1_host(ssl, name) == 1;
}

const char *ctls_take_error(int *reason) {
    unsigned long error = ERR_get_error();
    ERR_clear_error();
    *reason = error == 0 ? 0 : ERR_GET_REASON(error);
    const char *text = error == 0 ? NULL : ERR_reason_error_string(error);
    return text != NULL ? text : "unknown error";
}

void ctls_alpn(const SSL *ssl, char *buffer, size_t size) {
    const unsigned char *protocol = NULL;
    unsigned int length = 0;
    SSL_get0_alpn_selected(ssl, &protocol, &length);
    if (size == 0) return;
    if (length >= size) length = (unsigned int)size - 1;
    if (length > 0) memcpy(buffer, protocol, length);
    buffer[length] = 0;
}

long long ctls_certificate_not_after(const SSL_CTX *context) {
    X509 *certificate = SSL_CTX_get0_certificate(context);
    struct tm parts;
    if (certificate == NULL || ASN1_TIME_to_tm(X509_get0_notAfter(certificate), &parts) != 1) return 0;
    return (long long)timegm(&parts);
}

int ctls_reason_http_request(void) { return SSL_R_HTTP_REQUEST; }
