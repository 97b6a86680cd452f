"""The installed `ripple` command run as a user would: to its end, for its output, or in the
background in its own process group, its output collected line by line, stopped with Ctrl-C
(SIGINT to the group) or killed with SIGKILL."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Self

from ripple.config import ENVIRONMENT_VARIABLES

RIPPLE = Path(sys.executable).with_name("ripple")


def environment(**env: str) -> dict[str, str]:
    """This process's environment without RIPPLE_* variables, plus `env`."""
    environ = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    environ.update(env)
    environ["COLUMNS"] = "250"  # keep rich from wrapping long paths
    return environ


def ripple(cwd: Path, *args: str, **env: str) -> str:
    """`ripple ARGS…` in `cwd` with RIPPLE_* variables `env` only; its output (it must
    succeed)."""
    done = subprocess.run(
        [str(RIPPLE), *args],
        cwd=cwd,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def credentials(output: str) -> tuple[str, str]:
    """The access key and secret key `ripple user create` printed."""
    access = re.search(r"access key: (\S+)", output)
    secret = re.search(r"secret key: (\S+)", output)
    assert access, output
    assert secret, output
    return access.group(1), secret.group(1)


def table_rows(output: str) -> dict[str, str]:
    """The label -> value rows of a table ripple prints."""
    rows: dict[str, str] = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│") if c.strip()]
        if len(cells) == 2:
            rows[cells[0]] = cells[1]
    return rows


class RippleProcess:
    """`ripple ARGS…` running in the background until `interrupt()` or `kill()`."""

    def __init__(self, cwd: Path, *args: str, **env: str) -> None:
        self.process = subprocess.Popen(
            [str(RIPPLE), *args],
            cwd=cwd,
            env=environment(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, like a job in a terminal
        )
        self._lock = threading.Lock()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self._stdout)),
            threading.Thread(target=self._read, args=(self.process.stderr, self._stderr)),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            with self._lock:
                into.append(line)

    @property
    def stdout(self) -> str:
        with self._lock:
            return "".join(self._stdout)

    @property
    def stderr(self) -> str:
        with self._lock:
            return "".join(self._stderr)

    def wait_for_output(self, text: str, timeout: float = 120.0) -> None:
        """Wait until stdout holds `text`; fail with the output if the process ends first."""
        deadline = time.monotonic() + timeout
        while text not in self.stdout:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.finish(0)
                raise AssertionError(
                    f"ripple never printed {text!r} (exit {self.process.returncode})\n"
                    f"stdout:\n{self.stdout}\nstderr:\n{self.stderr[-5000:]}"
                )
            time.sleep(0.05)

    def interrupt(self, timeout: float = 120.0, signum: int = signal.SIGINT) -> int:
        """Ctrl-C (or, with SIGTERM, what `timeout` and service managers send): the signal to
        the whole process group; the exit code."""
        os.killpg(self.process.pid, signum)
        return self.finish(timeout)

    def kill(self) -> None:
        """SIGKILL to the whole process group (ripple, its JVM and Python workers)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.finish(60)

    def finish(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            code = self.process.wait(60)
        for reader in self._readers:
            reader.join(10)
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.kill()
