"""Which file a parse has reached. The parse box (box.py) listens in its child, so that a refusal after a limit
killed the child can still name the file; outside a box nobody listens."""

_listener = None


def reached(name: str) -> None:
    if _listener is not None:
        _listener(name)


def listen(callback) -> None:
    global _listener
    _listener = callback
