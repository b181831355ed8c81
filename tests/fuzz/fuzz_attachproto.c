/* fuzz_attachproto: the frames of `gjob attach` and its detach keys (attachproto.c). The
 * first byte splits the rest: the low 4 bits are the length of the detach key spec that
 * follows (as text); the remaining bytes are both a stream of frames and the user's input.
 *
 * Invariants: a parsed frame lies inside the buffer, is at least a header long and its
 * payload at most ATTACH_MAX_PAYLOAD; a stream that parses to its end parses the same
 * frame by frame after any split; a window size decodes only from 4 bytes, non-zero; the
 * detach matcher passes on exactly the input when it does not complete and never more,
 * whatever the pieces it is fed in, and a completed sequence leaves out its keys. No
 * crash, no leak. */
#include "attachproto.h"
#include "fuzz.h"

/* Feeds in[0..n) in pieces of step bytes; the bytes passed on into out (room n +
 * ATTACH_MAX_KEYS), whether it detached. */
static bool feed_split(struct attach_keys *k, const uint8_t *in, size_t n, size_t step,
                       uint8_t *out, size_t *out_n)
{
    *out_n = 0;
    uint8_t *piece = malloc(step + ATTACH_MAX_KEYS);
    if (!piece)
        abort();
    for (size_t i = 0; i < n; i += step) {
        size_t len = n - i < step ? n - i : step;
        size_t got;
        bool done = attach_keys_feed(k, in + i, len, piece, &got);
        FUZZ_CHECK(got <= len + ATTACH_MAX_KEYS);
        memcpy(out + *out_n, piece, got);
        *out_n += got;
        if (done) {
            free(piece);
            return true;
        }
    }
    free(piece);
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t spec_len = data[0] & 15;
    if (spec_len > size - 1)
        spec_len = size - 1;
    char *spec = fuzz_cstr(data + 1, spec_len);
    const uint8_t *rest = data + 1 + spec_len;
    size_t n = size - 1 - spec_len;

    /* Frames. */
    size_t off = 0;
    while (off < n) {
        struct attach_frame f;
        long took = attach_parse(rest + off, n - off, &f);
        if (took <= 0)
            break;
        FUZZ_CHECK((size_t)took >= ATTACH_HEADER && (size_t)took <= n - off);
        FUZZ_CHECK(f.len <= ATTACH_MAX_PAYLOAD && f.payload == rest + off + ATTACH_HEADER);
        FUZZ_CHECK(f.len + ATTACH_HEADER == (size_t)took);
        unsigned rows, cols;
        if (attach_winsize_decode(&f, &rows, &cols) == 0)
            FUZZ_CHECK(f.len == 4 && rows && cols && rows <= 0xffff && cols <= 0xffff);
        /* The frame alone, cut short by a byte, asks for more. */
        struct attach_frame g;
        FUZZ_CHECK(attach_parse(rest + off, (size_t)took - 1, &g) == 0);
        off += (size_t)took;
    }

    /* Detach keys. */
    struct attach_keys k;
    char *err = NULL;
    if (attach_keys_parse(spec, &k, &err) < 0) {
        FUZZ_CHECK(err && strstr(err, "bad detach keys"));
        free(err);
        free(spec);
        return 0;
    }
    FUZZ_CHECK(k.n >= 1 && k.n <= ATTACH_MAX_KEYS);
    uint8_t *whole = malloc(n + ATTACH_MAX_KEYS + 1), *split = malloc(n + ATTACH_MAX_KEYS + 1);
    if (!whole || !split)
        abort();
    size_t whole_n, split_n;
    k.matched = 0;
    bool d1 = feed_split(&k, rest, n, n ? n : 1, whole, &whole_n);
    k.matched = 0;
    bool d2 = feed_split(&k, rest, n, 1 + (data[0] >> 4), split, &split_n);
    FUZZ_CHECK(d1 == d2 && whole_n == split_n && memcmp(whole, split, whole_n) == 0);
    if (!d1) /* what was held back at the end is a prefix of the keys */
        FUZZ_CHECK(whole_n + k.matched == n && memcmp(whole, rest, whole_n) == 0);
    else
        FUZZ_CHECK(whole_n + k.n <= n);
    free(whole);
    free(split);
    free(spec);
    return 0;
}
