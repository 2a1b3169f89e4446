"""The errors a user can cause. Everything else is a bug and propagates as-is.

Callers at the edge turn these into one clear line (CLI: exit code 2), an empty
result plus a logged reason (LSP), or a typed error message (websocket).
"""


class InfillError(Exception):
    """Base class: a problem with the user's input, files or model, not a bug."""


class InputError(InfillError):
    """Unusable input: missing or binary file, bad encoding, no holes, bad position."""


class ModelLoadError(InfillError):
    """A model directory that is missing, incomplete, corrupt or of another architecture."""


class RequestError(InfillError):
    """A FillRequest that cannot be served (holes out of range or overlapping, bad options)."""


class Cancelled(InfillError):
    """The fill was cancelled between denoising steps (a newer keystroke, Ctrl-C, a deadline)."""
