// OpenSSL's libcrypto (3.x, from libssl-dev) as Swift sees it: hashing, random bytes,
// public-key signature checks and constant-time comparison.
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>

/// Builds a public key of `type` ("RSA" or "EC") from `params`; NULL on failure.
static inline EVP_PKEY *ccrypto_public_key_from_params(const char *type, OSSL_PARAM_BLD *builder) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(builder);
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params != NULL && context != NULL && EVP_PKEY_fromdata_init(context) == 1) {
        if (EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    OSSL_PARAM_free(params);
    if (key != NULL) {
        EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
        int valid = check != NULL && EVP_PKEY_public_check(check) == 1;
        EVP_PKEY_CTX_free(check);
        if (!valid) {
            EVP_PKEY_free(key);
            key = NULL;
        }
    }
    return key;
}

/// An RSA public key from its big-endian modulus and exponent (with C string parameter
/// names that outlive the builder, which keeps them by reference); NULL when invalid.
static inline EVP_PKEY *ccrypto_rsa_public_key(const unsigned char *n, size_t n_length, const unsigned char *e, size_t e_length) {
    BIGNUM *modulus = BN_bin2bn(n, (int)n_length, NULL), *exponent = BN_bin2bn(e, (int)e_length, NULL);
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    EVP_PKEY *key = NULL;
    if (modulus != NULL && exponent != NULL && builder != NULL && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, modulus) == 1
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, exponent) == 1) {
        key = ccrypto_public_key_from_params("RSA", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    BN_free(modulus);
    BN_free(exponent);
    return key;
}

/// A P-256 public key from its uncompressed point (0x04 ‖ x ‖ y); NULL when invalid or
/// not on the curve.
static inline EVP_PKEY *ccrypto_p256_public_key(const unsigned char *point, size_t length) {
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    EVP_PKEY *key = NULL;
    if (builder != NULL && OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, SN_X9_62_prime256v1, 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, length) == 1) {
        key = ccrypto_public_key_from_params("EC", builder);
    }
    OSSL_PARAM_BLD_free(builder);
    return key;
}

/// The SHA-256 of `length` bytes at `data` into `digest` (32 bytes), under `algorithm`
/// (fetched once by the caller), on a digest context the calling thread keeps: no
/// context is made and freed per call. Returns 1, or 0 on failure.
static inline int ccrypto_sha256(const EVP_MD *algorithm, const void *data, size_t length, unsigned char *digest) {
    static __thread EVP_MD_CTX *context;
    if (context == NULL && (context = EVP_MD_CTX_new()) == NULL) return 0;
    unsigned int written = 0;
    return EVP_DigestInit_ex2(context, algorithm, NULL) == 1 && EVP_DigestUpdate(context, data, length) == 1
        && EVP_DigestFinal_ex(context, digest, &written) == 1 && written == 32;
}
