/* pidfd: the pidfd system calls, which glibc before 2.36 does not wrap. A pidfd names
 * one process for good: a signal through it never reaches a process that got its pid
 * later (prockill.h), and it turns readable when the process exits (epoll). */
#ifndef GFLOW_PIDFD_H
#define GFLOW_PIDFD_H

#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* A pidfd of pid (close-on-exec), or -1 with errno. */
static inline int sys_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Sends sig through pidfd, with info (NULL: as kill(2) would): 0, or -1 with errno. */
static inline int sys_pidfd_send_signal(int pidfd, int sig, siginfo_t *info)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, info, 0);
}

#endif
