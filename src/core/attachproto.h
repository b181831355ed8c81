/* attachproto: the protocol between `gjob attach` and the gflow-shim of a --pty job, over
 * the Unix stream socket in the job's attach directory (run/<id>.attach/sock). Pure code
 * (no I/O), shared by both sides and unit-tested: the frames, and the detach key
 * sequence the client watches its user's input for.
 *
 * A frame is a one-byte type, a four-byte big-endian payload length, then the payload
 * (at most ATTACH_MAX_PAYLOAD bytes; a longer length is a protocol error and the peer
 * is dropped). Client to shim: HELLO first (one flags byte: ATTACH_HELLO_READ_ONLY),
 * then DATA (keyboard input, taken from the writer only) and WINSIZE (rows and columns,
 * two bytes each, big-endian; from the writer only). Shim to client: DATA (the job's
 * terminal output), NOTE (a line for the user: "you are a viewer", "permission
 * denied"), END (the job's terminal is closed: the job is over). */
#ifndef GFLOW_ATTACHPROTO_H
#define GFLOW_ATTACHPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ATTACH_HEADER 5
#define ATTACH_MAX_PAYLOAD (64 * 1024)
#define ATTACH_HELLO_READ_ONLY 0x01
/* The detach sequence's longest form (keys, not characters of its text). */
#define ATTACH_MAX_KEYS 8

enum attach_type {
    ATTACH_HELLO = 'H',
    ATTACH_DATA = 'D',
    ATTACH_WINSIZE = 'W',
    ATTACH_NOTE = 'N',
    ATTACH_END = 'E',
};

/* Writes a frame's header for type and len into out (ATTACH_HEADER bytes). */
void attach_header(uint8_t *out, enum attach_type type, size_t len);

/* A frame found at the start of a buffer: its type and payload (pointing into it). */
struct attach_frame {
    enum attach_type type;
    const uint8_t *payload;
    size_t len;
};

/* Parses the frame at the start of buf[0..n). Returns the bytes it takes (header and
 * payload), 0 when more bytes are needed, or -1 when the stream is broken (an unknown
 * type, a payload over ATTACH_MAX_PAYLOAD). */
long attach_parse(const uint8_t *buf, size_t n, struct attach_frame *f);

/* The payload of a WINSIZE frame (4 bytes) and back. Decoding fails (-1) on a wrong
 * length or a zero dimension. */
void attach_winsize_encode(uint8_t *out, unsigned rows, unsigned cols);
int attach_winsize_decode(const struct attach_frame *f, unsigned *rows, unsigned *cols);

/* The detach key sequence, as `--detach-keys` gives it: keys separated by commas, each
 * a single character or "ctrl-X" (X a letter or one of @[\]^_). */
struct attach_keys {
    uint8_t key[ATTACH_MAX_KEYS];
    size_t n;
    size_t matched; /* how many of them the input has matched so far */
};

/* Parses spec into k. 0, or -1 with *err (caller frees) saying what is wrong. */
int attach_keys_parse(const char *spec, struct attach_keys *k, char **err);

/* Feeds the user's input in[0..n) through the detach matcher. The bytes to pass on to
 * the job go to out (room for n + ATTACH_MAX_KEYS bytes), their count to *out_n: the
 * keys of a partial match are held back until the match fails (then they go out) or
 * completes (then they never do). Returns true when the sequence completed: out then
 * holds what came before it and the rest of in is not used. */
bool attach_keys_feed(struct attach_keys *k, const uint8_t *in, size_t n, uint8_t *out,
                      size_t *out_n);

#endif
