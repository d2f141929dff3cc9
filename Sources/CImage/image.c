#include "CImage.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vips/vips.h>

// libvips is loaded when an image is first worked on (dlopen), not when the server starts:
// it and the hundred-odd libraries it needs take about 25 MiB a process that shows no image
// never maps. Each function is called through a pointer of its own prototype (from
// libvips' headers, so a mismatch does not compile), variadic ones included.
#define CIMAGE_FUNCTIONS(X) \
    X(vips_init) \
    X(vips_concurrency_set) \
    X(vips_cache_set_max) \
    X(vips_cache_set_max_mem) \
    X(vips_cache_set_max_files) \
    X(vips_block_untrusted_set) \
    X(vips_operation_block_set) \
    X(vips_foreign_find_load_buffer) \
    X(vips_image_new_from_buffer) \
    X(vips_image_get_orientation_swap) \
    X(vips_image_get_width) \
    X(vips_image_get_height) \
    X(vips_image_get_bands) \
    X(vips_image_get_format) \
    X(vips_format_sizeof) \
    X(vips_thumbnail_buffer) \
    X(vips_image_hasalpha) \
    X(vips_array_double_newv) \
    X(vips_area_unref) \
    X(vips_flatten) \
    X(vips_colourspace) \
    X(vips_cast_uchar) \
    X(vips_jpegsave_buffer) \
    X(vips_pngsave_buffer) \
    X(vips_webpsave_buffer) \
    X(vips_heifsave_buffer) \
    X(vips_extract_band) \
    X(vips_image_write_to_memory) \
    X(vips_error_buffer_copy) \
    X(vips_xyz) \
    X(vips_bandmean) \
    X(vips_linear) \
    X(vips_image_copy_memory) \
    X(vips_draw_circle) \
    X(g_object_unref) \
    X(g_free)

#define POINTER(name) __typeof__(&name) name;
static struct {
    CIMAGE_FUNCTIONS(POINTER)
} lib;

static pthread_once_t started = PTHREAD_ONCE_INIT;
static int start_result = -1;
/// Why libvips could not be loaded, when it could not.
static char load_failure[256] = "libvips.so.42 was not loaded";

