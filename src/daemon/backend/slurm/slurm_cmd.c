/* slurm_cmd: the slurm backend's commands as children (see slurm_cmd.h). */
#include "slurm_cmd.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "subproc.h"

/* A Slurm command that takes longer is killed (and counts as failed). */
#define SLURM_CMD_TIMEOUT_SECS 60.0

void child_free(struct child *c)
{
    strbuf_free(&c->out);
    json_decref(c->update);
    if (c->script_path) {
        unlink(c->script_path);
        free(c->script_path);
    }
    free(c);
}

static void child_done(void *arg, bool reaped, int status, struct strbuf *out)
{
    struct child *c = arg;
    strbuf_free(&c->out);
    c->out = *out;
    strbuf_init(out);
    bool ok = reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    c->done(c, ok);
    child_free(c);
}

/* Runs argv (found in PATH) with envp (NULL: the daemon's), calling done when it has
 * exited. 0, or -1 (done is not called). */
int child_run(struct child *c, char *const *argv, char *const *envp)
{
    struct subproc_spec spec = {.argv = argv,
                                .envp = envp,
                                .stdin_fd = -1,
                                .capture_stdout = true,
                                .timeout = SLURM_CMD_TIMEOUT_SECS};
    return subproc_start(&spec, child_done, c) ? 0 : -1;
}

struct child *child_new(struct gflowd *d, int64_t job_id, child_done_cb done)
{
    struct child *c = xcalloc(1, sizeof(*c));
    c->d = d;
    c->job_id = job_id;
    c->done = done;
    strbuf_init(&c->out);
    return c;
}

/* The first line of a command's output, for a log line or a job's reason. */
char *first_line(const struct child *c)
{
    const char *s = c->out.len ? c->out.buf : "";
    size_t n = strcspn(s, "\n");
    return xasprintf("%.*s", (int)(n > 300 ? 300 : n), s);
}
