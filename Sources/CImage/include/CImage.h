// The image work the catalog asks of libvips, behind a small C interface free of glib's
// types: reading a header, making a rendition (the stored original, a derivative) and a
// small picture's pixels (for a BlurHash). Only the four loaders of the accepted formats
// can run; every other loader (SVG, PDF, TIFF, …) and every "untrusted" one is blocked.
#ifndef CIMAGE_H
#define CIMAGE_H

#include <stddef.h>

/// The formats the catalog reads and writes.
typedef enum {
    CIMAGE_JPEG = 1,
    CIMAGE_PNG = 2,
    CIMAGE_WEBP = 3,
    CIMAGE_HEIC = 4,
    CIMAGE_AVIF = 5,
} cimage_format;

/// Loads libvips (libvips.so.42, with dlopen: a process that never works on an image never
/// maps it) and starts it, once for the process: one thread per operation (the caller's pool
/// sets the parallelism), no operation cache, and only the accepted loaders. 0 on success;
/// ``cimage_error`` then says why not.
int cimage_start(void);

/// The size of the image in `buffer` as shown (after its EXIF orientation), its bands and
/// the bytes of one sample, read from its header only, by the loader of `format` (nothing
/// else may read it). 0 on success.
int cimage_header(const void *buffer, size_t length, cimage_format format, int *width, int *height, int *bands, int *sample_bytes);

/// A rendition of the image in `buffer` (read by the loader of `from`): upright, in sRGB,
/// no larger than `width` × `height` (never enlarged), cropped to fill both when `cover`,
/// saved as `to` at `quality` (1…100) without metadata, flattened onto white for formats
/// without alpha. A truncated or corrupt input fails. On success (0), `*output` holds
/// `*output_length` bytes to release with ``cimage_free``, and `*output_width` and
/// `*output_height` its size.
int cimage_render(
    const void *buffer, size_t length, cimage_format from, int width, int height, int cover, cimage_format to, int quality,
    void **output, size_t *output_length, int *output_width, int *output_height);

/// The image in `buffer` shrunk to fit `side` × `side`, as sRGB bytes (3 per pixel, rows
/// one after another) in `pixels` (room for `side` × `side` × 3). 0 on success.
int cimage_pixels(const void *buffer, size_t length, cimage_format format, int side, unsigned char *pixels, int *width, int *height);

/// A picture of `width` × `height` made from numbers alone (the demo catalog's artwork): a
/// diagonal gradient from `from` to `to` (RGB), with `circle_count` discs drawn on it, each
/// four numbers in `circles` (centre x, centre y, radius, and an index into `colors`, RGB
/// triples), saved as a JPEG. 0 on success, with `*output` as for ``cimage_render``.
int cimage_artwork(
    int width, int height, const unsigned char from[3], const unsigned char to[3], const int *circles, int circle_count,
    const unsigned char *colors, int color_count, void **output, size_t *output_length);

/// The last error of libvips (or why it could not be loaded), to release with `free`, or NULL.
char *cimage_error(void);

/// Releases what libvips allocated for the caller (a rendition's bytes).
void cimage_free(void *pointer);

#endif