static void start_once(void) {
    void *handle = dlopen("libvips.so.42", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *error = dlerror();
        snprintf(load_failure, sizeof(load_failure), "%s", error != NULL ? error : "libvips.so.42 could not be loaded");
        return;
    }
#define RESOLVE(name) \
    if ((*(void **)&lib.name = dlsym(handle, #name)) == NULL) { \
        snprintf(load_failure, sizeof(load_failure), "libvips.so.42 has no %s", #name); \
        return; \
    }
    CIMAGE_FUNCTIONS(RESOLVE)
    if (lib.vips_init("catalog") != 0) {
        snprintf(load_failure, sizeof(load_failure), "vips_init failed");
        return;
    }
    lib.vips_concurrency_set(1);
    lib.vips_cache_set_max(0);
    lib.vips_cache_set_max_mem(0);
    lib.vips_cache_set_max_files(0);
    lib.vips_block_untrusted_set(TRUE);
    lib.vips_operation_block_set("VipsForeignLoad", TRUE);
    lib.vips_operation_block_set("VipsForeignLoadJpegBuffer", FALSE);
    lib.vips_operation_block_set("VipsForeignLoadPngBuffer", FALSE);
    lib.vips_operation_block_set("VipsForeignLoadWebpBuffer", FALSE);
    lib.vips_operation_block_set("VipsForeignLoadHeifBuffer", FALSE);
    start_result = 0;
}

int cimage_start(void) {
    pthread_once(&started, start_once);
    return start_result;
}

/// The type name of the loader that must read `format`.
static const char *loader(cimage_format format) {
    switch (format) {
    case CIMAGE_JPEG: return "VipsForeignLoadJpegBuffer";
    case CIMAGE_PNG: return "VipsForeignLoadPngBuffer";
    case CIMAGE_WEBP: return "VipsForeignLoadWebpBuffer";
    case CIMAGE_HEIC:
    case CIMAGE_AVIF: return "VipsForeignLoadHeifBuffer";
    }
    return NULL;
}

/// Whether libvips would read `buffer` with the loader of `format` (and nothing else).
static int loads_as(const void *buffer, size_t length, cimage_format format) {
    const char *expected = loader(format);
    const char *found = lib.vips_foreign_find_load_buffer(buffer, length);
    if (expected == NULL || found == NULL) return 0;
    return strcmp(found, expected) == 0;
}

int cimage_header(const void *buffer, size_t length, cimage_format format, int *width, int *height, int *bands, int *sample_bytes) {
    if (cimage_start() != 0 || !loads_as(buffer, length, format)) return -1;
    VipsImage *image = lib.vips_image_new_from_buffer(buffer, length, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (image == NULL) return -1;
    int swap = lib.vips_image_get_orientation_swap(image);
    *width = swap ? lib.vips_image_get_height(image) : lib.vips_image_get_width(image);
    *height = swap ? lib.vips_image_get_width(image) : lib.vips_image_get_height(image);
    *bands = lib.vips_image_get_bands(image);
    *sample_bytes = (int)lib.vips_format_sizeof(lib.vips_image_get_format(image));
    lib.g_object_unref(image);
    return 0;
}

/// `image` opened from `buffer` shrunk to fit `width` × `height` (never enlarged), upright,
/// in sRGB; cropped to fill when `cover`. A truncated input fails.
static VipsImage *thumbnail(const void *buffer, size_t length, cimage_format format, int width, int height, int cover) {
    if (cimage_start() != 0 || !loads_as(buffer, length, format)) return NULL;
    VipsImage *image = NULL;
    int failed = lib.vips_thumbnail_buffer(
        (void *)buffer, length, &image, width, "height", height, "size", VIPS_SIZE_DOWN, "crop",
        cover ? VIPS_INTERESTING_CENTRE : VIPS_INTERESTING_NONE, "option_string", "fail_on=truncated", NULL);
    return failed ? NULL : image;
}

/// `*image` without its alpha band, flattened onto white; 0 on success.
static int flatten(VipsImage **image) {
    if (!lib.vips_image_hasalpha(*image)) return 0;
    VipsImage *flat = NULL;
    VipsArrayDouble *white = lib.vips_array_double_newv(1, 255.0);
    int failed = lib.vips_flatten(*image, &flat, "background", white, NULL);
    lib.vips_area_unref(VIPS_AREA(white));
    if (failed) return -1;
    lib.g_object_unref(*image);
    *image = flat;
    return 0;
}

/// `*image` as 8-bit sRGB (3 bands, or 4 with alpha); 0 on success.
static int srgb8(VipsImage **image) {
    VipsImage *converted = NULL;
    if (lib.vips_colourspace(*image, &converted, VIPS_INTERPRETATION_sRGB, NULL)) return -1;
    lib.g_object_unref(*image);
    *image = converted;
    if (lib.vips_image_get_format(*image) == VIPS_FORMAT_UCHAR) return 0;
    VipsImage *cast = NULL;
    if (lib.vips_cast_uchar(*image, &cast, NULL)) return -1;
    lib.g_object_unref(*image);
    *image = cast;
    return 0;
}

static int save(VipsImage *image, cimage_format to, int quality, void **output, size_t *length) {
    switch (to) {
    case CIMAGE_JPEG:
        return lib.vips_jpegsave_buffer(image, output, length, "Q", quality, "strip", TRUE, "optimize_coding", TRUE, NULL);
    case CIMAGE_PNG:
        return lib.vips_pngsave_buffer(image, output, length, "strip", TRUE, "compression", 6, NULL);
    case CIMAGE_WEBP:
        return lib.vips_webpsave_buffer(image, output, length, "Q", quality, "strip", TRUE, NULL);
    case CIMAGE_HEIC:
        return lib.vips_heifsave_buffer(
            image, output, length, "Q", quality, "strip", TRUE, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_HEVC, NULL);
    case CIMAGE_AVIF:
        return lib.vips_heifsave_buffer(
            image, output, length, "Q", quality, "strip", TRUE, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1, "effort", 2, NULL);
    }
    return -1;
}

int cimage_render(
    const void *buffer, size_t length, cimage_format from, int width, int height, int cover, cimage_format to, int quality,
    void **output, size_t *output_length, int *output_width, int *output_height) {
    VipsImage *image = thumbnail(buffer, length, from, width, height, cover);
    if (image == NULL) return -1;
    int failed = srgb8(&image);
    if (!failed && to == CIMAGE_JPEG) failed = flatten(&image);
    if (!failed) failed = save(image, to, quality, output, output_length);
    if (!failed) {
        *output_width = lib.vips_image_get_width(image);
        *output_height = lib.vips_image_get_height(image);
    }
    lib.g_object_unref(image);
    return failed ? -1 : 0;
}

int cimage_pixels(const void *buffer, size_t length, cimage_format format, int side, unsigned char *pixels, int *width, int *height) {
    VipsImage *image = thumbnail(buffer, length, format, side, side, 0);
    if (image == NULL) return -1;
    int failed = srgb8(&image) || flatten(&image);
    if (!failed && lib.vips_image_get_bands(image) > 3) {
        VipsImage *three = NULL;
        failed = lib.vips_extract_band(image, &three, 0, "n", 3, NULL);
        if (!failed) {
            lib.g_object_unref(image);
            image = three;
        }
    }
    if (!failed && lib.vips_image_get_bands(image) != 3) failed = -1;
    size_t size = 0;
    void *memory = failed ? NULL : lib.vips_image_write_to_memory(image, &size);
    if (memory != NULL) {
        *width = lib.vips_image_get_width(image);
        *height = lib.vips_image_get_height(image);
        if (size == (size_t)*width * (size_t)*height * 3 && *width <= side && *height <= side) {
            memcpy(pixels, memory, size);
        } else {
            failed = -1;
        }
        lib.g_free(memory);
    } else {
        failed = -1;
    }
    lib.g_object_unref(image);
    return failed ? -1 : 0;
}

int cimage_artwork(
    int width, int height, const unsigned char from[3], const unsigned char to[3], const int *circles, int circle_count,
    const unsigned char *colors, int color_count, void **output, size_t *output_length) {
    if (cimage_start() != 0 || width < 1 || height < 1 || color_count < 1 || colors == NULL) return -1;
    VipsImage *xy = NULL, *mean = NULL, *gradient = NULL, *picture = NULL;
    int failed = lib.vips_xyz(&xy, width, height, NULL) || lib.vips_bandmean(xy, &mean, NULL);
    if (!failed) {
        // (x + y) / 2 runs from 0 to (width + height) / 2: each band goes from `from` to `to`.
        double scale[3], offset[3];
        for (int band = 0; band < 3; band++) {
            scale[band] = ((double)to[band] - (double)from[band]) * 2.0 / (double)(width + height);
            offset[band] = from[band];
        }
        failed = lib.vips_linear(mean, &gradient, scale, offset, 3, "uchar", TRUE, NULL);
    }
    if (!failed) {
        picture = lib.vips_image_copy_memory(gradient);
        failed = picture == NULL;
    }
    for (int i = 0; !failed && i < circle_count; i++) {
        const int *circle = circles + 4 * i;
        int color = (int)((unsigned)circle[3] % (unsigned)color_count);
        double ink[3] = {colors[3 * color], colors[3 * color + 1], colors[3 * color + 2]};
        failed = lib.vips_draw_circle(picture, ink, 3, circle[0], circle[1], circle[2], "fill", TRUE, NULL);
    }
    if (!failed) failed = lib.vips_jpegsave_buffer(picture, output, output_length, "Q", 90, "strip", TRUE, "optimize_coding", TRUE, NULL);
    if (xy) lib.g_object_unref(xy);
    if (mean) lib.g_object_unref(mean);
    if (gradient) lib.g_object_unref(gradient);
    if (picture) lib.g_object_unref(picture);
    return failed ? -1 : 0;
}

char *cimage_error(void) {
    if (start_result != 0) return strdup(load_failure);
    char *message = lib.vips_error_buffer_copy();
    char *copy = message != NULL ? strdup(message) : NULL;
    lib.g_free(message);
    return copy;
}

void cimage_free(void *pointer) {
    if (pointer != NULL && start_result == 0) lib.g_free(pointer);
}
