"""Stopping a helper process a test session started (an S3 server, Toxiproxy): by its PID, politely first."""

from __future__ import annotations

import subprocess


def stop(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM, and SIGKILL if it has not gone within ``grace_s``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(grace_s)
