/* A fork bomb from native code, run through `ctxkernel sandbox run`: forks children that
 * wait, until the kernel refuses or MAX attempts or SECONDS have passed, then says how
 * many it held. Bounded for a shared machine where the cap might fail: every child ends by
 * itself after 20 s (alarm), and the parent stops at MAX.
 *   forkbomb MAX SECONDS TAG   (TAG names the children in `ps`)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: forkbomb MAX SECONDS TAG\n");
        return 2;
    }
    long max = atol(argv[1]);
    time_t until = time(NULL) + atol(argv[2]);
    long held = 0, refused = 0;
    int first_errno = 0;
    for (long i = 0; i < max && time(NULL) < until; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            setsid();  /* no process group holds it */
            alarm(20);
            for (;;)
                pause();
        }
        if (pid > 0) {
            held++;
        } else {
            refused++;
            if (!first_errno) {
                first_errno = errno;
                /* at once (stderr): the launcher may end the tree before the summary */
                fprintf(stderr, "first refusal with %ld held (%s)\n", held, strerror(errno));
            }
            usleep(1000);
        }
    }
    sleep(2); /* for the launcher to see them */
    printf("held %ld refused %ld (%s)\n", held, refused, first_errno ? strerror(first_errno) : "-");
    fflush(stdout);
    return 0;
}
