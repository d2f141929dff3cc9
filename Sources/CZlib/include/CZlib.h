// zlib (zlib1g-dev) as the HTTP server uses it: gzip bodies, with the deflate state each
// thread keeps (zlib's init functions are macros Swift cannot call).
#ifndef CZLIB_H
#define CZLIB_H
#include <stddef.h>
#include <stdint.h>

/// The most bytes gzip of `length` bytes takes (zlib's deflateBound with the gzip header).
size_t czlib_gzip_bound(size_t length);

/// Writes the gzip (RFC 1952) of `length` bytes at `input` into `output`, which holds
/// `capacity` bytes, at compression `level` (1 to 9), on the calling thread's deflate
/// state (made at its first use, about 256 KiB, and reset for each call).
/// Returns the bytes written; 0 on failure (no memory, or `capacity` too small).
size_t czlib_gzip(const uint8_t *input, size_t length, uint8_t *output, size_t capacity, int level);
#endif
