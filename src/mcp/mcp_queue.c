/* mcp_queue: gflow's tools about the queue as a whole. get_queue_pressure sums up the
 * GPUs, the waiting and running jobs of every user and the reservations (pressure.c, as
 * `gflow status` does); list_reservations lists the GPU reservations; get_health says
 * whether gflowd answers, and its pid. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "mcp.h"
#include "pressure.h"

void mcp_tool_get_queue_pressure(const json_t *args, struct mcp_reply *reply)
{
    (void)args;
    json_t *gpus = NULL, *jobs = NULL, *resv = NULL;
    char *err = NULL;
    if (mcp_daemon_json("GET", "/v1/gpus", NULL, &gpus, NULL, &err) < 0 ||
        mcp_daemon_json("GET", "/v1/jobs?state=PD,H,R&user=all", NULL, &jobs, NULL, &err) < 0 ||
        mcp_daemon_json("GET", "/v1/reservations", NULL, &resv, NULL, &err) < 0) {
        reply->error = err;
    } else {
        reply->structured = pressure_build(gpus, json_object_get(jobs, "jobs"),
                                           json_object_get(resv, "reservations"), now_wall());
    }
    json_decref(gpus);
    json_decref(jobs);
    json_decref(resv);
}

void mcp_tool_list_reservations(const json_t *args, struct mcp_reply *reply)
{
    (void)args;
    json_t *resv = NULL;
    char *err = NULL;
    if (mcp_daemon_json("GET", "/v1/reservations", NULL, &resv, NULL, &err) < 0) {
        reply->error = err;
        return;
    }
    json_t *list = json_object_get(resv, "reservations");
    if (!json_is_array(list))
        list = json_array();
    else
        json_incref(list);
    reply->structured =
        json_pack("{s:o, s:I}", "reservations", list, "count", (json_int_t)json_array_size(list));
    json_decref(resv);
}

/* A daemon that does not answer is a result here ("ok": false, and why), not a tool
 * error: it is the answer to the question asked. */
void mcp_tool_get_health(const json_t *args, struct mcp_reply *reply)
{
    (void)args;
    json_t *health = NULL, *status = NULL;
    int code = 0;
    char *err = NULL;
    if (mcp_daemon_json("GET", "/v1/health", NULL, &health, &code, &err) < 0) {
        reply->structured =
            json_pack("{s:i, s:b, s:n, s:s}", "status", code, "ok", 0, "pid", "error", err);
        free(err);
        return;
    }
    json_t *pid = json_null();
    if (mcp_daemon_json("GET", "/v1/status", NULL, &status, NULL, &err) == 0 &&
        json_is_integer(json_object_get(status, "pid")))
        pid = json_incref(json_object_get(status, "pid"));
    free(err);
    reply->structured =
        json_pack("{s:i, s:b, s:o}", "status", code, "ok", code >= 200 && code < 300, "pid", pid);
    if (status) {
        json_object_set(reply->structured, "version", json_object_get(status, "version"));
        /* local or slurm, with the partition's nodes: is the backend answering too */
        json_t *backend = json_object_get(status, "backend");
        if (backend)
            json_object_set(reply->structured, "backend", backend);
    }
    json_decref(health);
    json_decref(status);
}
