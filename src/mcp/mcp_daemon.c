/* mcp_daemon: gflowd requests for gflow-mcp. The command-line helpers (src/cli/cli.c)
 * exit on an error; a server must instead hand every error back to the assistant, with
 * the daemon's own message, and go on serving. */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "mcp.h"

/* The error text of a non-2xx answer: the daemon's "error", or the start of whatever
 * came back (a proxy, another program on the socket). */
static char *daemon_error_text(const struct client_response *r)
{
    json_t *j = r->body.len ? json_loadb(r->body.buf, r->body.len, 0, NULL) : NULL;
    const char *msg = json_string_value(json_object_get(j, "error"));
    char *text;
    if (msg) {
        text = xstrdup(msg);
    } else {
        size_t n = r->body.len ? strcspn(r->body.buf, "\r\n") : 0;
        text = n ? xasprintf("HTTP %d: %.*s", r->status, (int)(n > 200 ? 200 : n), r->body.buf)
                 : xasprintf("HTTP %d from gflowd", r->status);
    }
    json_decref(j);
    return text;
}

int mcp_daemon_json(const char *method, const char *path, const json_t *body, json_t **reply,
                    int *status, char **err)
{
    *reply = NULL;
    if (status)
        *status = 0;
    char *text = NULL;
    if (body && !(text = json_dumps(body, JSON_COMPACT))) {
        *err = xstrdup("cannot encode the request as JSON");
        return -1;
    }
    struct client_response r;
    int rc = client_request(method, path, text, text ? strlen(text) : 0, "application/json", &r,
                            NULL, NULL, err);
    free(text);
    if (rc < 0)
        return -1;
    if (status)
        *status = r.status;
    if (r.status < 200 || r.status >= 300) {
        *err = daemon_error_text(&r);
        client_response_free(&r);
        return -1;
    }
    rc = 0;
    if (r.body.len) {
        json_error_t jerr;
        *reply = json_loadb(r.body.buf, r.body.len, 0, &jerr);
        if (!*reply) {
            *err = xasprintf("gflowd sent a reply that is not valid JSON (%s)", jerr.text);
            rc = -1;
        }
    }
    client_response_free(&r);
    return rc;
}

struct log_sink {
    struct strbuf *out;
    size_t max;
    bool keep_tail, cut;
};

/* Keeps the first max bytes (then stops reading), or a window holding the last max. */
static int log_chunk(const char *data, size_t len, void *arg)
{
    struct log_sink *s = arg;
    if (!s->keep_tail) {
        size_t room = s->max - s->out->len;
        strbuf_add(s->out, data, len < room ? len : room);
        if (len > room) {
            s->cut = true;
            return -1;
        }
        return 0;
    }
    strbuf_add(s->out, data, len);
    if (s->out->len > 2 * s->max) { /* drop the front now and then, not per chunk */
        size_t drop = s->out->len - s->max;
        memmove(s->out->buf, s->out->buf + drop, s->max);
        s->out->len = s->max;
        s->out->buf[s->max] = '\0';
        s->cut = true;
    }
    return 0;
}

int mcp_daemon_log(int64_t id, const char *query, size_t max, bool keep_tail, struct strbuf *out,
                   bool *cut, int *status, char **err)
{
    struct log_sink sink = {out, max, keep_tail, false};
    char *path = xasprintf("/v1/jobs/%lld/log%s%s", (long long)id, query && *query ? "?" : "",
                           query ? query : "");
    struct client_response r;
    int rc = client_request("GET", path, NULL, 0, NULL, &r, log_chunk, &sink, err);
    free(path);
    *status = 0;
    if (rc < 0)
        return -1;
    *status = r.status;
    if (r.status < 200 || r.status >= 300) {
        *err = daemon_error_text(&r);
        client_response_free(&r);
        return -1;
    }
    client_response_free(&r);
    if (keep_tail && out->len > max) {
        size_t drop = out->len - max;
        memmove(out->buf, out->buf + drop, max);
        out->len = max;
        out->buf[max] = '\0';
        sink.cut = true;
    }
    *cut = sink.cut;
    return 0;
}
