"""The warm check server: ``client.py`` (what a one-shot ``check`` runs, and what both
sides share: the fingerprint, the socket's place, the frames) and ``daemon.py`` (the
per-user background parent that keeps torch and the worker templates warm)."""
