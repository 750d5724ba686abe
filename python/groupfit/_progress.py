"""Progress of a training job in Python: a bar, and the user's callback.

The engine calls a :class:`Reporter` with ``(stage, done, total,
models_done, models)`` as the job goes: from its worker threads, at most
every 100 ms while training. ``done`` and ``total`` are work in the
planner's units (see ``docs/progress.md``). The reporter keeps ``done`` from
going back, passes ``(stage, done, total, elapsed)`` to the callback, and
draws a bar: ``tqdm.auto`` when it is installed, else a plain line.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Optional

#: Seconds before a bar is drawn.
DELAY_S = 1.0
#: Least seconds between two draws of the plain line.
EVERY_S = 0.1


def wanted(progress: Optional[bool]) -> bool:
    """Whether to draw a bar: ``progress`` if given, else when stderr is a
    terminal or the code runs in a notebook."""
    if progress is not None:
        return bool(progress)
    try:
        if sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return _in_notebook()


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except AttributeError:
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def eta(fraction: float, elapsed: float) -> Optional[float]:
    """Seconds left at the rate so far (``None`` until 1% of the work and
    half a second of training)."""
    if fraction < 0.01 or elapsed < 0.5:
        return None
    return elapsed * (1.0 - fraction) / fraction


def clock(seconds: Optional[float]) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour); ``?`` when unknown."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


class Reporter:
    """The engine's progress callable for one job."""

    def __init__(self, show: bool, callback: Optional[Callable[..., Any]] = None):
        self.start = time.monotonic()
        self.callback = callback
        self.bar = _make_bar() if show else None
        self.lock = threading.Lock()
        self.stage = "reading"
        self.done = 0.0
        self.total = 0.0
        self.models = (0, 0)
        self.training: Optional[float] = None
        self.sent: Optional[tuple] = None

    def __call__(self, stage: str, done: float, total: float, models_done: int, models: int) -> None:
        with self.lock:
            now = time.monotonic()
            if stage == "training" and self.training is None:
                self.training = now
            self.stage = stage
            # Work never goes back; stages after training keep its total.
            self.done = max(self.done, float(done))
            if total > 0:
                self.total = max(float(total), self.done)
            if models > 0:
                self.models = (models_done, models)
            self._send(now)

    def _send(self, now: float) -> None:
        event = (self.stage, self.done, self.total)
        if self.callback is not None and event != self.sent:
            self.sent = event
            callback = self.callback
            # One exception is enough: the engine raises it when training ends.
            self.callback = None
            callback(self.stage, self.done, self.total, now - self.start)
            self.callback = callback
        if self.bar is not None:
            fraction = self.done / self.total if self.total > 0 else 0.0
            left = None
            if self.stage == "training" and self.training is not None:
                left = eta(fraction, now - self.training)
            self.bar.show(self.stage, fraction, left, self.models, now - self.start)

    def close(self) -> None:
        """Ends the job's events at ``done == total`` and clears the bar."""
        with self.lock:
            if self.total <= 0:
                self.total = self.done if self.done > 0 else 1.0
            self.done = self.total
            self._send(time.monotonic())
            if self.bar is not None:
                self.bar.close()


def _make_bar():
    try:
        from tqdm.auto import tqdm  # noqa: F401
    except ImportError:
        return _Line()
    return _Tqdm()


class _Tqdm:
    """A ``tqdm.auto`` bar in percent, drawn after a second."""

    def __init__(self):
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=100,
            delay=DELAY_S,
            mininterval=EVERY_S,
            bar_format="{desc:>8} |{bar}| {percentage:3.0f}% {elapsed} {postfix}",
            leave=False,
        )

    def show(self, stage, fraction, left, models, elapsed) -> None:
        self.bar.set_description_str(stage, refresh=False)
        postfix = _postfix(stage, left, models)
        self.bar.set_postfix_str(postfix, refresh=False)
        self.bar.n = round(100.0 * fraction, 1)
        self.bar.update(0)

    def close(self) -> None:
        self.bar.close()


class _Line:
    """One line on stderr, redrawn in place, after a second."""

    def __init__(self):
        self.drawn = 0.0
        self.width = 0

    def show(self, stage, fraction, left, models, elapsed) -> None:
        now = time.monotonic()
        if elapsed < DELAY_S or now - self.drawn < EVERY_S:
            return
        self.drawn = now
        text = f"{stage:>8} {100.0 * fraction:3.0f}% {clock(elapsed)} {_postfix(stage, left, models)}".rstrip()
        sys.stderr.write("\r" + text.ljust(self.width))
        sys.stderr.flush()
        self.width = len(text)

    def close(self) -> None:
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def _postfix(stage: str, left: Optional[float], models: tuple) -> str:
    done, total = models
    parts = []
    if stage == "training":
        parts.append(f"ETA {clock(left)}")
    if total:
        parts.append(f"{done:,}/{total:,} models")
    return "  ".join(parts)
