#include "CZlib.h"
#include <stdlib.h>
#include <zlib.h>

size_t czlib_gzip_bound(size_t length) {
    // deflateBound's conservative figure for these parameters, plus gzip's 18-byte frame.
    return length + (length >> 12) + (length >> 14) + (length >> 25) + 13 + 18;
}

static __thread z_stream *thread_stream;
static __thread int thread_level;

size_t czlib_gzip(const uint8_t *input, size_t length, uint8_t *output, size_t capacity, int level) {
    // zlib counts in 32-bit unsigned integers.
    if (length > 0xFFFFFFFFu || capacity > 0xFFFFFFFFu) return 0;
    if (thread_stream == NULL || thread_level != level) {
        if (thread_stream != NULL) {
            deflateEnd(thread_stream);
        } else {
            thread_stream = calloc(1, sizeof(z_stream));
            if (thread_stream == NULL) return 0;
        }
        // windowBits 15 + 16: a gzip wrapper; memLevel 8: zlib's default.
        if (deflateInit2(thread_stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            free(thread_stream);
            thread_stream = NULL;
            return 0;
        }
        thread_level = level;
    } else if (deflateReset(thread_stream) != Z_OK) {
        return 0;
    }
    z_stream *stream = thread_stream;
    stream->next_in = (Bytef *)input;
    stream->avail_in = (uInt)length;
    stream->next_out = output;
    stream->avail_out = (uInt)capacity;
    int result = deflate(stream, Z_FINISH);
    if (result != Z_STREAM_END) return 0;
    return capacity - stream->avail_out;
}
