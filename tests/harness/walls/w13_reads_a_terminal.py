# wall: open a terminal of the same user for reading (what is typed in it: a password),
# found under /dev/pts
# expect: run: Permission denied | No such file
import os


def custom_kernel(inputs):
    x, y = inputs
    fd = os.open("__TTY__", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    os.close(fd)
    return x + y
