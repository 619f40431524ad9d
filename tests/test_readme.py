import re

from profdata import ROOT


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", section, re.S)
    assert len(blocks) == 2 and all("\n" not in b for b in blocks)  # exactly two one-line commands
    main_cmd, test_cmd = blocks
    assert main_cmd.startswith("python3 -m venv") and main_cmd.endswith("profkit analyse profiles")
    assert "python3 -m venv" in test_cmd and test_cmd.endswith("pytest -q -n 2")
    # lint, format and types run before the tests (the settings are pyproject.toml's)
    assert "ruff check profkit parsers kernels" in test_cmd and "ruff format --check" in test_cmd
    assert ".venv/bin/mypy &&" in test_cmd
    # CI installs Debian's chromium itself for the browser test, which fails (not skips) under CI=1
    assert test_cmd.startswith("(command -v chromium >/dev/null || (apt-get update")
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_cmd in ci and "export CI=1" in ci


def test_every_cli_command_is_in_the_readme():
    from profkit.cli import cli

    readme = (ROOT / "README.md").read_text()
    for name in cli.commands:
        assert f"profkit {name}" in readme, name
