/* reply: building a handler's answer (see reply.h). */
#include "reply.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void reply_response(struct reply *rep, unsigned status, struct MHD_Response *resp, const char *type)
{
    reply_clear(rep);
    rep->status = status;
    rep->response = resp;
    if (type && resp)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
}

void reply_json(struct reply *rep, unsigned status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    size_t len = strlen(text);
    text = xrealloc(text, len + 2);
    text[len++] = '\n';
    text[len] = '\0';
    reply_response(rep, status, MHD_create_response_from_buffer_with_free_callback(len, text, free),
                   "application/json");
}

void reply_error(struct reply *rep, unsigned status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = xvasprintf(fmt, ap);
    va_end(ap);
    reply_json(rep, status, json_pack("{s:s}", "error", msg));
    free(msg);
}

void reply_text(struct reply *rep, unsigned status, char *text, size_t len, const char *type)
{
    reply_response(rep, status, MHD_create_response_from_buffer_with_free_callback(len, text, free),
                   type ? type : "text/plain; charset=utf-8");
}

void reply_stream(struct reply *rep, reply_stream_fn fn, void *arg, void (*free_arg)(void *arg))
{
    reply_clear(rep);
    rep->status = 200;
    rep->stream = fn;
    rep->stream_arg = arg;
    rep->stream_free = free_arg;
}

void reply_clear(struct reply *rep)
{
    if (rep->response)
        MHD_destroy_response(rep->response);
    if (rep->stream_arg && rep->stream_free)
        rep->stream_free(rep->stream_arg);
    if (rep->work_arg && rep->work_free)
        rep->work_free(rep->work_arg);
    memset(rep, 0, sizeof(*rep));
}

void reply_defer(struct reply *rep, reply_work_fn fn, void *arg, void (*free_arg)(void *arg))
{
    reply_clear(rep);
    rep->status = 200;
    rep->work = fn;
    rep->work_arg = arg;
    rep->work_free = free_arg;
}
