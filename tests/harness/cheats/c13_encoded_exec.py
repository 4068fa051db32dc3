# cheat 13: exec a base64 payload
# problem: vector_add
# expect: pre-checks: dynamic code
import base64

exec(
    base64.b64decode(
        b"ZGVmIGN1c3RvbV9rZXJuZWwoaW5wdXRzKToKICAgIHJldHVybiBpbnB1dHNbMF0gKyBpbnB1dHNbMV0K"
    )
)
