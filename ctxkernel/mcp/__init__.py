"""MCP server: the agent tools of ``ctxkernel.tools`` served with the official ``mcp`` SDK's
low-level ``Server`` — over stdio (the client spawns ``ctxkernel mcp``) or streamable HTTP.

The tool list and input schemas come straight from the ToolSet (nothing is re-declared
here). One Workspace, and so one embedding model, lives for the whole server process;
calls run one at a time in a worker thread so the event loop keeps answering. A bad
argument or a failed lookup is a tool result with ``isError: true``, never a crash; a call
to a tool the server does not have is a protocol error (invalid params). Logs go to
stderr: on stdio, stdout is the protocol.

The doors a client could push on, and how each is shut:

- stdio: lines are cut from bounded reads (``MAX_LINE_BYTES``; a longer line is dropped as
  it streams in, never held whole), their nesting is measured before any parser recurses
  into them (``MAX_DEPTH``), and every request with an id gets a reply — a JSON-RPC error
  when the line is not JSON, not a request, or its handler fails. Notifications never get
  one. A pipe is read and written by asyncio's pipe transports on the event loop, not a
  thread per line (~1.5 ms less per call on a 2-core machine).
- HTTP: bound to loopback unless ``--host`` says otherwise (a warning then), and every
  request must carry the bearer token made at start (``secrets``, printed once, kept in a
  0600 file) or read from ``--token-file``; it is compared in constant time.
- check_kernel: a problem is code the server imports and runs, so a call may name one
  only under the folders given at start (:class:`roots.ProblemRoots`), symlinks resolved.

One module per part, each importing only those above it:

- ``toolserver``: ``ToolServer``, the SDK's ``Server`` over a ToolSet and the one worker
  lane its calls run in;
- ``roots``: ``ProblemRoots``, the folders check_kernel may take a problem from;
- ``lines``: one stdio line admitted or answered: bounded reads, nesting, the JSON-RPC
  error for a line that is not a request;
- ``stdio``: the stdio transport: the descriptors claimed, pipes served on the event loop,
  the SDK's streams with every request answered;
- ``http``: the HTTP transport: loopback, the bearer token and the gate that checks it;
- ``server``: ``serve()``, what ``ctxkernel mcp`` runs.

Import from the modules themselves; this package re-exports nothing.
"""
