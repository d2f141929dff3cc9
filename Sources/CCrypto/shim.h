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
#include <openssl/sha.h>

/// `EVP_PKEY_PUBLIC_KEY`, a macro Swift cannot import: the selection of a public key
/// (with its parameters) for `EVP_PKEY_fromdata`.
static const int ccrypto_public_key_selection = EVP_PKEY_PUBLIC_KEY;
