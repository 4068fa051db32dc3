# cheat 13: exec a decoded payload, the static scan switched off
# problem: vector_add
# options: policy_scan=false
# expect: compile: dynamic code
import base64

exec(
    base64.b64decode(
        b"ZGVmIGN1c3RvbV9rZXJuZWwoaW5wdXRzKToKICAgIHJldHVybiBpbnB1dHNbMF0gKyBpbnB1dHNbMV0K"
    )
)
