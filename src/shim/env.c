/* env: the job's environment: reading it from --env-file / --env-fd (step 2), looking
 * up and replacing variables, and the per-copy environments of --tasks (step 4). */
#include "shim.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "files.h"
#include "util.h"

/* The variables --task-gpus sets for each copy; the env file's values are replaced. */
static const char *const shim_env_task_vars[] = {
    "CUDA_VISIBLE_DEVICES", "RANK",        "LOCAL_RANK", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",     "MASTER_ADDR", "MASTER_PORT"};
#define SHIM_ENV_N_TASK_VARS (sizeof(shim_env_task_vars) / sizeof(shim_env_task_vars[0]))

/* The whole content of fd from offset 0 (the writer left the offset at the end). */
static char *shim_env_read_fd(int fd, size_t *len)
{
    struct strbuf sb;
    strbuf_init(&sb);
    char tmp[16384];
    for (;;) {
        ssize_t n = pread(fd, tmp, sizeof(tmp), (off_t)sb.len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            strbuf_free(&sb);
            return NULL;
        }
        if (n == 0)
            break;
        strbuf_add(&sb, tmp, (size_t)n);
    }
    *len = sb.len;
    return strbuf_detach(&sb);
}

/* Step 2: reads the NUL-separated environment into ex->envp, then unlinks the file. */
int shim_env_read(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    size_t len;
    const char *path = o->env_file ? o->env_file : "--env-fd";
    char *buf;
    if (o->env_file) {
        buf = read_file(path, &len);
        int read_errno = errno;
        /* Unlink even if reading failed: the file may hold secrets. */
        unlink(path);
        errno = read_errno;
    } else {
        buf = shim_env_read_fd(o->env_fd, &len); /* its owner closes the fd */
    }
    if (!buf) {
        *err = xasprintf("cannot read env file %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = 0, cap = 16;
    char **envp = xmalloc(cap * sizeof(*envp));
    /* read_file NUL-terminates, so a last entry without its NUL ends there too. */
    for (char *p = buf; p < buf + len; p += strlen(p) + 1) {
        if (!*p)
            continue;
        if (*p == '=' || !strchr(p, '=')) {
            *err = xasprintf("env file %s: malformed entry (no KEY=)", path);
            free(envp);
            free(buf);
            return -1;
        }
        if (n + 2 > cap) {
            cap *= 2;
            envp = xrealloc(envp, cap * sizeof(*envp));
        }
        envp[n++] = p;
    }
    envp[n] = NULL;
    ex->envp = envp;
    ex->env_buf = buf;
    return 0;
}

/* The value of name in the job's environment, or NULL. */
const char *shim_env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

/* Replaces ex->envp by the job's environment without the variables of vars, then
 * vars ("KEY=value" entries that ex keeps). */
void shim_env_set(struct shim_exec *ex, char *const *vars, size_t nvars)
{
    size_t n = 0;
    while (ex->envp[n])
        n++;
    char **env = xmalloc((n + nvars + 1) * sizeof(*env));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool replaced = false;
        for (size_t j = 0; j < nvars && !replaced; j++) {
            size_t klen = (size_t)(strchr(vars[j], '=') - vars[j]) + 1;
            replaced = strncmp(ex->envp[i], vars[j], klen) == 0;
        }
        if (!replaced)
            env[k++] = ex->envp[i];
    }
    for (size_t j = 0; j < nvars; j++)
        env[k++] = vars[j];
    env[k] = NULL;
    free(ex->envp);
    ex->envp = env;
}

/* Whether env entry e sets one of the variables --task-gpus gives each copy. */
static bool shim_env_is_task_var(const char *e)
{
    for (size_t i = 0; i < SHIM_ENV_N_TASK_VARS; i++) {
        size_t n = strlen(shim_env_task_vars[i]);
        if (strncmp(e, shim_env_task_vars[i], n) == 0 && e[n] == '=')
            return true;
    }
    return false;
}

/* Whether env entry e sets GFLOW_GPU_UUIDS or NVIDIA_VISIBLE_DEVICES (--task-uuids). */
static bool shim_env_is_uuid_var(const char *e)
{
    return str_starts_with(e, "GFLOW_GPU_UUIDS=") || str_starts_with(e, "NVIDIA_VISIBLE_DEVICES=");
}

/* A TCP port of 127.0.0.1 that is free now: the kernel's pick for port 0. Another
 * program may take it before the job binds it, a race torchrun accepts as well. */
static int shim_env_free_port(int *port, char **err)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        *err = xasprintf("cannot pick a MASTER_PORT: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    *port = ntohs(a.sin_port);
    return 0;
}

/* With --task-gpus: builds every copy's environment, the job's with the rank
 * variables of that copy in place of the env file's. */
int shim_env_tasks(const struct shim_opts *o, struct shim_exec *ex, char **err)
{
    ex->ntasks = o->ntasks;
    if (!o->task_gpus)
        return 0;
    int port;
    if (shim_env_free_port(&port, err) < 0)
        return -1;
    size_t n = 0;
    while (ex->envp[n])
        n++;
    char world[16], master_port[16];
    snprintf(world, sizeof(world), "%d", o->ntasks);
    snprintf(master_port, sizeof(master_port), "%d", port);
    ex->task_envp = xcalloc((size_t)o->ntasks, sizeof(*ex->task_envp));
    for (int i = 0; i < o->ntasks; i++) {
        char rank[16];
        snprintf(rank, sizeof(rank), "%d", i);
        /* In the order of shim_env_task_vars. */
        const char *values[] = {o->task_gpus[i], rank,        rank,       world,
                                world,           "127.0.0.1", master_port};
        _Static_assert(sizeof(values) / sizeof(values[0]) == SHIM_ENV_N_TASK_VARS,
                       "a value for each task variable");
        char **env = xmalloc((n + SHIM_ENV_N_TASK_VARS + 3) * sizeof(*env));
        size_t k = 0;
        for (size_t j = 0; j < n; j++)
            if (!shim_env_is_task_var(ex->envp[j]) &&
                !(o->task_uuids && shim_env_is_uuid_var(ex->envp[j])))
                env[k++] = ex->envp[j];
        ex->task_env_shared = k;
        for (size_t j = 0; j < SHIM_ENV_N_TASK_VARS; j++)
            env[k++] = xasprintf("%s=%s", shim_env_task_vars[j], values[j]);
        if (o->task_uuids) { /* the copy's GPU by UUID too, as its CUDA_VISIBLE_DEVICES */
            env[k++] = xasprintf("GFLOW_GPU_UUIDS=%s", o->task_uuids[i]);
            env[k++] = xasprintf("NVIDIA_VISIBLE_DEVICES=%s", o->task_uuids[i]);
        }
        env[k] = NULL;
        ex->task_envp[i] = env;
    }
    return 0;
}
