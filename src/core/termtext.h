/* termtext: text from other users (job names, commands, reasons, messages) made safe to
 * print on a terminal. A terminal acts on control characters (C0 such as BEL and ESC,
 * C1 such as U+009B, the 8-bit CSI) and reorders text around bidi overrides and
 * isolates (U+202A-U+202E, U+2066-U+2069, the marks U+200E, U+200F and U+061C): printed
 * raw, a job's name could clear another user's screen or make a command read backwards.
 * Every human-readable output of the commands goes through termtext_escape; JSON keeps
 * the bytes exact. */
#ifndef GFLOW_TERMTEXT_H
#define GFLOW_TERMTEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* Keep newlines and tabs as they are (a whole message or a layout the program made);
 * without it they are escaped too (a table cell, a "Key: value" field: one line). */
#define TERMTEXT_KEEP_LAYOUT 1u

/* Whether s[0..n) prints as it is: no control character, no bidi control, valid UTF-8
 * (with flags, newlines and tabs allowed). Printable ASCII is answered in one pass. */
bool termtext_is_safe(const char *s, size_t n, unsigned flags);

/* Appends s[0..n) with each control character and bidi control written as a visible
 * escape of printable ASCII, one column a character: "\n", "\t", "\r", "\x1b" (C0 and
 * DEL), "\u009b" (C1, bidi); a byte that starts no valid UTF-8 sequence as "\xff". Other
 * text (UTF-8 of any script) is copied as it is. */
void termtext_escape(struct strbuf *sb, const char *s, size_t n, unsigned flags);

/* termtext_escape of a NUL-terminated string into a new one (NULL stays NULL). */
char *termtext_dup(const char *s, unsigned flags);

#endif
