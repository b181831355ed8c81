/* fuzz: what the libFuzzer harnesses of tests/fuzz share. Each harness defines
 * LLVMFuzzerTestOneInput; a broken invariant aborts with a message (libFuzzer then saves
 * the input as crash-<sha1>), as does anything ASan, UBSan or LeakSanitizer sees. */
#ifndef GFLOW_FUZZ_H
#define GFLOW_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts when cond is false, naming the check. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The same, printing two texts (what was expected, what came) first. */
#define FUZZ_CHECK_TEXT(cond, a, b)                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "first:  [%s]\nsecond: [%s]\n", (a), (b));                             \
            FUZZ_CHECK(cond);                                                                      \
        }                                                                                          \
    } while (0)

/* A NUL-terminated copy of the input (to free), for parsers of C strings. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
