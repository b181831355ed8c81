/* jsonrpc: the JSON-RPC 2.0 framing of MCP's stdio transport (jsonrpc.h). */
#include "jsonrpc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void jsonrpc_reader_init(struct jsonrpc_reader *r, int fd, size_t max)
{
    memset(r, 0, sizeof(*r));
    r->fd = fd;
    r->max = max;
    strbuf_init(&r->line);
}

void jsonrpc_reader_free(struct jsonrpc_reader *r)
{
    strbuf_free(&r->line);
}

/* Appends buf's bytes to the line, or drops them once the line is over its bound (so
 * that a client cannot make us hold more than max bytes). */
static void reader_take(struct jsonrpc_reader *r, const char *data, size_t n)
{
    if (r->overlong)
        return;
    if (r->line.len + n > r->max) {
        r->overlong = true;
        strbuf_free(&r->line);
        strbuf_init(&r->line);
        return;
    }
    strbuf_add(&r->line, data, n);
}

/* The finished line: its result, and the reader ready for the next. */
static enum jsonrpc_read reader_finish(struct jsonrpc_reader *r, const char **line, size_t *len)
{
    if (r->overlong) {
        r->overlong = false;
        return JSONRPC_TOO_LONG;
    }
    if (r->line.len && r->line.buf[r->line.len - 1] == '\r') /* tolerate CRLF */
        r->line.len--;
    strbuf_adds(&r->line, ""); /* allocated and terminated */
    *line = r->line.buf;
    *len = r->line.len;
    return JSONRPC_LINE;
}

enum jsonrpc_read jsonrpc_read_line(struct jsonrpc_reader *r, const char **line, size_t *len)
{
    strbuf_reset(&r->line);
    bool any = false; /* bytes of a line without its newline yet */
    for (;;) {
        if (r->pos == r->len) {
            ssize_t n = read(r->fd, r->buf, sizeof(r->buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return JSONRPC_ERROR;
            if (n == 0)
                return any ? reader_finish(r, line, len) : JSONRPC_EOF;
            r->pos = 0;
            r->len = (size_t)n;
        }
        const char *start = r->buf + r->pos;
        const char *nl = memchr(start, '\n', r->len - r->pos);
        size_t n = nl ? (size_t)(nl - start) : r->len - r->pos;
        reader_take(r, start, n);
        any = true;
        r->pos += n + (nl ? 1 : 0);
        if (nl)
            return reader_finish(r, line, len);
    }
}

/* An id as JSON-RPC allows it: a string or a number (null is not allowed in MCP). */
static bool id_valid(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id) || json_is_real(id);
}

void jsonrpc_parse(const char *line, size_t len, struct jsonrpc_msg *msg, json_t **error)
{
    memset(msg, 0, sizeof(*msg));
    msg->kind = JSONRPC_INVALID;
    *error = NULL;
    json_error_t jerr;
    msg->root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    json_t *root = msg->root;
    if (!root) {
        *error = jsonrpc_error(NULL, JSONRPC_PARSE_ERROR, "parse error: %s (column %d)", jerr.text,
                               jerr.column);
        return;
    }
    if (json_is_array(root)) {
        *error = jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                               "invalid request: batches are not part of MCP; send one "
                               "message per line");
        return;
    }
    if (!json_is_object(root)) {
        *error = jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                               "invalid request: a message is a JSON object");
        return;
    }
    json_t *id = json_object_get(root, "id");
    const json_t *reply_id = id_valid(id) ? id : NULL;
    const char *version = json_string_value(json_object_get(root, "jsonrpc"));
    if (!version || strcmp(version, "2.0") != 0) {
        *error = jsonrpc_error(reply_id, JSONRPC_INVALID_REQUEST,
                               "invalid request: \"jsonrpc\" must be \"2.0\"");
        return;
    }
    if (id && !id_valid(id)) {
        *error = jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                               "invalid request: \"id\" must be a string or a number");
        return;
    }
    json_t *method = json_object_get(root, "method");
    if (!method) {
        if (id && (json_object_get(root, "result") || json_object_get(root, "error"))) {
            msg->kind = JSONRPC_RESPONSE;
            msg->id = id;
            return;
        }
        *error = jsonrpc_error(reply_id, JSONRPC_INVALID_REQUEST, "invalid request: no \"method\"");
        return;
    }
    if (!json_is_string(method)) {
        *error = jsonrpc_error(reply_id, JSONRPC_INVALID_REQUEST,
                               "invalid request: \"method\" must be a string");
        return;
    }
    json_t *params = json_object_get(root, "params");
    if (params && !json_is_object(params) && !json_is_array(params)) {
        *error = jsonrpc_error(reply_id, JSONRPC_INVALID_REQUEST,
                               "invalid request: \"params\" must be an object");
        return;
    }
    msg->method = json_string_value(method);
    msg->params = params;
    msg->id = id;
    msg->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
}

void jsonrpc_msg_free(struct jsonrpc_msg *msg)
{
    json_decref(msg->root);
    memset(msg, 0, sizeof(*msg));
}

json_t *jsonrpc_result(const json_t *id, json_t *result)
{
    json_t *m = json_object();
    json_object_set_new(m, "jsonrpc", json_string("2.0"));
    json_object_set_new(m, "id", id ? json_deep_copy(id) : json_null());
    json_object_set_new(m, "result", result ? result : json_object());
    return m;
}

json_t *jsonrpc_error(const json_t *id, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = xvasprintf(fmt, ap);
    va_end(ap);
    json_t *message = jsonrpc_text(text, strlen(text));
    free(text);
    json_t *m = json_object();
    json_object_set_new(m, "jsonrpc", json_string("2.0"));
    json_object_set_new(m, "id", id ? json_deep_copy(id) : json_null());
    json_object_set_new(m, "error", json_pack("{s:i, s:o}", "code", code, "message", message));
    return m;
}

int jsonrpc_write(FILE *out, const json_t *msg)
{
    /* Compact JSON escapes every newline inside strings: the message is one line. */
    char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return -1;
    int rc = fputs(text, out) < 0 || fputc('\n', out) == EOF || fflush(out) != 0 ? -1 : 0;
    free(text);
    return rc;
}

json_t *jsonrpc_text(const char *text, size_t len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_add_utf8_clean(&sb, text, len);
    json_t *j = json_stringn(sb.buf ? sb.buf : "", sb.len);
    strbuf_free(&sb);
    return j;
}
