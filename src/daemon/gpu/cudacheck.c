/* cudacheck: CUDA's own view of the GPUs, asked in a child (see cudacheck.h). */
#include "cudacheck.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gflow_build.h"
#include "paths.h"
#include "subproc.h"
#include "util.h"

extern char **environ;

#define CUDA_ERROR_NO_DEVICE 100

struct cudacheck {
    struct subproc *proc;
    cudacheck_done_cb done;
    void *arg;
};

/* ---- the child ---- */

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_uuid_fn)(unsigned char *, int);
typedef int (*cu_name_fn)(int, const char **);

/* What CUDA calls error rc ("CUDA_ERROR_NO_DEVICE"), or its number. */
static const char *cu_error_name(void *lib, int rc)
{
    static char num[32];
    cu_name_fn name = (cu_name_fn)dlsym(lib, "cuGetErrorName");
    const char *s = NULL;
    if (name && name(rc, &s) == 0 && s)
        return s;
    snprintf(num, sizeof(num), "error %d", rc);
    return num;
}

int cudacheck_child_main(const char *library)
{
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("absent %s\n", dlerror());
        return 0;
    }
    cu_init_fn init = (cu_init_fn)dlsym(lib, "cuInit");
    cu_count_fn count = (cu_count_fn)dlsym(lib, "cuDeviceGetCount");
    cu_get_fn get = (cu_get_fn)dlsym(lib, "cuDeviceGet");
    cu_uuid_fn uuid = (cu_uuid_fn)dlsym(lib, "cuDeviceGetUuid_v2");
    if (!uuid)
        uuid = (cu_uuid_fn)dlsym(lib, "cuDeviceGetUuid");
    if (!init || !count || !get || !uuid) {
        printf("error %s lacks cuInit, cuDeviceGetCount, cuDeviceGet or cuDeviceGetUuid\n",
               library);
        return 0;
    }
    int rc = init(0), n = 0;
    if (rc == CUDA_ERROR_NO_DEVICE) { /* a view too: no device at all */
        printf("error cuInit: %s\ncount 0\n", cu_error_name(lib, rc));
        return 0;
    }
    if (rc != 0 || (rc = count(&n)) != 0) {
        printf("error %s: %s\n", n ? "cuDeviceGetCount" : "cuInit", cu_error_name(lib, rc));
        return 0;
    }
    printf("count %d\n", n);
    for (int i = 0; i < n; i++) {
        int dev = 0;
        unsigned char b[16];
        if ((rc = get(&dev, i)) != 0 || (rc = uuid(b, dev)) != 0) {
            printf("error cuDeviceGetUuid(%d): %s\n", i, cu_error_name(lib, rc));
            return 0;
        }
        printf("uuid ");
        for (int k = 0; k < 16; k++)
            printf("%02x", b[k]);
        printf("\n");
    }
    return 0;
}

/* ---- the daemon's side ---- */

/* The CUDA driver to ask: $GFLOW_CUDA_LIBRARY, else for simulated GPUs the simulator's
 * fake (the real one would answer for other GPUs), else libcuda.so.1. */
static char *cuda_library(bool simulated)
{
    const char *env = getenv("GFLOW_CUDA_LIBRARY");
    if (env && *env)
        return xstrdup(env);
    if (simulated)
        return paths_companion("libgflow-cuda-sim.so", R_OK, NULL, GFLOW_LIBDIR);
    return xstrdup("libcuda.so.1");
}

/* gflowd's environment as a job's: CUDA_DEVICE_ORDER=PCI_BUS_ID, no
 * CUDA_VISIBLE_DEVICES. */
static char **child_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = xcalloc(n + 2, sizeof(*env));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!str_starts_with(environ[i], "CUDA_VISIBLE_DEVICES=") &&
            !str_starts_with(environ[i], "CUDA_DEVICE_ORDER="))
            env[k++] = environ[i];
    env[k] = "CUDA_DEVICE_ORDER=PCI_BUS_ID";
    return env;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One "uuid <32 hex>" line into view->uuids[i]; false if malformed. */
static bool parse_uuid(const char *hex, char out[16])
{
    for (int k = 0; k < 16; k++) {
        int hi = hex_digit(hex[2 * k]), lo = hi < 0 ? -1 : hex_digit(hex[2 * k + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[k] = (char)(hi << 4 | lo);
    }
    return true;
}

/* The child's lines into view (its outcome SEEN, ABSENT or FAILED). */
static void parse_output(char *text, struct cudacheck_view *view)
{
    int got = 0;
    view->outcome = CUDACHECK_FAILED;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (str_starts_with(line, "absent ")) {
            view->outcome = CUDACHECK_ABSENT;
            free(view->error);
            view->error = xstrdup(line + 7);
        } else if (str_starts_with(line, "error ")) {
            free(view->error);
            view->error = xstrdup(line + 6);
        } else if (str_starts_with(line, "count ") && !view->uuids) {
            view->count = atoi(line + 6);
            if (view->count < 0 || view->count > 1024)
                view->count = 0;
            view->uuids = xcalloc((size_t)view->count + 1, sizeof(*view->uuids));
            view->outcome = CUDACHECK_SEEN;
        } else if (str_starts_with(line, "uuid ") && view->uuids && got < view->count) {
            if (parse_uuid(line + 5, view->uuids[got]))
                got++;
        }
    }
    if (view->outcome == CUDACHECK_SEEN && got < view->count) {
        view->outcome = CUDACHECK_FAILED;
        if (!view->error)
            view->error = xasprintf("only %d of %d UUIDs read", got, view->count);
    }
    if (view->outcome == CUDACHECK_FAILED && !view->error)
        view->error = xstrdup("no answer");
}

static void finish(struct cudacheck *c, struct cudacheck_view *view)
{
    c->done(c->arg, view);
    free(view->uuids);
    free(view->error);
    free(c);
}

static void child_done(void *arg, bool reaped, int status, struct strbuf *out)
{
    struct cudacheck *c = arg;
    struct cudacheck_view view = {0};
    if (reaped && WIFSIGNALED(status)) {
        view.outcome = CUDACHECK_FAILED;
        view.error = WTERMSIG(status) == SIGKILL
                         ? xasprintf("no answer in %.0f s", CUDACHECK_TIMEOUT)
                         : xasprintf("the check died of signal %d", WTERMSIG(status));
    } else {
        strbuf_addc(out, '\0');
        parse_output(out->buf, &view);
    }
    finish(c, &view);
}

struct cudacheck *cudacheck_start(bool simulated, cudacheck_done_cb done, void *arg)
{
    struct cudacheck *c = xcalloc(1, sizeof(*c));
    c->done = done;
    c->arg = arg;
    char *library = cuda_library(simulated);
    char **env = child_env();
    char *argv[] = {"/proc/self/exe", "__cuda-check", library, NULL};
    struct subproc_spec spec = {.argv = argv,
                                .envp = env,
                                .stdin_fd = -1,
                                .capture_stdout = true,
                                .timeout = CUDACHECK_TIMEOUT};
    c->proc = subproc_start(&spec, child_done, c);
    int e = errno;
    free(env);
    free(library);
    if (!c->proc) {
        struct cudacheck_view view = {.outcome = CUDACHECK_FAILED,
                                      .error = xasprintf("cannot start it: %s", strerror(e))};
        finish(c, &view);
        return NULL;
    }
    return c;
}

bool cudacheck_wait(struct cudacheck *c, double secs)
{
    return subproc_wait(c->proc, secs);
}

void cudacheck_cancel(struct cudacheck *c)
{
    if (!c)
        return;
    subproc_forget(c->proc);
    free(c);
}
