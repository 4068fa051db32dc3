/* Escape attempts from native code, run through `ctxkernel sandbox run` by test_walls.py.
 *
 * argv: TCP_PORT UNIX_SOCKET PATH... ; each PATH is a folder it tries to create a file in.
 * Prints one line per attempt: "<what> ok" when the door was open, "<what> refused <errno>"
 * when it was shut; its own working folder must be writable ("cwd ok"). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char *what, int ok, int err) {
    if (ok) printf("%s ok\n", what);
    else printf("%s refused %s\n", what, strerrorname_np(err) ? strerrorname_np(err) : "?");
    fflush(stdout);
}

static void try_write(const char *what, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/.ctxkernel-escape-%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = errno;
    if (fd >= 0) {
        (void)!write(fd, "x", 1);
        close(fd);
        unlink(path);
    }
    char label[4200];
    snprintf(label, sizeof label, "%s %s", what, dir);
    report(label, fd >= 0, err);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    try_write("write", ".");
    for (int i = 3; i < argc; i++) try_write("write", argv[i]);

    int s = socket(AF_INET, SOCK_STREAM, 0);
    int err = errno;
    if (s >= 0) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int rc = connect(s, (struct sockaddr *)&a, sizeof a);
        err = errno;
        report("connect-tcp", rc == 0, err);
        close(s);
    } else report("connect-tcp", 0, err);

    s = socket(AF_UNIX, SOCK_STREAM, 0);
    err = errno;
    if (s >= 0) {
        struct sockaddr_un u = {.sun_family = AF_UNIX};
        strncpy(u.sun_path, argv[2], sizeof u.sun_path - 1);
        int rc = connect(s, (struct sockaddr *)&u, sizeof u);
        err = errno;
        report("connect-unix", rc == 0, err);
        close(s);
    } else report("connect-unix", 0, err);

    pid_t parent = getppid();
    long rc = ptrace(PTRACE_ATTACH, parent, 0, 0);
    report("ptrace-parent", rc == 0 && parent > 1, errno);
    char buf[64];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)0x400000, sizeof buf};
    ssize_t n = process_vm_readv(parent, &local, 1, &remote, 1, 0);
    report("process_vm_readv-parent", n > 0, errno);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)parent);
    int fd = open(path, O_RDONLY);
    err = errno;
    ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
    if (fd >= 0) err = errno;
    report("environ-parent", got > 0, err);
    if (fd >= 0) close(fd);

    /* kernel objects named machine-wide, and another process's limits and priority */
    int shm = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    report("sysv-shmget", shm >= 0, errno);
    if (shm >= 0) shmctl(shm, IPC_RMID, 0);
    long mq = syscall(SYS_mq_open, "ctxkernel-escape", O_RDWR | O_CREAT, 0600, (void *)0);
    report("mq_open", mq >= 0, errno);
    if (mq >= 0) syscall(SYS_mq_unlink, "ctxkernel-escape");
    struct rlimit lim;
    int got_lim = parent > 0 ? prlimit(parent, RLIMIT_CORE, 0, &lim) : -1;
    rc = parent > 0 && got_lim == 0 ? prlimit(parent, RLIMIT_CORE, &lim, 0) : (errno = ESRCH, -1);
    report("prlimit-parent", rc == 0, errno);
    rc = parent > 0 ? setpriority(PRIO_PROCESS, parent, getpriority(PRIO_PROCESS, parent)) : (errno = ESRCH, -1);
    report("setpriority-parent", rc == 0, errno);

    /* a chain of forks, each parent gone as soon as its child is born, racing the reaper
       for a second after this process ends, then a sleeper */
    if (fork() == 0) {
        setsid();
        time_t end = time(0) + 2;
        while (time(0) < end)
            if (fork() > 0) _exit(0);
        execl("/bin/sleep", "sleep", "31.4159", (char *)0);
        _exit(0);
    }
    printf("spawned fork chain\n");

    pid_t child = fork();
    if (child == 0) {
        setsid();
        if (fork() == 0) {
            execl("/bin/sleep", "sleep", "31.4159", (char *)0);
            _exit(0);
        }
        _exit(0);
    }
    waitpid(child, 0, 0);
    printf("spawned setsid sleeper\n");
    return 0;
}
