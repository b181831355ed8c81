/* sdnotify: the datagram systemd waits for (see sdnotify.h). */
#include "sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un notify_addr;
static socklen_t notify_len; /* 0: no socket */

void sdnotify_init(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    size_t len = path ? strlen(path) : 0;
    /* An absolute path, or '@' for a name in the abstract namespace (leading NUL). */
    if (len >= 2 && len < sizeof(notify_addr.sun_path) && (path[0] == '/' || path[0] == '@')) {
        notify_addr.sun_family = AF_UNIX;
        memcpy(notify_addr.sun_path, path, len);
        if (path[0] == '@')
            notify_addr.sun_path[0] = '\0';
        notify_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    }
    unsetenv("NOTIFY_SOCKET");
}

int sdnotify_send(const char *msg)
{
    if (!notify_len)
        return 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    ssize_t n =
        sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&notify_addr, notify_len);
    int saved = errno;
    close(fd);
    errno = saved;
    return n < 0 ? -1 : 0;
}
