"""Typed errors: the CLI turns each into one line on stderr and a non-zero exit."""


class ProfkitError(Exception):
    exit_code = 1


class BadInput(ProfkitError):
    """A file that is truncated, of the wrong kind, or missing what profkit needs."""

    exit_code = 2

    def __init__(self, path, problem: str):
        problem = " ".join(str(problem).split())  # one line, even when a library's message has several
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}")


class ToolMissing(ProfkitError):
    exit_code = 3


class ToolFailed(ProfkitError):
    exit_code = 4


class NoSuchRun(ProfkitError):
    exit_code = 5


class BadArgument(ProfkitError):
    """An argument that names nothing usable (a selector, a range, a metric set)."""

    exit_code = 2
