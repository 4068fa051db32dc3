# cheat 15: fetch the answer over the network
# problem: vector_add
# options: policy_scan=false
# expect: run: network access
import socket


def custom_kernel(inputs):
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    return inputs[0]
